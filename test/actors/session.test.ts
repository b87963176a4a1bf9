import t from 'tap';
import { TestClock } from '../../actors/clock.ts';
import { PARTIAL_GAP_MS, startSession } from '../../actors/session.ts';
import type { LlmEvent, SessionPlan, TurnMetrics, TurnTimeline } from '../../actors/types.ts';
import { createFakeBackend, createRecorder } from '../fixtures/session-backend.ts';

function makePlan(over: Partial<SessionPlan> = {}): SessionPlan {
  return {
    sessionId: 'sess_test',
    systemPrompt: 'You are a test agent.',
    context: () => ['Current time: test'],
    firstMessage: { mode: 'off' },
    language: 'en',
    voiceId: '',
    decideMs: 200,
    interruptible: true,
    bargeInMs: 100,
    maxDurationMs: 60_000,
    hangUpTool: false,
    reengage: null,
    toolEvents: true,
    ...over,
  };
}

function words(text: string): LlmEvent[] {
  return [...text.split(/(?<= )/).map((w) => ({ type: 'text' as const, text: w })), { type: 'finish', reason: 'stop' }];
}

async function start(plan: Partial<SessionPlan> = {}, backend: Parameters<typeof createFakeBackend>[0] = {}) {
  const clock = new TestClock();
  const fake = createFakeBackend(backend);
  const rec = createRecorder();
  const handle = startSession(makePlan(plan), { backend: fake, output: rec.output, record: rec.record, clock });
  await clock.tick(10);
  return { clock, fake, rec, handle };
}

t.test('first_message_mode off: the agent stays silent until the caller speaks', async (t) => {
  const { clock, rec, handle, fake } = await start();
  await clock.tick(2000);
  t.equal(handle.state, 'idle');
  t.equal(rec.audioMs, 0);
  t.equal(fake.requests.length, 0);
  handle.end('test');
  t.same(await handle.ended, { status: 'completed', reason: 'test', turns: [] });
});

t.test('first_message_mode fixed: spoken verbatim, then idle', async (t) => {
  const { clock, rec, handle, fake } = await start({ firstMessage: { mode: 'fixed', text: 'Hello Ada. How can I help?' } });
  await clock.tick(2000);
  t.same(fake.spoken, ['Hello Ada. How can I help?']);
  t.equal(fake.requests.length, 0, 'no model call for a fixed opener');
  t.same(rec.finals(), ['agent: Hello Ada. How can I help?']);
  t.same(rec.states(), ['initializing', 'thinking', 'speaking', 'idle']);
  t.equal(rec.audioMs, 260, 'all of its audio played');
  t.same(rec.items.map((i) => i.payload.role), ['assistant']);
  handle.end('test');
  await handle.ended;
});

t.test('endAfterFirstMessage (a voicemail left): the session ends with that reason once the first message has played', async (t) => {
  const { clock, rec, handle } = await start({ firstMessage: { mode: 'fixed', text: 'Please call us back.' }, endAfterFirstMessage: 'voicemail_message_left' });
  await clock.tick(3000);
  const end = await handle.ended;
  t.equal(end.reason, 'voicemail_message_left');
  t.equal(end.status, 'completed');
  t.same(rec.finals(), ['agent: Please call us back.']);
  t.ok(rec.audioMs > 0, 'the message played before the end');
});

t.test('first_message_mode prompt: generated from the instructions', async (t) => {
  const { clock, rec, handle, fake } = await start({ firstMessage: { mode: 'prompt', prompt: 'Greet the caller.' } }, { reply: () => words('Welcome to Acme. ') });
  await clock.tick(2000);
  const req = fake.requests[0];
  t.equal(req[0].role, 'system');
  t.match(req[0].content, /You are a test agent\.\n\nCurrent time: test/);
  t.same(req[req.length - 1], { role: 'user', content: 'Greet the caller.' });
  t.same(rec.finals(), ['agent: Welcome to Acme. ']);
  handle.end('test');
  await handle.ended;
});

