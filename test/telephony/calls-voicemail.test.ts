// Answering machines on outbound calls (docs/api/phone.md, `conversation.outbound`; D-PHONE-6): the sandbox line
// answers as a machine (`{"type":"answer","as":"voicemail"}`, what a carrier's detection
// reports), and the version's outbound settings decide: hang up unbilled (the default, also when
// `outbound` is null), leave the literal message, leave a message generated from the prompt, or
// (detection off) talk to the machine like to a person.
import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { creditOf } from './helpers.ts';
import { boundAgent, phone, settleSession } from './calls-helpers.ts';

const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'realtime' } });
t.teardown(() => app.close());

const settle = (id: string, pred: (s: any) => boolean, what: string) => settleSession(app, id, pred, what);
const opener = { first_message_mode: 'fixed', first_message: 'Hi, this is Acme.' };

/** Places a call from `agent` to a fresh line that answers as `as`; returns the line and the session id. */
async function callMachine(agent: { agentId: string; numberId: string }, to: string, as: 'voicemail' | 'human' = 'voicemail', extra: Record<string, unknown> = {}) {
  const line = await phone(app, { line: to });
  await line.event('line.ready');
  const r = await app.req('POST', '/v1/agent/phone-calls', { agent_id: agent.agentId, phone_number_id: agent.numberId, to_number: to, ...extra });
  if (r.status !== 201) throw new Error(`call: ${r.status} ${r.text}`);
  await line.event('call.ringing');
  line.send(as === 'voicemail' ? { type: 'answer', as: 'voicemail' } : { type: 'answer' });
  return { line, id: r.body.session_id as string };
}

t.test('outbound null (the default): a machine answers, the call is hung up at once, unbilled, nothing said', async (t) => {
  const agent = await boundAgent(app, { prompt: opener }, '604', 21);
  const before = await creditOf(app, app.teamId);
  const { line, id } = await callMachine(agent, '+13125550160');
  const ended = await line.event('call.ended');
  t.equal(ended.reason, 'hangup', 'the platform hung up');
  const s = await settle(id, (s) => s.status !== 'pending', 'ended');
  t.match(s, { status: 'completed', ended_reason: 'voicemail', dial_status: 'answered', answered_by: 'voicemail', started_at: null });
  t.equal(line.heard(), '', 'the machine recorded nothing');
  t.equal(await creditOf(app, app.teamId), before, 'the up-front hold was given back');
  line.close();
});

t.test('voicemail.action hangup with detection on: the same as the default', async (t) => {
  const agent = await boundAgent(app, { prompt: opener, conversation: { outbound: { amd_enabled: true, voicemail: { action: 'hangup', message: 'Unused.' } } } }, '604', 22);
  const { line, id } = await callMachine(agent, '+13125550161');
  await line.event('call.ended');
  t.match(await settle(id, (s) => s.status !== 'pending', 'ended'), { status: 'completed', ended_reason: 'voicemail', answered_by: 'voicemail' });
  line.close();
});

t.test('leave_message: the machine records the rendered message, uninterrupted by its greeting; then the call ends', async (t) => {
  const agent = await boundAgent(app, {
    prompt: opener,
    conversation: { outbound: { voicemail: { action: 'leave_message', message: 'Hello {{name}}, Acme here. Please call us back.' } } },
  }, '604', 23);
  const { line, id } = await callMachine(agent, '+13125550162', 'voicemail', { dynamic_variables: { name: 'Dana' } });
  await line.event('call.started');
  // The machine's greeting plays while the agent speaks: it must not cut the message short.
  const greeting = line.speak('Please leave a message after the tone.', 300);
  const silence = line.silence(12_000);
  const ended = await line.event('call.ended', 20_000);
  t.equal(ended.reason, 'hangup', 'the agent hung up after the message');
  t.equal(line.heard(), 'Hello Dana, Acme here. Please call us back.', 'the whole message, variables rendered; not the opener');
  await Promise.all([greeting, silence]);
  const s = await settle(id, (s) => s.status === 'completed', 'completed');
  t.match(s, { ended_reason: 'voicemail_message_left', answered_by: 'voicemail', dial_status: 'answered' });
  t.ok(s.started_at, 'the session ran');
  const said = s.items.filter((i: any) => i.type === 'message' && i.role === 'assistant').map((i: any) => i.content);
  t.same(said, ['Hello Dana, Acme here. Please call us back.'], 'the transcript holds the message left');
  line.close();
});

