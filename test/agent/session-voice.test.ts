// A session's stored voice is looked up as the session starts (src/sessions/runtime.ts
// `inferenceBackend`), not on its first turn's path: the store answering later than the model
// held that turn's first audio (bench/README.md, sixth pass).
import t from 'tap';
import { inferenceBackend } from '../../src/sessions/runtime.ts';
import type { InferenceClient, SynthesizeInput } from '../../src/inference/index.ts';

/** Stands in for the gRPC client (what this test is about is when the voice is asked for). */
function recordingInference() {
  const configs: SynthesizeInput[] = [];
  const inference = {
    async synthesizeStream(config: SynthesizeInput) {
      configs.push(config);
      return { send() {}, flush() {}, end() {}, cancel() {}, async *[Symbol.asyncIterator]() {} };
    },
  } as unknown as InferenceClient;
  return { inference, configs };
}

t.test('the voice is resolved when the session backend is made, once, and its references reach synthesis', async (t) => {
  const asked: string[] = [];
  let answer!: (v: { referenceId: string; references: { audio: Uint8Array; text: string }[] }) => void;
  const resolveVoice = (teamId: string, id: string) => {
    asked.push(`${teamId}/${id}`);
    return new Promise<{ referenceId: string; references: { audio: Uint8Array; text: string }[] }>((r) => (answer = r));
  };
  const { inference, configs } = recordingInference();
  const backend = inferenceBackend(inference, { teamId: 'team_1', chatModel: 'llm-medium', resolveVoice, voiceId: 'voice_1' });
  t.same(asked, ['team_1/voice_1'], 'asked at once, before any turn');
  answer({ referenceId: 'voice_1', references: [{ audio: new Uint8Array([1, 2]), text: 'Hello.' }] });
  const signal = new AbortController().signal;
  await backend.synthesize({ voiceId: 'voice_1', language: 'en', signal });
  await backend.synthesize({ voiceId: 'voice_1', language: 'en', signal });
  t.same(asked, ['team_1/voice_1'], 'once per session');
  t.equal(configs.length, 2);
  t.same(configs[0].references?.map((r) => r.text), ['Hello.'], 'the stored voice speaks');
});

t.test('a voice the store does not know: the default voice speaks, and nothing is left unhandled', async (t) => {
  const { inference, configs } = recordingInference();
  const backend = inferenceBackend(inference, { teamId: 'team_1', chatModel: 'llm-medium', resolveVoice: async () => { throw new Error('Reference not found'); }, voiceId: 'gone' });
  await new Promise((r) => setImmediate(r));
  await backend.synthesize({ voiceId: 'gone', language: 'en', signal: new AbortController().signal });
  t.equal(configs[0].references, undefined);
  t.equal(configs[0].referenceId, undefined);
});

t.test('without a voice id nothing is looked up before a turn asks', async (t) => {
  const asked: string[] = [];
  const { inference } = recordingInference();
  inferenceBackend(inference, { teamId: 'team_1', chatModel: 'llm-medium', resolveVoice: async (_, id) => { asked.push(id); return { referenceId: id, references: [] }; } });
  await new Promise((r) => setImmediate(r));
  t.same(asked, []);
});