t.test('a spoken turn: listening, eagerness wait, thinking, speaking, idle', async (t) => {
  const { clock, rec, handle, fake } = await start({ decideMs: 500 });
  fake.say('What time is it?');
  await clock.tick(10);
  t.equal(handle.state, 'listening');
  await clock.tick(400);
  t.equal(handle.state, 'listening', 'still waiting: eagerness');
  t.equal(fake.requests.length, 0);
  await clock.tick(200);
  t.equal(fake.requests.length, 1);
  await clock.tick(2000);
  t.equal(handle.state, 'idle');
  t.same(rec.finals(), ['user: What time is it?', 'agent: You said: What time is it?']);
  t.same(rec.states(), ['initializing', 'idle', 'listening', 'thinking', 'speaking', 'idle']);
  t.same(rec.items.map((i) => [i.payload.role, i.payload.content, i.payload.turn_id]), [['user', 'What time is it?', 1], ['assistant', 'You said: What time is it?', 1]]);
  t.equal(handle.turns.length, 1);
  t.equal(handle.turns[0].decide_ms, 500);
  handle.end('test');
  await handle.ended;
});

/** Lets queued events and promise chains run without moving the test clock (no timer fires). */
async function settle() {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
}

t.test('eagerness eager (0 ms wait): the turn is taken in the same step as the end of speech, not on a timer', async (t) => {
  const { clock, handle, fake } = await start({ decideMs: 0 });
  fake.say('What time is it?');
  await settle();
  t.equal(fake.requests.length, 1, 'the model was asked before any timer ran');
  t.ok(['thinking', 'speaking'].includes(handle.state), `answering: ${handle.state}`);
  await clock.tick(2000);
  t.equal(handle.turns[0].decide_ms, 0);
  // Speech that ends with nothing heard goes back to idle, also at once.
  fake.stt!.push({ type: 'speech_started', atMs: 0 });
  fake.stt!.push({ type: 'speech_ended', atMs: 0 });
  await settle();
  t.equal(handle.state, 'idle');
  t.equal(fake.requests.length, 1);
  handle.end('test');
  await handle.ended;
});

t.test('interim user transcripts: each replaces the whole segment (committed text + partial), the next turn opens a new segment', async (t) => {
  const { clock, rec, handle, fake } = await start({ decideMs: 100 });
  const interims = () => rec.messages.flatMap((m) => (m.topic === 'lk.transcription' && m.role === 'user' && !m.final ? [`${m.segmentId}: ${m.text}`] : []));
  fake.stt!.push({ type: 'speech_started', atMs: 0 });
  fake.stt!.push({ type: 'partial', text: 'What' });
  fake.stt!.push({ type: 'partial', text: 'What time' });
  fake.stt!.push({ type: 'committed', text: 'What time is it? ' });
  fake.stt!.push({ type: 'partial', text: 'In Paris' });
  await clock.tick(10);
  t.same(interims(), ['user-1: What', 'user-1: What time'], 'a partial right after another waits; a committed text sends the partial before it first');
  await clock.tick(PARTIAL_GAP_MS);
  t.same(interims(), ['user-1: What', 'user-1: What time', 'user-1: What time is it? In Paris']);
  t.equal(handle.state, 'listening', 'partials alone do not end the turn');
  fake.stt!.push({ type: 'committed', text: 'In Paris.' });
  fake.stt!.push({ type: 'speech_ended', atMs: 0 });
  await clock.tick(2000);
  t.same(rec.finals().slice(0, 1), ['user: What time is it? In Paris.'], 'the turn takes the committed text, not the last partial');
  fake.say('Thanks');
  await clock.tick(10);
  t.same(interims().slice(3), ['user-2: Thanks'], 'a new segment for the next turn, without the last one\'s text');
  handle.end('test');
  await handle.ended;
});

