/**
 * Phone numbers: search available numbers, buy (with the price), bind to an agent, release;
 * place an outbound call; each number's calls.
 */
import { useState } from 'preact/hooks';
import { agents, phoneNumbers, sessions, type Agent, type AvailableNumber, type PhoneNumber } from '../api.ts';
import { useTitle } from '../app.tsx';
import { ConfirmButton, Form, Loading, Problem, Select, TextField, When, money, useAction, useLoad } from '../ui.tsx';

export default function PhoneNumbers() {
  useTitle('Phone numbers');
  const mine = useLoad(() => phoneNumbers.list(), []);
  const agentList = useLoad(() => agents.list({ page_size: 100 }), []);
  const agentOptions = agentList.data?.items ?? [];
  return (
    <>
      <h1>Phone numbers</h1>
      <Search onBought={mine.reload} />
      <section aria-labelledby="mine-h">
        <h2 id="mine-h">Your numbers</h2>
        <Problem error={mine.error} />
        {mine.loading && !mine.data ? <Loading /> : mine.data && (mine.data.items.length === 0 ? <p>You have no numbers yet: search and buy one above.</p> : (
          <ul class="plain">
            {mine.data.items.map((n) => <NumberCard key={n.phone_number_id} number={n} agents={agentOptions} onChanged={mine.reload} />)}
          </ul>
        ))}
      </section>
      {mine.data && mine.data.items.length > 0 && <OutboundCall numbers={mine.data.items} agents={agentOptions} />}
    </>
  );
}

