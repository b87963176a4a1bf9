/** Per-turn latency: a stacked bar per turn (SVG, so the page's CSP needs no inline style) and the same figures as a table. */
import type { TurnMetricsRow } from './api.ts';

const PARTS = [
  ['recognition_ms', 'Recognition', 's-recognition'],
  ['decide_ms', 'Turn wait', 's-decide'],
  ['model_ms', 'Model', 's-model'],
  ['synthesis_ms', 'Synthesis', 's-synthesis'],
  ['platform_ms', 'Platform', 's-platform'],
] as const;

const ms = (v: number | null) => (v === null ? '—' : `${Math.round(v)} ms`);

export function LatencyTable({ turns, caption }: { turns: TurnMetricsRow[]; caption: string }) {
  return (
    <div class="table-wrap" tabIndex={0}>
      <table>
        <caption>{caption}</caption>
        <thead><tr><th scope="col">Turn</th>{PARTS.map(([, label]) => <th scope="col" class="num" key={label}>{label}</th>)}<th scope="col" class="num">Total</th></tr></thead>
        <tbody>
          {turns.map((t) => (
            <tr key={t.turn_id}><th scope="row">{t.turn_id}</th>{PARTS.map(([k]) => <td class="num" key={k}>{ms(t[k])}</td>)}<td class="num">{ms(t.total_ms)}</td></tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function LatencyChart({ turns }: { turns: TurnMetricsRow[] }) {
  const max = Math.max(1, ...turns.map((t) => PARTS.reduce((n, [k]) => n + (t[k] ?? 0), 0)));
  const rowH = 22;
  const labelW = 60;
  const width = 600;
  return (
    <figure>
      <svg class="chart" viewBox={`0 0 ${width} ${turns.length * rowH + 4}`} role="img" aria-label="Latency of each turn, split by stage (the table below has the figures)">
        {turns.map((t, i) => {
          let x = labelW;
          return (
            <g key={t.turn_id}>
              <text x={0} y={i * rowH + 15} font-size="12">Turn {t.turn_id}</text>
              {PARTS.map(([k, label, cls]) => {
                const w = ((t[k] ?? 0) / max) * (width - labelW - 4);
                const rect = <rect key={k} class={cls} x={x} y={i * rowH + 3} width={Math.max(0, w)} height={rowH - 6}><title>{`${label}: ${ms(t[k])}`}</title></rect>;
                x += w;
                return rect;
              })}
            </g>
          );
        })}
      </svg>
      <figcaption>
        <ul class="legend">{PARTS.map(([, label, cls]) => <li key={label}><span class={`swatch ${cls}`} aria-hidden="true" />{label}</li>)}</ul>
      </figcaption>
    </figure>
  );
}
