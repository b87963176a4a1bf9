/** Sessions: the list with filters (agent, status, dates) and pages. */
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { agents, sessions } from '../api.ts';
import { useTitle } from '../app.tsx';
import { Loading, Pager, Problem, Select, TextField, When, useLoad } from '../ui.tsx';

const PAGE_SIZE = 20;
const STATUSES: [string, string][] = [['', 'Any status'], ['active', 'Active'], ['completed', 'Completed'], ['failed', 'Failed'], ['pending', 'Pending'], ['unknown', 'Unknown']];

interface Filters { agent_id: string; status: string; from: string; to: string; phone_number: string }

export default function Sessions() {
  useTitle('Sessions');
  const { query } = useLocation();
  const initial: Filters = { agent_id: query.agent_id ?? '', status: query.status ?? '', from: query.from ?? '', to: query.to ?? '', phone_number: query.phone_number ?? '' };
  const [form, setForm] = useState<Filters>(initial);
  const [applied, setApplied] = useState<Filters>(initial);
  const [page, setPage] = useState(1);
  const agentList = useLoad(() => agents.list({ page_size: 100 }), []);
  const list = useLoad(() => sessions.list({
    agent_id: applied.agent_id || undefined,
    status: applied.status || undefined,
    phone_number: applied.phone_number || undefined,
    // Dates are whole days in the reader's zone: from its first instant, up to the next day's.
    created_after: applied.from ? new Date(`${applied.from}T00:00:00`).toISOString() : undefined,
    created_before: applied.to ? new Date(new Date(`${applied.to}T00:00:00`).getTime() + 86_400_000).toISOString() : undefined,
    page, page_size: PAGE_SIZE,
  }), [applied, page]);
  const upd = (k: keyof Filters) => (v: string) => setForm({ ...form, [k]: v });
  return (
    <>
      <h1>Sessions</h1>
      <form class="filters grid2" aria-label="Filter sessions" onSubmit={(e) => { e.preventDefault(); setPage(1); setApplied(form); }}>
        <Select label="Agent" name="agent_id" value={form.agent_id} onChange={upd('agent_id')}
          options={[['', 'Any agent'], ...(agentList.data?.items ?? []).map((a) => [a.agent_id, a.name] as [string, string])]} />
        <Select label="Status" name="status" value={form.status} onChange={upd('status')} options={STATUSES} />
        <TextField label="From date" name="from" type="date" value={form.from} onInput={upd('from')} />
        <TextField label="To date" name="to" type="date" value={form.to} onInput={upd('to')} />
        {applied.phone_number && <TextField label="Phone number" name="phone_number" value={form.phone_number} onInput={upd('phone_number')} />}
        <div class="buttons"><button type="submit" class="primary">Apply filters</button></div>
      </form>
      <Problem error={list.error} />
      {list.loading && !list.data ? <Loading /> : list.data && (list.data.items.length === 0 ? <p>No sessions match these filters.</p> : (
        <div class="table-wrap" tabIndex={0}>
          <table class="stack">
            <caption class="visually-hidden">Sessions, newest first</caption>
            <thead><tr><th scope="col">Session</th><th scope="col">Agent</th><th scope="col">Status</th><th scope="col">Source</th><th scope="col">Started</th><th scope="col" class="num">Duration</th></tr></thead>
            <tbody>
              {list.data.items.map((s) => (
                <tr key={s.session_id}>
                  <td><a href={`/sessions/${s.session_id}`}>{s.session_id}</a></td>
                  <td>{s.agent_name}</td>
                  <td><span class={`badge ${s.status}`}>{s.status}</span></td>
                  <td>{s.source === 'phone' ? `phone, ${s.direction}` : s.source}</td>
                  <td><When at={s.started_at ?? s.created_at} /></td>
                  <td class="num">{s.duration_seconds === null ? '—' : `${s.duration_seconds} s`}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ))}
      {list.data && <Pager label="Sessions" page={page} pageSize={PAGE_SIZE} total={list.data.total} hasMore={list.data.hasMore} onPage={setPage} />}
    </>
  );
}
