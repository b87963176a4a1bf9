import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { connected, humanLine, keepAlive, sessionOf, sleep, TRANSFER_HUMAN, transferAgent, transfersOf } from './calls-helpers.ts';

const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'realtime' } });
t.teardown(() => app.close());

const HUMAN = TRANSFER_HUMAN;
const agent = (destination: Record<string, unknown>, index: number) => transferAgent(app, destination, index);

t.test('warm transfer, confirm: hold, the human is briefed and says yes, the call is merged', async (t) => {
  const { number } = await agent({ mode: 'warm', warm_connect: 'confirm' }, 4);
  const human = await humanLine(t, app);
  const caller = await connected(app, number, '+16505550203');
  t.teardown(() => caller.close());
  await caller.speak('Please transfer call, briefing is The caller wants a refund.');
  const stop = keepAlive(caller);
  const hold = await caller.event('call.hold', 20_000);
  t.equal(hold.on, true, 'the caller is on hold');
  t.equal(caller.heard(), 'Please hold while I connect you.');
  const ring = await human.event('call.ringing', 10_000);
  t.equal(ring.from, number, 'the consult leg shows the dialed number');
  human.send({ type: 'answer' });
  await human.event('call.started');
  const humanAlive = keepAlive(human);
  await human.waitFor(() => human.heard() === 'The caller wants a refundSay yes to take the call, or no to decline.', 20_000, 'the briefing');
  await humanAlive();
  t.pass('the human heard the third-person briefing and the question');
  t.notOk(caller.heard().includes('refund'), 'the caller did not hear the briefing');
  human.resetAudio();
  await human.speak('Yes, put them through.');
  await caller.event('call.transferred', 15_000);
  t.equal((await caller.event('call.hold', 5000, 2)).on, false, 'off hold at the merge');
  await stop();
  caller.resetAudio();
  await human.speak('Hello, I can help with the refund.', 300);
  await caller.waitFor(() => caller.heard() === 'Hello, I can help with the refund.', 10_000, 'the human after the merge');
  await sleep(2500);
  const s = await sessionOf(app, '+16505550203');
  t.match(s, { status: 'completed', ended_reason: 'call_transferred' });
  // What the tool spoke is in the transcript: the hold line to the caller, the briefing and the question to the human.
  const spoken = s.items.filter((i: any) => i.type === 'message' && i.source === 'transfer_call').map((i: any) => [i.role, i.audience, i.content]);
  t.same(spoken, [
    ['assistant', 'caller', 'Please hold while I connect you.'],
    ['assistant', 'transfer_destination', 'The caller wants a refund'],
    ['assistant', 'transfer_destination', 'Say yes to take the call, or no to decline.'],
  ]);
  caller.send({ type: 'hangup' });
  await human.event('call.ended');
  human.close();
  const transfers = await transfersOf(app, s.session_id);
  t.match(transfers, [{ mode: 'warm', destination: HUMAN, minutes: 1, price_per_minute_micros: 100_000n, cost_micros: 100_000n }], 'the merged call is billed as transfer minutes (default price 0.10)');
});

t.test('warm transfer, confirm: the human declines, the caller comes back from hold', async (t) => {
  const { number } = await agent({ mode: 'warm', warm_connect: 'confirm' }, 5);
  const human = await humanLine(t, app);
  const caller = await connected(app, number, '+16505550204');
  t.teardown(() => caller.close());
  await caller.speak('Please transfer call.');
  const stop = keepAlive(caller);
  await human.event('call.ringing', 20_000);
  human.send({ type: 'answer' });
  const humanAlive = keepAlive(human);
  await human.waitFor(() => human.heard().endsWith('Say yes to take the call, or no to decline.'), 20_000, 'the briefing');
  await humanAlive();
  t.match(human.heard(), /^I have a caller from \+16505550204 on the line who asked to be transferred to you\./, 'the default briefing');
  caller.resetAudio();
  await human.speak('No, I am busy.');
  await human.event('call.ended', 10_000);
  t.equal((await caller.event('call.hold', 10_000, 2)).on, false, 'back from hold');
  await caller.waitFor(() => caller.heard().endsWith('"}'), 15_000, 'the agent tells the caller');
  t.match(caller.heard(), /^transfer_call returned: \{"ok":false,"error":"Sales declined the call\. The caller is back with you/, 'the model is told why');
  await stop();
  caller.resetAudio();
  await caller.speak('Okay, thanks.');
  await caller.waitFor(() => caller.heard() === 'You said: Okay, thanks.', 15_000, 'the conversation goes on');
  t.equal((await sessionOf(app, '+16505550204')).status, 'active');
  caller.send({ type: 'hangup' });
  human.close();
});

t.test('warm transfer, direct: a declined consult call brings the caller back; answered, merged right after the briefing', async (t) => {
  const { number } = await agent({ mode: 'warm', warm_connect: 'direct' }, 6);
  const human = await humanLine(t, app);
  // First attempt: the human rejects the consult call.
  const caller = await connected(app, number, '+16505550205');
  t.teardown(() => caller.close());
  await caller.speak('Please transfer call.');
  const stop = keepAlive(caller);
  await human.event('call.ringing', 20_000);
  human.send({ type: 'reject' });
  await caller.waitFor(() => caller.heard().endsWith('"}'), 20_000, 'the agent tells the caller');
  t.match(caller.heard(), /Sales did not take the call \(busy\)/);
  t.pass('declined ringing: back with the agent');
  caller.resetAudio();
  await stop();
  await caller.speak('Please transfer call again.');
  const stop2 = keepAlive(caller);
  await human.event('call.ringing', 20_000, 2);
  human.send({ type: 'answer' });
  const humanAlive = keepAlive(human);
  await caller.event('call.transferred', 20_000);
  await humanAlive();
  t.match(human.heard(), /^I have a caller from \+16505550205 on the line who asked to be transferred to you\.$/, 'briefed, then merged without a question');
  await stop2();
  await sleep(2500);
  t.match(await sessionOf(app, '+16505550205'), { status: 'completed', ended_reason: 'call_transferred' });
  caller.send({ type: 'hangup' });
  human.close();
});

t.test('warm transfer: the consult call reaches an answering machine, hung up; the caller comes back from hold (failure, decline or voicemail brings the caller back from hold)', async (t) => {
  const { number } = await agent({ mode: 'warm', warm_connect: 'confirm' }, 7);
  const human = await humanLine(t, app);
  const caller = await connected(app, number, '+16505550206');
  t.teardown(() => caller.close());
  await caller.speak('Please transfer call.');
  const stop = keepAlive(caller);
  t.equal((await caller.event('call.hold', 20_000)).on, true, 'on hold');
  await human.event('call.ringing', 20_000);
  human.send({ type: 'answer', as: 'voicemail' });
  t.equal((await human.event('call.ended', 10_000)).reason, 'hangup', 'the machine is hung up on, nothing left on it');
  t.equal(human.heard(), '', 'no briefing for a machine');
  t.equal((await caller.event('call.hold', 10_000, 2)).on, false, 'back from hold');
  await caller.waitFor(() => caller.heard().endsWith('"}'), 15_000, 'the agent tells the caller');
  t.match(caller.heard(), /Sales did not answer \(voicemail\)/, 'the model is told why');
  await stop();
  t.equal((await sessionOf(app, '+16505550206')).status, 'active', 'the conversation goes on');
  caller.send({ type: 'hangup' });
  human.close();
});
