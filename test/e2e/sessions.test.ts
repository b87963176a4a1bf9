import t from 'tap';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { startTestServer } from '../helpers/server.ts';
import { agentWith, connect, createSession, RATE, sleep } from './session-helpers.ts';

const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'realtime' } });
t.teardown(() => app.close());

const fixed = (text: string) => ({ prompt: { first_message_mode: 'fixed', first_message: text } });

t.test('first message, fixed: its audio says the message verbatim', async (t) => {
  const agent = await agentWith(app, fixed('Hello there. How can I help?'));
  const caller = await connect(await createSession(app, agent));
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the opener');
  await caller.waitFor(() => caller.convo.state === 'idle', 5000, 'idle');
  t.equal(caller.heard(), 'Hello there. How can I help?');
  t.same(caller.finals('agent'), ['Hello there. How can I help?']);
  await caller.convo.hangup();
});

t.test('first message, prompt: generated from first_message_prompt', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'prompt', first_message_prompt: 'Please say "Welcome to Acme."' } });
  const caller = await connect(await createSession(app, agent));
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the opener');
  await caller.waitFor(() => caller.convo.state === 'idle', 5000, 'idle');
  t.equal(caller.heard(), 'Welcome to Acme.');
  await caller.convo.hangup();
});

t.test('first message, off: silent until the caller speaks; a spoken question gets a spoken answer', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' }, conversation: { eagerness: 'eager' } });
  const session = await createSession(app, agent);
  const caller = await connect(session);
  await sleep(800);
  t.equal(caller.audio().length, 0, 'no opener');
  t.equal(caller.convo.state, 'idle');
  await caller.speak('What is the weather?');
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the answer');
  await caller.waitFor(() => caller.convo.state === 'idle', 5000, 'idle');
  t.same(caller.finals('user'), ['What is the weather?']);
  t.equal(caller.heard(), 'You said: What is the weather?');
  t.ok(['listening', 'thinking', 'speaking'].every((s) => caller.states.includes(s)), 'listening, thinking, speaking');
  const end = await caller.convo.hangup();
  t.equal(end.reason, 'user_hangup');
  // The socket hears the end before the record is written.
  let rec = await app.req('GET', `/v1/agent/sessions/${session.session_id}`);
  for (let i = 0; i < 300 && rec.body.status === 'active'; i++) rec = (await sleep(50), await app.req('GET', `/v1/agent/sessions/${session.session_id}`));
  t.equal(rec.body.status, 'completed');
  t.equal(rec.body.ended_reason, 'user_hangup');
  t.same(rec.body.items.filter((i: any) => i.type === 'message').map((i: any) => [i.role, i.content]), [['user', 'What is the weather?'], ['assistant', 'You said: What is the weather?']]);
  t.equal(rec.body.metrics.turns.length, 1);
  t.match(rec.body.metrics.turns[0], { turn_id: 1, recognition_ms: Number, model_ms: Number, synthesis_ms: Number, total_ms: Number, platform_ms: Number });
});

t.test("a stall in the caller's audio mid-utterance does not end the turn: end of speech is timed by the audio", async (t) => {
  // A jittery network (or a loaded client) delivers nothing for a second in the middle of the
  // words, then the rest at once. Timed by arrival, a second without audio is an end of speech
  // (300 ms) and the turn would be taken with half the words; timed by the audio's own
  // timeline there was no pause at all.
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' }, conversation: { eagerness: 'eager' } });
  const caller = await connect(await createSession(app, agent));
  const speech = encodeText('Is the shop open on Sunday?', { sampleRateHz: RATE }).pcm;
  const all = new Int16Array(speech.length + (900 * RATE) / 1000);
  all.set(speech);
  const half = Math.floor(speech.length / 2 / (RATE / 10)) * (RATE / 10);
  const send = (from: number, to: number) => {
    for (let i = from; i < to; i += RATE / 10) caller.convo.sendAudio(all.subarray(i, Math.min(to, i + RATE / 10)));
  };
  send(0, half);
  await caller.waitFor(() => caller.convo.state === 'listening', 5000, 'listening');
  await sleep(1000);
  t.same(caller.finals('user'), [], 'no turn taken during the stall');
  t.equal(caller.convo.state, 'listening', 'still listening');
  send(half, all.length);
  await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the answer');
  t.same(caller.finals('user'), ['Is the shop open on Sunday?'], 'one turn with all the words');
  t.same(caller.finals('agent'), ['You said: Is the shop open on Sunday?']);
  await caller.convo.hangup();
});

t.test('barge-in stops the agent mid-sentence; its transcript keeps only what was spoken', async (t) => {
  const long = 'One two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen.';
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' }, conversation: { eagerness: 'eager', interruptible: true, interruption_sensitivity: 'high' } });
  const session = await createSession(app, agent);
  const caller = await connect(session);
  await caller.speak(`Please say "${long}"`, 600);
  await caller.waitFor(() => caller.convo.state === 'speaking', 15_000, 'speaking');
  await sleep(1500);
  caller.resetAudio();
  const speaking = caller.speak('Stop.', 900);
  await caller.waitFor(() => caller.finals('agent').length === 1, 10_000, 'the interrupted transcript');
  const cut = caller.finals('agent')[0];
  t.ok(cut.length > 0 && cut.length < long.length && long.startsWith(cut), `a strict prefix was kept: ${JSON.stringify(cut)}`);
  await speaking;
  await caller.waitFor(() => caller.finals('agent').length === 2, 15_000, 'the answer to "Stop."');
  t.equal(caller.finals('agent')[1], 'You said: Stop.');
  await caller.waitFor(() => caller.convo.state === 'idle', 5000, 'idle');
  const heard = caller.heard();
  t.notOk(heard.includes('sixteen'), 'the rest of the long reply was never sent');
  t.ok(heard.endsWith('You said: Stop.'), `then the new answer: ${JSON.stringify(heard)}`);
  await caller.convo.hangup();
  // The socket hears the end before the record is written.
  let rec = await app.req('GET', `/v1/agent/sessions/${session.session_id}`);
  for (let i = 0; i < 300 && rec.body.status === 'active'; i++) rec = (await sleep(50), await app.req('GET', `/v1/agent/sessions/${session.session_id}`));
  const said = rec.body.items.filter((i: any) => i.type === 'message' && i.role === 'assistant').map((i: any) => i.content);
  t.same(said, [cut, 'You said: Stop.'], 'the record keeps the spoken part');
});

t.test('a typed message with audio:false gets a text-only reply', async (t) => {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const caller = await connect(await createSession(app, agent));
  caller.convo.sendUserMessage('hello in text', { audio: false });
  await caller.waitFor(() => caller.finals('agent').length === 1, 10_000, 'the reply');
  t.same(caller.finals('agent'), ['You said: hello in text']);
  await sleep(300);
  t.equal(caller.audio().length, 0, 'no audio');
  await caller.convo.hangup();
});
