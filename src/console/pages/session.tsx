/**
 * A session: its facts, the transcript and tool calls on one timeline, the recording with a
 * player per speaker, the analysis, the per-turn latency, metadata, and the post-call webhook
 * deliveries with their attempts and Redeliver.
 */
import { useRoute } from 'preact-iso';
import { ApiError, sessions, type SessionItem } from '../api.ts';
import { AnalysisView } from '../analysis-view.tsx';
import { useTitle } from '../app.tsx';
import { LatencyChart, LatencyTable } from '../latency.tsx';
import { Loading, Problem, When, useAction, useLoad } from '../ui.tsx';
import type { Analysis } from '../api.ts';

export default function SessionPage() {
  const { params } = useRoute();
  const id = params.id!;
  useTitle(`Session ${id}`);
  const s = useLoad(() => sessions.get(id), [id]);
  const end = useAction(async () => {
    await sessions.end(id);
    s.reload();
  });
  if (s.error) return <Problem error={s.error} />;
  if (!s.data) return <Loading />;
  const d = s.data;
  const turns = d.metrics?.turns ?? [];
  return (
    <>
      <div class="page-head">
        <h1>Session</h1>
        <span class={`badge ${d.status}`}>{d.status}</span>
      </div>
      <dl class="facts">
        <dt>Session</dt><dd><code>{d.session_id}</code></dd>
        <dt>Agent</dt><dd><a href={`/agents/${d.agent_id}`}>{d.agent_name}</a> (version {d.version_number})</dd>
        <dt>Source</dt><dd>{d.source}{d.source === 'phone' ? `, ${d.direction}${d.caller_number ? ` from ${d.caller_number}` : ''}${d.dialed_number ? ` to ${d.dialed_number}` : ''}` : ''}</dd>
        <dt>Started</dt><dd><When at={d.started_at} /></dd>
        <dt>Ended</dt><dd><When at={d.ended_at} />{d.ended_reason && ` (${d.ended_reason.replace(/_/g, ' ')})`}</dd>
        <dt>Duration</dt><dd>{d.duration_seconds === null ? '—' : `${d.duration_seconds} s`}</dd>
      </dl>
      {(d.status === 'active' || d.status === 'pending') && <button type="button" class="danger" onClick={() => end.run()}>End session</button>}
      <Problem error={end.error} />

      <section aria-labelledby="timeline-h">
        <h2 id="timeline-h">Transcript and tool calls</h2>
        {d.items.length === 0 ? <p class="muted">Nothing was said.</p> : (
          <ol class="transcript" aria-label="Timeline" tabIndex={0}>
            {d.items.map((item, i) => <TimelineItem key={i} item={item} start={d.started_at} />)}
          </ol>
        )}
      </section>
      <Recording id={id} />
      <section aria-labelledby="analysis-h">
        <h2 id="analysis-h">Analysis</h2>
        {d.analysis ? <AnalysisView analysis={d.analysis as Analysis} /> : <p class="muted">{d.analysis_status ? `Analysis: ${d.analysis_status}` : 'No analysis yet.'}</p>}
      </section>
      <section aria-labelledby="latency-h">
        <h2 id="latency-h">Latency per turn</h2>
        {turns.length === 0 ? <p class="muted">No answered turns.</p> : (
          <>
            <LatencyChart turns={turns} />
            <LatencyTable turns={turns} caption="Latency per turn" />
          </>
        )}
      </section>
      <section aria-labelledby="meta-h">
        <h2 id="meta-h">Metadata</h2>
        <pre>{JSON.stringify({ metadata: d.metadata, dynamic_variables: d.dynamic_variables, overrides: d.overrides }, null, 2)}</pre>
      </section>
      <Deliveries id={id} />
    </>
  );
}

function TimelineItem({ item, start }: { item: SessionItem; start: string | null }) {
  const at = start ? `${((Date.parse(item.created_at) - Date.parse(start)) / 1000).toFixed(1)} s` : '';
  const { type, created_at: _c, ...rest } = item;
  if (type === 'message') {
    return <li><span class="muted small">{at} </span><span class="speaker">{rest.role === 'user' ? 'User' : 'Agent'}:</span>{String(rest.content ?? '')}</li>;
  }
  const name = String(rest.tool_name ?? rest.name ?? '');
  const label = type === 'tool_call' ? `Tool call ${name}` : type === 'tool_result' ? `Tool result ${name}` : type;
  return <li class="tool"><span class="muted small">{at} </span>{label}: <code>{JSON.stringify(rest)}</code></li>;
}

function Recording({ id }: { id: string }) {
  const rec = useLoad(() => sessions.recording(id).catch((err) => {
    if (err instanceof ApiError && err.status === 404) return null;
    throw err;
  }), [id]);
  return (
    <section aria-labelledby="rec-h">
      <h2 id="rec-h">Recording</h2>
      <Problem error={rec.error} />
      {rec.loading && !rec.data ? <Loading /> : rec.data === null ? <p class="muted">This session was not recorded.</p> : rec.data && (
        <>
          {rec.data.status !== 'complete' && <p class="muted">Recording: {rec.data.status}{rec.data.error_message ? ` (${rec.data.error_message})` : ''}</p>}
          {rec.data.tracks.map((t) => (
            <div class="field" key={t.role}>
              <span id={`track-${t.role}`}>{t.role === 'user' ? 'Caller' : t.role === 'agent' ? 'Agent' : 'Transfer'} track{t.duration_ms !== null ? ` (${(t.duration_ms / 1000).toFixed(1)} s)` : ''}</span>
              {t.url ? <audio controls preload="metadata" src={t.url} aria-labelledby={`track-${t.role}`} /> : <span class="muted">{t.status}</span>}
            </div>
          ))}
        </>
      )}
    </section>
  );
}

function Deliveries({ id }: { id: string }) {
  const list = useLoad(() => sessions.deliveries(id), [id]);
  const again = useAction(async (deliveryId: string) => {
    await sessions.redeliver(id, deliveryId);
    list.reload();
  });
  return (
    <section aria-labelledby="wh-h">
      <h2 id="wh-h">Webhook deliveries</h2>
      <Problem error={list.error ?? again.error} />
      {list.data && (list.data.length === 0 ? <p class="muted">No post-call webhooks for this session.</p> : (
        <>
          <button type="button" onClick={() => list.reload()}>Refresh deliveries</button>
          <div class="table-wrap" tabIndex={0}>
            <table class="stack">
              <caption class="visually-hidden">Post-call webhook deliveries</caption>
              <thead><tr><th scope="col">Event</th><th scope="col">Endpoint</th><th scope="col">Status</th><th scope="col" class="num">Attempts</th><th scope="col">Last answer</th><th scope="col">Delivered</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
              <tbody>
                {list.data.map((w) => (
                  <tr key={w.delivery_id}>
                    <td>{w.event}</td>
                    <td><code>{w.url}</code></td>
                    <td><span class={`badge ${w.status}`}>{w.status}</span>{w.next_attempt_at && <div class="muted small">next try <When at={w.next_attempt_at} /></div>}</td>
                    <td class="num">{w.attempts} of {w.max_attempts}</td>
                    <td>{w.last_status_code ?? '—'}{w.last_error && <div class="muted small">{w.last_error}</div>}</td>
                    <td><When at={w.delivered_at} /></td>
                    <td><button type="button" disabled={again.pending} onClick={() => again.run(w.delivery_id)}>Redeliver<span class="visually-hidden"> {w.event} to {w.url}</span></button></td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      ))}
    </section>
  );
}