t.test('interim user transcripts are coalesced: at most one per PARTIAL_GAP_MS, the newest, never after the end of speech', async (t) => {
  const { clock, rec, handle, fake } = await start({ decideMs: 100 });
  const interims = () => rec.messages.flatMap((m) => (m.topic === 'lk.transcription' && m.role === 'user' && !m.final ? [m.text] : []));
  fake.stt!.push({ type: 'speech_started', atMs: 0 });
  for (const text of ['W', 'Wh', 'Wha', 'What']) fake.stt!.push({ type: 'partial', text });
  await clock.tick(10);
  t.same(interims(), ['W'], 'the first at once, the next ones held');
  await clock.tick(PARTIAL_GAP_MS);
  t.same(interims(), ['W', 'What'], 'after the gap, only the newest');
  await clock.tick(PARTIAL_GAP_MS * 3);
  t.same(interims(), ['W', 'What'], 'nothing new, nothing sent');
  fake.stt!.push({ type: 'partial', text: 'What t' });
  await clock.tick(10);
  t.same(interims(), ['W', 'What', 'What t'], 'after a quiet spell, at once');
  fake.stt!.push({ type: 'partial', text: 'What ti' });
  fake.stt!.push({ type: 'committed', text: 'What time' });
  fake.stt!.push({ type: 'speech_ended', atMs: 0 });
  await clock.tick(10);
  t.same(interims(), ['W', 'What', 'What t', 'What ti'], 'a held partial goes out before the events after it');
  await clock.tick(2000);
  t.same(rec.finals().slice(0, 1), ['user: What time']);
  t.equal(interims().length, 4, 'no partial after the final text');
  handle.end('test');
  await handle.ended;
});

t.test('turn latency parts: recognition from the last end of speech, the model up to its first whole sentence, the platform the rest', async (t) => {
  // The model's words: the first at once, the rest only when the test releases them.
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const { clock, handle, fake } = await start({ decideMs: 200 }, { reply: () => words('One moment please. Done. '), beforeEvent: (i) => (i === 1 ? held : Promise.resolve()) });
  const ms = (n: number) => new Uint8Array(n * 32); // 16 kHz 16-bit
  handle.sendAudio(ms(1000));
  fake.stt!.push({ type: 'speech_started', atMs: 100 });
  fake.stt!.push({ type: 'speech_ended', atMs: 600 }); // a pause, said 400 ms late
  await clock.tick(10);
  fake.stt!.push({ type: 'speech_started', atMs: 700 }); // the caller goes on
  handle.sendAudio(ms(500));
  fake.stt!.push({ type: 'committed', text: 'Hello there' });
  fake.stt!.push({ type: 'speech_ended', atMs: 1450 }); // the end of speech: 50 ms before its piece's end
  await clock.tick(10); // … and said 10 ms after that piece arrived
  await clock.tick(200); // eagerness
  t.equal(fake.requests.length, 1, 'the turn started');
  await clock.tick(300); // "One " is out; the sentence is not complete for 300 ms
  t.same(fake.spoken, [], 'nothing to synthesize before a whole sentence');
  release();
  await clock.tick(1000);
  t.same(fake.spoken.slice(0, 1), ['One moment please. ']);
  t.equal(handle.turns.length, 1);
  t.match(handle.turns[0], { recognition_ms: 60, decide_ms: 200, synthesis_ms: 0, platform_ms: 0 }, 'recognition: the audio after the end in its piece, and the wait after the piece arrived');
  t.ok(handle.turns[0].model_ms! >= 300, `the model's share covers its first sentence (${handle.turns[0].model_ms} ms)`);
  t.equal(handle.turns[0].total_ms, handle.turns[0].recognition_ms! + 200 + handle.turns[0].model_ms!, 'the parts add up');
  handle.end('test');
  await handle.ended;
});

