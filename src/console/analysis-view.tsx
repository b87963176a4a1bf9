/** A settled call analysis: summary, data fields and criteria with their rationales. */
import type { Analysis } from './api.ts';

export function AnalysisView({ analysis }: { analysis: Analysis }) {
  return (
    <div>
      <p><strong>Status:</strong> {analysis.status}</p>
      {analysis.summary && <p><strong>Summary:</strong> {analysis.summary}</p>}
      {analysis.data.length > 0 && (
        <div class="table-wrap" tabIndex={0}>
          <table class="stack">
            <caption>Data fields</caption>
            <thead><tr><th scope="col">Field</th><th scope="col">Value</th><th scope="col">Why</th></tr></thead>
            <tbody>{analysis.data.map((d) => <tr key={d.name}><th scope="row">{d.name}</th><td>{d.value === null ? '—' : String(d.value)}</td><td>{d.rationale}</td></tr>)}</tbody>
          </table>
        </div>
      )}
      {analysis.criteria_results.length > 0 && (
        <div class="table-wrap" tabIndex={0}>
          <table class="stack">
            <caption>Criteria</caption>
            <thead><tr><th scope="col">Criterion</th><th scope="col">Result</th><th scope="col">Why</th></tr></thead>
            <tbody>{analysis.criteria_results.map((c) => <tr key={c.name}><th scope="row">{c.name}</th><td>{c.result}</td><td>{c.rationale}</td></tr>)}</tbody>
          </table>
        </div>
      )}
    </div>
  );
}