t.test('leave_prompt_message: the message is generated from the prompt', async (t) => {
  const agent = await boundAgent(app, {
    prompt: opener,
    conversation: { outbound: { voicemail: { action: 'leave_prompt_message', message: 'Please say "Sorry we missed you, {{name}}."' } } },
  }, '604', 24);
  const { line, id } = await callMachine(agent, '+13125550163', 'voicemail', { dynamic_variables: { name: 'Dana' } });
  await line.event('call.started');
  const silence = line.silence(10_000);
  await line.event('call.ended', 20_000);
  t.equal(line.heard(), 'Sorry we missed you, Dana.');
  await silence;
  t.match(await settle(id, (s) => s.status === 'completed', 'completed'), { ended_reason: 'voicemail_message_left', answered_by: 'voicemail' });
  line.close();
});

t.test('leave_message with an empty message: nothing to leave, so the call is hung up like hangup', async (t) => {
  const agent = await boundAgent(app, { prompt: opener, conversation: { outbound: { voicemail: { action: 'leave_message', message: '' } } } }, '604', 25);
  const { line, id } = await callMachine(agent, '+13125550164');
  await line.event('call.ended');
  t.match(await settle(id, (s) => s.status !== 'pending', 'ended'), { status: 'completed', ended_reason: 'voicemail' });
  t.equal(line.heard(), '');
  line.close();
});

t.test('leave_message whose variables render to nothing: nothing said, ended as a hang-up', async (t) => {
  const agent = await boundAgent(app, { prompt: opener, conversation: { outbound: { voicemail: { action: 'leave_message', message: '{{note}}' } } } }, '604', 28);
  const { line, id } = await callMachine(agent, '+13125550167', 'voicemail', { dynamic_variables: { note: '' } });
  await line.event('call.started');
  const silence = line.silence(3000);
  await line.event('call.ended', 15_000);
  await silence;
  t.match(await settle(id, (s) => s.status === 'completed', 'completed'), { ended_reason: 'voicemail', answered_by: 'voicemail' });
  t.equal(line.heard(), '');
  line.close();
});

t.test('amd_enabled false: the machine is talked to like a person (the opener), answered_by still voicemail', async (t) => {
  const agent = await boundAgent(app, { prompt: opener, conversation: { outbound: { amd_enabled: false, voicemail: { action: 'leave_message', message: 'Not used.' } } } }, '604', 26);
  const { line, id } = await callMachine(agent, '+13125550165');
  await line.event('call.started');
  const silence = line.silence(4000);
  await line.waitFor(() => line.heard() === 'Hi, this is Acme.', 15_000, 'the opener');
  await silence;
  t.match(await settle(id, (s) => s.status === 'active', 'active'), { answered_by: 'voicemail' });
  t.equal((await app.req('POST', `/v1/agent/sessions/${id}/end`)).status, 204);
  await line.event('call.ended');
  line.close();
});

t.test('a person answering is unaffected by the voicemail settings', async (t) => {
  const agent = await boundAgent(app, { prompt: opener, conversation: { outbound: { voicemail: { action: 'leave_message', message: 'Not for people.' } } } }, '604', 27);
  const { line, id } = await callMachine(agent, '+13125550166', 'human');
  await line.event('call.started');
  const silence = line.silence(4000);
  await line.waitFor(() => line.heard() === 'Hi, this is Acme.', 15_000, 'the opener');
  await silence;
  t.match(await settle(id, (s) => s.status === 'active', 'active'), { answered_by: 'human' });
  t.equal((await app.req('POST', `/v1/agent/sessions/${id}/end`)).status, 204);
  await line.event('call.ended');
  line.close();
});