t.test('turn timeline (onTurn): the moments behind the metrics, and the arrival of the end of speech from the audio pieces', async (t) => {
  const clock = new TestClock();
  const fake = createFakeBackend({ reply: () => words('Sure thing. ') });
  const rec = createRecorder();
  const seen: [TurnMetrics, TurnTimeline][] = [];
  const handle = startSession(makePlan({ decideMs: 200 }), { backend: fake, output: rec.output, record: rec.record, clock, onTurn: (m, tl) => seen.push([m, tl]) });
  await clock.tick(10);
  // Ten 100 ms pieces, one every 100 ms; the fifth (500–600 ms of the stream) arrives at `fifth`.
  let fifth = 0;
  for (let i = 0; i < 10; i++) {
    if (i === 5) fifth = clock.now();
    handle.sendAudio(new Uint8Array(3200));
    await clock.tick(100);
  }
  fake.stt!.push({ type: 'speech_started', atMs: 100 });
  fake.stt!.push({ type: 'committed', text: 'Hello there' });
  fake.stt!.push({ type: 'speech_ended', atMs: 550 });
  await clock.tick(10);
  await clock.tick(1000);
  t.equal(seen.length, 1);
  const [m, tl] = seen[0];
  t.match(tl, { sessionId: 'sess_test', turnId: 1, decideMs: 200, textEventsToSpeakable: 2 });
  t.equal(tl.speechEndedAt, fifth - 50, 'its piece\'s arrival less the 50 ms of audio after it in that piece');
  t.equal(tl.recognizedAt! - tl.speechEndedAt!, m.recognition_ms);
  t.equal(tl.firstAudioAt! - tl.speechEndedAt!, m.total_ms);
  t.equal(tl.startedAt - tl.recognizedAt!, 200, 'the eagerness wait, then the reply starts');
  t.equal(tl.firstSpeakableAt! - tl.startedAt, m.model_ms);
  t.equal(tl.firstAudioAt! - tl.firstTtsAt!, m.synthesis_ms);
  handle.end('test');
  await handle.ended;
});

t.test('recognition of an end of speech older than the audio pieces kept: as if the audio since came in real time', async (t) => {
  const { clock, handle, fake } = await start({ decideMs: 0 });
  // 300 pieces of 20 ms arrive at once; a session keeps the arrival of the last 256 only.
  for (let i = 0; i < 300; i++) handle.sendAudio(new Uint8Array(640));
  fake.stt!.push({ type: 'speech_started', atMs: 0 });
  fake.stt!.push({ type: 'committed', text: 'Hello' });
  fake.stt!.push({ type: 'speech_ended', atMs: 100 }); // in the fifth piece: no longer kept
  await clock.tick(1000);
  t.equal(handle.turns[0].recognition_ms, 6000 - 100, 'the 5,900 ms of audio after it');
  handle.end('test');
  await handle.ended;
});

t.test('speech resuming during the eagerness wait keeps the turn open', async (t) => {
  const { clock, handle, fake, rec } = await start({ decideMs: 500 });
  fake.say('My name is ');
  await clock.tick(300);
  fake.say('Ada.');
  await clock.tick(1500);
  t.same(rec.finals().slice(0, 1), ['user: My name is Ada.']);
  t.equal(fake.requests.length, 1);
  handle.end('test');
  await handle.ended;
});

t.test('barge-in: the agent stops at once and keeps only what was spoken', async (t) => {
  const long = 'This is a long answer that goes on and on. It has a second sentence too. ';
  const { clock, rec, handle, fake } = await start({ bargeInMs: 100 }, { reply: () => words(long), msPerChar: 20 });
  fake.say('Tell me a story');
  await clock.tick(600);
  t.equal(handle.state, 'speaking');
  fake.stt!.push({ type: 'speech_started', atMs: 0 });
  await clock.tick(50);
  t.equal(handle.state, 'speaking', 'not yet: under the sensitivity threshold');
  await clock.tick(100);
  t.equal(handle.state, 'listening');
  const heard = rec.audioMs;
  await clock.tick(2000);
  t.equal(rec.audioMs, heard, 'no audio after the interruption');
  const agent = rec.finals().find((f) => f.startsWith('agent: '))!.slice(7);
  t.ok(agent.length > 0 && agent.length < long.length && long.startsWith(agent), `kept a strict prefix: ${JSON.stringify(agent)}`);
  const history = rec.items.filter((i) => i.payload.role === 'assistant').map((i) => i.payload.content);
  t.same(history, [agent]);
  handle.end('test');
  await handle.ended;
});