function Search({ onBought }: { onBought: () => void }) {
  const [country, setCountry] = useState('US');
  const [area, setArea] = useState('');
  const [found, setFound] = useState<AvailableNumber[] | null>(null);
  const [bought, setBought] = useState<string | null>(null);
  const search = useAction(async () => setFound(await phoneNumbers.available({ country_code: country, area_code: area || undefined })));
  const buy = useAction(async (n: AvailableNumber) => {
    await phoneNumbers.buy({ phone_number: n.phone_number, provider: n.provider });
    setBought(`You bought ${n.phone_number}.`);
    setFound((f) => f?.filter((x) => x.phone_number !== n.phone_number) ?? null);
    onBought();
  });
  return (
    <section class="card" aria-labelledby="search-h">
      <h2 id="search-h">Buy a number</h2>
      <Form error={search.error} onSubmit={() => search.run()} label="Search available numbers">
        <div class="grid2">
          <Select label="Country" name="country_code" value={country} onChange={setCountry} options={[['US', 'United States'], ['CA', 'Canada']]} />
          <TextField label="Area code" name="area_code" value={area} onInput={setArea} inputMode="numeric" hint="Optional, three digits" />
        </div>
        <button type="submit" class="primary" disabled={search.pending}>Search numbers</button>
      </Form>
      {bought && <p class="ok" role="status">{bought}</p>}
      <Problem error={buy.error} />
      {found && (found.length === 0 ? <p>No numbers available there.</p> : (
        <div class="table-wrap" tabIndex={0}>
          <table class="stack">
            <caption class="visually-hidden">Available numbers</caption>
            <thead><tr><th scope="col">Number</th><th scope="col">Place</th><th scope="col" class="num">Price per day</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
            <tbody>
              {found.map((n) => (
                <tr key={n.phone_number}>
                  <td>{n.phone_number}</td>
                  <td>{n.locality}, {n.region}</td>
                  <td class="num">{money(n.pricing.daily_price)}</td>
                  <td><button type="button" disabled={buy.pending} onClick={() => buy.run(n)}>Buy<span class="visually-hidden"> {n.phone_number}</span> for {money(n.pricing.daily_price)} a day</button></td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ))}
    </section>
  );
}

function NumberCard({ number, agents: agentList, onChanged }: { number: PhoneNumber; agents: Agent[]; onChanged: () => void }) {
  const [agentId, setAgentId] = useState(number.agent_id ?? '');
  const [label, setLabel] = useState(number.label);
  const [showCalls, setShowCalls] = useState(false);
  const save = useAction(async () => {
    await phoneNumbers.update(number.phone_number_id, { label, agent_id: agentId || null });
    onChanged();
  });
  const release = useAction(async () => {
    await phoneNumbers.release(number.phone_number_id);
    onChanged();
  });
  const bound = agentList.find((a) => a.agent_id === number.agent_id);
  return (
    <li class="card">
      <h3>{number.phone_number}{number.label && ` · ${number.label}`}</h3>
      <p class="muted small">{number.provider}, <span class={`badge ${number.status}`}>{number.status}</span>{number.status_detail && ` (${number.status_detail})`}, since <When at={number.created_at} />. Answers with: {bound ? <a href={`/agents/${bound.agent_id}`}>{bound.name}</a> : 'no agent (calls ring busy)'}</p>
      <Form error={save.error} onSubmit={() => save.run()} label={`Settings of ${number.phone_number}`}>
        <div class="grid2">
          <Select label={`Agent for ${number.phone_number}`} name="agent_id" value={agentId} onChange={setAgentId} options={[['', 'No agent'], ...agentList.map((a) => [a.agent_id, a.name] as [string, string])]} />
          <TextField label={`Label for ${number.phone_number}`} name="label" value={label} onInput={setLabel} />
        </div>
        <div class="buttons">
          <button type="submit" disabled={save.pending}>Save<span class="visually-hidden"> {number.phone_number}</span></button>
          <button type="button" aria-expanded={showCalls} onClick={() => setShowCalls(!showCalls)}>Calls<span class="visually-hidden"> of {number.phone_number}</span></button>
          <ConfirmButton label="Release" subject={number.phone_number} question={`Release ${number.phone_number}? You cannot get it back.`} confirmLabel="Release" onConfirm={() => release.run()} />
        </div>
      </Form>
      <Problem error={release.error} />
      {showCalls && <Calls number={number.phone_number} />}
    </li>
  );
}

function Calls({ number }: { number: string }) {
  // Every status: a call still ringing is pending.
  const calls = useLoad(() => sessions.list({ phone_number: number, status: 'pending,active,completed,failed,unknown', page_size: 20 }), [number]);
  return (
    <div>
      <h4>Calls of {number}</h4>
      <Problem error={calls.error} />
      {calls.data && (calls.data.items.length === 0 ? <p>No calls yet.</p> : (
        <ul>
          {calls.data.items.map((s) => (
            <li key={s.session_id}>
              <a href={`/sessions/${s.session_id}`}>{/* caller_number is the other party in both directions */}{s.direction === 'inbound' ? `From ${s.caller_number ?? 'unknown'}` : `To ${s.caller_number}`}</a>, {s.status}{s.dial_status && ` (${s.dial_status})`}, <When at={s.created_at} />
            </li>
          ))}
        </ul>
      ))}
      {calls.data?.hasMore && <p><a href={`/sessions?phone_number=${encodeURIComponent(number)}`}>All calls of {number}</a></p>}
    </div>
  );
}

function OutboundCall({ numbers, agents: agentList }: { numbers: PhoneNumber[]; agents: Agent[] }) {
  const [from, setFrom] = useState(numbers[0]!.phone_number_id);
  const [agentId, setAgentId] = useState(agentList[0]?.agent_id ?? '');
  const [to, setTo] = useState('');
  const [placed, setPlaced] = useState<string | null>(null);
  const place = useAction(async () => {
    setPlaced(null);
    setPlaced((await phoneNumbers.call({ agent_id: agentId, phone_number_id: from, to_number: to })).session_id);
  });
  return (
    <section class="card" aria-labelledby="call-h">
      <h2 id="call-h">Place an outbound call</h2>
      <Form error={place.error} onSubmit={() => place.run()} label="Place an outbound call">
        <div class="grid2">
          <Select label="From number" name="phone_number_id" value={from} onChange={setFrom} options={numbers.map((n) => [n.phone_number_id, n.phone_number] as [string, string])} />
          <Select label="Agent" name="agent_id" value={agentId} onChange={setAgentId} options={agentList.map((a) => [a.agent_id, a.name] as [string, string])} hint="The agent's published version talks" />
          <TextField label="To number" name="to_number" type="tel" value={to} onInput={setTo} placeholder="+14155550123" />
        </div>
        <button type="submit" class="primary" disabled={place.pending}>Call</button>
      </Form>
      {placed && <p class="ok" role="status">Calling: <a href={`/sessions/${placed}`}>follow the call</a>.</p>}
    </section>
  );
}
