/** Usage: credit, usage by day and kind, the ledger. */
import { useState } from 'preact/hooks';
import { team, usage } from '../api.ts';
import { useTitle } from '../app.tsx';
import { Form, Loading, Pager, Problem, TextField, When, money, useLoad } from '../ui.tsx';

const KIND_LABELS: Record<string, string> = {
  tts_characters: 'Speech synthesis', asr_seconds: 'Transcription', voice_designs: 'Voice design', session_minutes: 'Conversations', transfer_minutes: 'Call transfers', phone_number_days: 'Phone numbers',
};
const REASON_LABELS: Record<string, string> = {
  grant: 'Credit added', usage: 'Speech', session_hold: 'Conversation hold', session_usage: 'Conversation', session_refund: 'Conversation refund',
  transfer_usage: 'Call transfer', phone_number_rental: 'Number rental', phone_number_refund: 'Number refund',
};
const PAGE_SIZE = 25;
const amount = (n: number) => n.toLocaleString(undefined, { maximumFractionDigits: 2 });

export default function Usage() {
  useTitle('Usage');
  const account = useLoad(() => team(), []);
  const [range, setRange] = useState({ from: '', to: '' });
  const [applied, setApplied] = useState(range);
  const report = useLoad(() => usage.report({ from: applied.from || undefined, to: applied.to || undefined }), [applied]);
  const [page, setPage] = useState(1);
  const ledger = useLoad(() => usage.ledger({ page, page_size: PAGE_SIZE }), [page]);
  return (
    <>
      <h1>Usage</h1>
      <Problem error={account.error} />
      {account.data && (
        <section class="card" aria-labelledby="credit-h">
          <h2 id="credit-h">Credit</h2>
          <p class="big" aria-label="Credit left">{money(account.data.credit)}</p>
          <p class="muted small">Team {account.data.name} · paid in {money(account.data.paid)} · beta access {account.data.beta_access ? 'on' : 'off'}</p>
        </section>
      )}
      <section aria-labelledby="usage-h">
        <h2 id="usage-h">Usage by day</h2>
        <Form error={report.error} onSubmit={() => setApplied(range)} label="Usage range">
          <div class="grid2">
            <TextField label="From" name="from" type="date" value={range.from} onInput={(v) => setRange({ ...range, from: v })} hint="Default: 30 days ago (UTC days)" />
            <TextField label="To" name="to" type="date" value={range.to} onInput={(v) => setRange({ ...range, to: v })} hint="Default: today" />
          </div>
          <button type="submit">Show usage</button>
        </Form>
        {report.loading && !report.data ? <Loading /> : report.data && (
          <>
            <p class="muted">From {report.data.from} to {report.data.to} (UTC).</p>
            {report.data.totals.length === 0 ? <p>No usage in this range.</p> : (
              <>
                <div class="table-wrap" tabIndex={0}>
                  <table>
                    <caption>Totals</caption>
                    <thead><tr><th scope="col">Kind</th><th scope="col" class="num">Amount</th><th scope="col" class="num">Cost</th></tr></thead>
                    <tbody>{report.data.totals.map((r) => <tr key={r.kind}><th scope="row">{KIND_LABELS[r.kind] ?? r.kind}</th><td class="num">{amount(r.amount)} {r.unit}</td><td class="num">{money(r.cost)}</td></tr>)}</tbody>
                  </table>
                </div>
                <div class="table-wrap" tabIndex={0}>
                  <table class="stack">
                    <caption>By day</caption>
                    <thead><tr><th scope="col">Day</th><th scope="col">Kind</th><th scope="col" class="num">Amount</th><th scope="col" class="num">Cost</th></tr></thead>
                    <tbody>{report.data.days.map((r) => <tr key={`${r.date}:${r.kind}`}><td>{r.date}</td><td>{KIND_LABELS[r.kind] ?? r.kind}</td><td class="num">{amount(r.amount)} {r.unit}</td><td class="num">{money(r.cost)}</td></tr>)}</tbody>
                  </table>
                </div>
              </>
            )}
          </>
        )}
      </section>
      <section aria-labelledby="ledger-h">
        <h2 id="ledger-h">Ledger</h2>
        <Problem error={ledger.error} />
        {ledger.data && (
          <div class="table-wrap" tabIndex={0}>
            <table class="stack">
              <caption class="visually-hidden">Every change of credit, newest first</caption>
              <thead><tr><th scope="col">When</th><th scope="col">What</th><th scope="col" class="num">Amount</th><th scope="col" class="num">Balance</th><th scope="col">For</th></tr></thead>
              <tbody>
                {ledger.data.items.map((e) => (
                  <tr key={e.entry_id}>
                    <td><When at={e.created_at} /></td>
                    <td>{REASON_LABELS[e.reason] ?? e.reason}</td>
                    <td class="num">{money(e.amount)}</td>
                    <td class="num">{money(e.balance)}</td>
                    <td>{e.ref?.startsWith('sess_') ? <a href={`/sessions/${e.ref}`}>{e.ref}</a> : <code>{e.ref ?? '—'}</code>}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        {ledger.data && <Pager label="Ledger" page={page} pageSize={PAGE_SIZE} total={ledger.data.total} hasMore={ledger.data.hasMore} onPage={setPage} />}
      </section>
    </>
  );
}