t.test('interruption_sensitivity high (0 ms): the agent stops in the same step as the caller starts speaking', async (t) => {
  const { clock, rec, handle, fake } = await start({ bargeInMs: 0 }, { reply: () => words('This is a long answer that goes on and on. It has a second sentence. '), msPerChar: 20 });
  fake.say('Tell me a story');
  await clock.tick(600);
  t.equal(handle.state, 'speaking');
  const heard = rec.audioMs;
  fake.stt!.push({ type: 'speech_started', atMs: 0 });
  await settle();
  t.equal(handle.state, 'listening', 'stopped before any timer ran');
  await clock.tick(1000);
  t.equal(rec.audioMs, heard, 'no audio after the interruption');
  handle.end('test');
  await handle.ended;
});

t.test('barge-in: the record keeps what had played when the caller spoke, not the audio sent ahead of it', async (t) => {
  const long = 'This is a long answer that goes on and on. It has a second sentence too. ';
  const { clock, rec, handle, fake } = await start({ bargeInMs: 0 }, { reply: () => words(long), msPerChar: 20 });
  fake.say('Tell me a story');
  await clock.tick(700);
  t.equal(handle.state, 'speaking');
  fake.stt!.push({ type: 'speech_started', atMs: 0 });
  await settle();
  t.equal(handle.state, 'listening');
  const played = clock.now() - rec.playAts[0]!; // one reply, no underrun: its audio plays from its first frame on
  t.ok(rec.audioMs >= played + 40, `audio was sent ahead of its play time (${rec.audioMs} ms sent, ${played} played)`);
  const agent = rec.finals().find((f) => f.startsWith('agent: '))!.slice(7);
  t.equal(agent, long.slice(0, Math.floor(played / 20)), 'the transcript keeps the characters whose audio had played (20 ms each)');
  t.same(rec.items.filter((i) => i.payload.role === 'assistant').map((i) => i.payload.content), [agent], 'and so does the record');
  handle.end('test');
  await handle.ended;
});

t.test('a short blip under the threshold does not interrupt', async (t) => {
  const { clock, handle, fake } = await start({ bargeInMs: 300 }, { reply: () => words('One two three four five six seven eight nine ten. '), msPerChar: 20 });
  fake.say('Count');
  await clock.tick(500);
  t.equal(handle.state, 'speaking');
  fake.stt!.push({ type: 'speech_started', atMs: 0 });
  await clock.tick(100);
  fake.stt!.push({ type: 'speech_ended', atMs: 0 });
  await clock.tick(400);
  t.equal(handle.state, 'speaking');
  handle.end('test');
  await handle.ended;
});

t.test('interruptible false: caller speech does not stop the agent', async (t) => {
  const text = 'One two three four five six seven eight nine ten eleven twelve. ';
  const { clock, handle, fake, rec } = await start({ interruptible: false, bargeInMs: 0 }, { reply: () => words(text), msPerChar: 20 });
  fake.say('Count');
  await clock.tick(500);
  fake.stt!.push({ type: 'speech_started', atMs: 0 });
  await clock.tick(300);
  t.equal(handle.state, 'speaking');
  await clock.tick(1500);
  t.ok(rec.finals().includes(`agent: ${text}`), 'the whole reply was spoken');
  t.equal(handle.state, 'listening', 'the caller still speaking: their turn next');
  handle.end('test');
  await handle.ended;
});

