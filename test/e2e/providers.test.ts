// Parley as the provider, end to end (issue 18). Platform A, on the synthetic engine, serves
// `/compat/v1` and `/compat/elevenlabs`: its recognizer decodes synthetic speech exactly and its
// speech decodes back exactly. For each pairing of provider kinds, a native backend B points its
// engines at A (speech to text and speech) and at an OpenAI-style chat fixture (language model,
// scripted rules); B passes the contract kit strictly; then platform C runs a session on B: the
// caller asks a question in synthetic speech, B hears it through A's recognizer, the model
// calls a webhook tool once and answers with its result, B speaks it through A's speech, and
// the caller's received audio decodes to the answer's text. Every STT kind (openai,
// openai-realtime, elevenlabs) and every TTS kind (openai raw, openai answering with SSE
// events, elevenlabs) is used once.
import t from 'tap';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { startBackend } from '../../native/server.ts';
import type { SttProviderKind, TtsProviderKind } from '../../native/config.ts';
import { runKit } from '../contract/kit.ts';
import { startChatProvider } from '../fixtures/chat-provider.ts';
import { startSseSpeech } from '../fixtures/sse-speech.ts';
import { startTestServer } from '../helpers/server.ts';
import { makeTool, startEndpoint, toolAgent } from '../tools-runtime/helpers.ts';
import { connect, createSession } from './session-helpers.ts';

const A = await startTestServer({ backend: 'synthetic' });
const chat = await startChatProvider();
const sse = await startSseSpeech(`${A.url}/compat/v1`, A.key);
const endpoint = await startEndpoint();
endpoint.routes.set('/weather', { body: '{"forecast":"sunny"}' });
// The write-time URL check of tools reads PARLEY_OUTBOUND_ALLOW; calls use the platform's list.
const savedAllow = process.env.PARLEY_OUTBOUND_ALLOW;
process.env.PARLEY_OUTBOUND_ALLOW = `127.0.0.1:${endpoint.port}`;
t.teardown(async () => {
  await A.close();
  await chat.close();
  await sse.close();
  await endpoint.close();
  if (savedAllow === undefined) delete process.env.PARLEY_OUTBOUND_ALLOW;
  else process.env.PARLEY_OUTBOUND_ALLOW = savedAllow;
});

const openaiBase = `${A.url}/compat/v1`;
const elevenBase = `${A.url}/compat/elevenlabs`;
const STT_MODEL: Record<SttProviderKind, string> = { openai: 'whisper-1', 'openai-realtime': 'gpt-4o-transcribe', elevenlabs: 'scribe_v2_realtime' };

const PAIRS: { stt: SttProviderKind; tts: TtsProviderKind; sse?: boolean }[] = [
  { stt: 'openai', tts: 'openai' },
  { stt: 'openai-realtime', tts: 'elevenlabs' },
  { stt: 'elevenlabs', tts: 'openai', sse: true },
];

const QUESTION = 'What is the weather, city is Paris?';
const ANSWER = 'weather returned: {"forecast":"sunny"}';

for (const pair of PAIRS) {
  const name = `speech to text ${pair.stt}, speech ${pair.tts}${pair.sse ? ' (SSE answers)' : ''}`;
  t.test(name, async (t) => {
    const B = await startBackend({
      address: '127.0.0.1:0',
      engine: 'synthetic',
      providers: {
        llm: { kind: 'openai', baseUrl: chat.base, apiKey: 'sk-chat', model: 'fixture' },
        stt: { kind: pair.stt, baseUrl: pair.stt === 'elevenlabs' ? elevenBase : openaiBase, apiKey: A.key, model: STT_MODEL[pair.stt] },
        tts: pair.tts === 'elevenlabs'
          ? { kind: 'elevenlabs', baseUrl: elevenBase, apiKey: A.key, model: 'eleven_flash_v2_5', voice: 'default' }
          : { kind: 'openai', baseUrl: pair.sse ? sse.base : openaiBase, apiKey: A.key, model: 'tts-1', voice: 'default' },
        firstByteTimeoutMs: 15_000,
      },
    });
    t.teardown(() => B.close());

    const results = await runKit(B.address, { exactRoundTrip: true, scriptedChat: true });
    for (const r of results) t.ok(r.ok, `contract kit: ${r.name}`, { error: r.error });
    if (pair === PAIRS[0]) {
      // The same kit as an operator runs it: `npm run contract -- --backend … --exact --scripted`.
      const run = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'test/contract/run.ts', '--backend', B.address, '--exact', '--scripted'], { timeout: 120_000 }).then(
        (r) => ({ code: 0, out: r.stdout }),
        (e: { code?: number; stdout?: string }) => ({ code: e.code ?? 1, out: e.stdout ?? '' }),
      );
      t.equal(run.code, 0, 'npm run contract exits 0 against this backend');
      t.match(run.out, new RegExp(`${results.length}/${results.length} checks passed against ${B.address.replace(/\./g, '\\.')}`));
    }

    const C = await startTestServer({ config: { backendAddress: B.address, outboundAllow: [`127.0.0.1:${endpoint.port}`] } });
    t.teardown(() => C.close());
    const tool = await makeTool(C, { name: 'Weather', description: 'The forecast for a city', arguments: [{ name: 'city', description: 'The city' }], method: 'GET', url: `${endpoint.url}/weather?city={{city}}` });
    const agent = await toolAgent(C, [tool]);
    const chatBefore = chat.requests.length;
    const servedBefore = sse.served;
    const caller = await connect(await createSession(C, agent));
    t.teardown(() => caller.convo.hangup().catch(() => {}));
    await caller.speak(QUESTION);
    await caller.waitFor(() => caller.finals('agent').length === 1, 30_000, 'the answer');
    await caller.waitFor(() => caller.convo.state === 'idle', 15_000, 'the answer spoken');
    t.same(caller.finals('user'), [QUESTION], 'the provider\'s recognizer heard the question');
    t.same(caller.finals('agent'), [ANSWER], 'the answer used the tool\'s result');
    t.equal(caller.heard(), ANSWER, 'the caller\'s audio decodes to the answer (spoken by the provider)');
    const hits = endpoint.hits.filter((h) => h.url.startsWith('/weather'));
    t.equal(hits.at(-1)?.url, '/weather?city=Paris', 'the webhook tool was called with the argument the model gave');
    const turns = chat.requests.slice(chatBefore).filter((r) => r.url === '/v1/chat/completions');
    t.equal(turns.length, 2, 'two model calls: the tool call, then the answer');
    t.match(turns[0]!.body, { tools: [{ function: { name: 'weather' } }] });
    t.match(turns[1]!.body.messages.at(-1), { role: 'tool', content: '{"forecast":"sunny"}' });
    if (pair.sse) t.ok(sse.served > servedBefore, 'speech came as server-sent events');
    const partials = caller.transcripts.filter((x) => x.role === 'user' && !x.final);
    // Partials come from realtime providers that send them (the ElevenLabs-style socket does;
    // Parley's OpenAI-style socket sends only completed transcripts), never from batch ones.
    if (pair.stt === 'elevenlabs') t.ok(partials.length > 0 && QUESTION.startsWith(partials.at(-1)!.text.replace(/\s+$/, '')), `partial transcripts of the question (${partials.length})`);
    if (pair.stt === 'openai') t.equal(partials.length, 0, 'a batch recognizer gives no partials');
    await caller.convo.hangup();
  });
}