t.test('user.interrupt stops the agent', async (t) => {
  const { clock, handle, fake } = await start({}, { reply: () => words('One two three four five six seven eight nine ten. '), msPerChar: 20 });
  fake.say('Count');
  await clock.tick(500);
  t.equal(handle.state, 'speaking');
  handle.send({ type: 'user.interrupt' });
  await clock.tick(10);
  t.equal(handle.state, 'listening');
  handle.end('test');
  await handle.ended;
});

t.test('user.message with audio:false gets a text-only reply', async (t) => {
  const { clock, handle, fake, rec } = await start();
  handle.send({ type: 'user.message', text: 'hi there', audio: false });
  await clock.tick(100);
  t.same(fake.spoken, []);
  t.equal(rec.audioMs, 0);
  t.same(rec.finals(), ['agent: You said: hi there']);
  t.equal(handle.state, 'idle');
  handle.send({ type: 'user.message', text: 'and now aloud' });
  await clock.tick(1000);
  t.same(fake.spoken, ['You said: and now aloud']);
  handle.end('test');
  await handle.ended;
});

t.test('a typed message sent while the recognizer opens is answered once the session is live', async (t) => {
  let open!: () => void;
  const { clock, handle, rec } = await start({}, { sttOpens: new Promise<void>((r) => { open = r; }) });
  t.equal(handle.state, 'initializing');
  handle.send({ type: 'user.message', text: 'are you there', audio: false });
  await clock.tick(100);
  t.same(rec.finals(), [], 'nothing answered before the session is live');
  open();
  await clock.tick(100);
  t.same(rec.finals(), ['agent: You said: are you there']);
  t.same(rec.items.map((i) => i.payload.role), ['user', 'assistant'], 'the typed message and the answer recorded');
  t.equal(handle.state, 'idle');
  handle.end('test');
  await handle.ended;
});

t.test('a typed message sent while the recognizer opens interrupts the first message, as one sent as it starts would', async (t) => {
  let open!: () => void;
  const { clock, handle, rec } = await start({ firstMessage: { mode: 'fixed', text: 'Hello there, welcome to the line.' } }, { sttOpens: new Promise<void>((r) => { open = r; }) });
  handle.send({ type: 'user.message', text: 'quick question', audio: false });
  open();
  await clock.tick(2000);
  t.equal(rec.finals().at(-1), 'agent: You said: quick question');
  t.equal(handle.state, 'idle');
  handle.end('test');
  await handle.ended;
});

t.test('user.hangup ends the session', async (t) => {
  const { handle } = await start();
  handle.send({ type: 'user.hangup' });
  t.match(await handle.ended, { status: 'completed', reason: 'user_hangup' });
});

t.test('hang_up_call ends the session when enabled', async (t) => {
  const reply = (): LlmEvent[] => [{ type: 'tool_call', id: 'call_1', name: 'hang_up_call', argumentsJson: '{}' }, { type: 'finish', reason: 'tool_calls' }];
  const { clock, handle, fake, rec } = await start({ hangUpTool: true }, { reply });
  fake.say('Goodbye, hang up call please.');
  await clock.tick(500);
  t.match(await handle.ended, { status: 'completed', reason: 'agent_hangup' });
  t.same(rec.items.map((i) => i.type), ['message', 'tool_call', 'tool_result']);
  t.match(rec.messages.filter((m) => m.topic === 'agent-event'), [{ type: 'tool.started', toolName: 'hang_up_call' }, { type: 'tool.completed', toolName: 'hang_up_call' }]);
});

t.test('tool_events false keeps tool messages off the client', async (t) => {
  const reply = (): LlmEvent[] => [{ type: 'tool_call', id: 'call_1', name: 'hang_up_call', argumentsJson: '{}' }, { type: 'finish', reason: 'tool_calls' }];
  const { clock, handle, fake, rec } = await start({ hangUpTool: true, toolEvents: false }, { reply });
  fake.say('hang up call');
  await clock.tick(500);
  await handle.ended;
  t.same(rec.messages.filter((m) => m.topic === 'agent-event'), []);
});

t.test('max_duration_seconds ends the session on the clock', async (t) => {
  const { clock, handle } = await start({ maxDurationMs: 60_000 });
  await clock.tick(59_000, 1000);
  t.equal(handle.state, 'idle');
  await clock.tick(2000, 1000);
  t.match(await handle.ended, { status: 'completed', reason: 'max_duration' });
});

t.test('session.end (control message) ends it mid-reply', async (t) => {
  const { clock, handle, fake } = await start({}, { reply: () => words('One two three four five six seven eight nine ten. '), msPerChar: 20 });
  fake.say('Count');
  await clock.tick(500);
  handle.end('ended_by_api');
  t.match(await handle.ended, { status: 'completed', reason: 'ended_by_api' });
  t.ok(fake.cancelledTts >= 1, 'synthesis cancelled');
});

t.test('re-engage: a nudge after silence, then a farewell and the end', async (t) => {
  const { clock, handle, fake, rec } = await start({ reengage: { afterMs: 10_000, nudge: 'Are you still there?', farewell: 'Goodbye!' } });
  await clock.tick(8000, 100);
  handle.send({ type: 'user.activity' });
  await clock.tick(8000, 100);
  t.same(fake.spoken, [], 'activity reset the idle timer');
  await clock.tick(3000, 100);
  t.same(fake.spoken, ['Are you still there?']);
  await clock.tick(11_000, 100);
  t.match(await handle.ended, { status: 'completed', reason: 'idle_timeout' });
  t.same(rec.finals(), ['agent: Are you still there?', 'agent: Goodbye!']);
});

t.test('a transcription stream that cannot open fails the session', async (t) => {
  const { handle } = await start({}, { failStt: true });
  t.match(await handle.ended, { status: 'failed', reason: 'error' });
});

t.test('a lost recognizer (its backend crashed): the client is told, a new stream is opened and the session goes on', async (t) => {
  let down = false;
  const { clock, handle, fake, rec } = await start({}, { failStt: () => down });
  fake.say('hello');
  await clock.tick(1000);
  t.same(rec.finals(), ['user: hello', 'agent: You said: hello']);
  down = true;
  fake.stt!.fail(new Error('14 UNAVAILABLE: Connection dropped'));
  await clock.tick(2000);
  t.match(rec.messages.filter((m) => m.topic === 'agent-event'), [{ type: 'error', code: 'provider_error' }], 'the client hears of it once');
  t.equal(handle.state, 'idle', 'the session is still live');
  handle.sendAudio(new Uint8Array(640)); // dropped while no recognizer is open
  down = false;
  await clock.tick(2000);
  t.equal(fake.sttOpened, 2, 'a second stream was opened');
  fake.say('still there');
  await clock.tick(1000);
  t.same(rec.finals(), ['user: hello', 'agent: You said: hello', 'user: still there', 'agent: You said: still there']);
  handle.end('test');
  t.match(await handle.ended, { status: 'completed', reason: 'test' });
});

t.test('a recognizer that cannot be reopened within 30 s ends the session with error', async (t) => {
  let down = false;
  const { clock, handle, fake } = await start({}, { failStt: () => down });
  down = true;
  fake.stt!.fail(new Error('14 UNAVAILABLE'));
  await clock.tick(29_000);
  t.equal(handle.state, 'idle', 'still trying at 29 s');
  await clock.tick(3000);
  t.match(await handle.ended, { status: 'failed', reason: 'error' });
});

t.test('a failed turn reports an error and the call goes on', async (t) => {
  const { clock, handle, fake, rec } = await start({}, { reply: () => { throw new Error('model down'); } });
  fake.say('hello');
  await clock.tick(500);
  t.equal(handle.state, 'idle');
  t.match(rec.messages.filter((m) => m.topic === 'agent-event'), [{ type: 'error', code: 'provider_error' }]);
  handle.end('test');
  await handle.ended;
});
