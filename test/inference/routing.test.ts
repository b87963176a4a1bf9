import t from 'tap';
import { ServiceError } from '../../src/errors.ts';
import { parseInferenceBackends, resolveModelId } from '../../src/inference/index.ts';

const NATIVE = '127.0.0.1:50051';

t.test('by default every spec id and the chat ids route to the native backend', async (t) => {
  const r = parseInferenceBackends(undefined, NATIVE);
  for (const id of ['s2.1-pro', 's2.1-pro-free', 's2-pro', 's1', 'transcribe-1']) t.same(r[id], { address: NATIVE, model: id }, id);
  for (const id of ['llm-instant', 'llm-medium', 'llm-high', 'scripted']) t.same(r[id], { address: NATIVE, model: id }, id);
});

t.test('INFERENCE_BACKENDS as a list overrides some ids and keeps the rest', async (t) => {
  const r = parseInferenceBackends('s2.1-pro=gpu-a:50051/fish-s2, transcribe-1=asr:7000, my-voice=gpu-b:50051/custom', NATIVE);
  t.same(r['s2.1-pro'], { address: 'gpu-a:50051', model: 'fish-s2' });
  t.same(r['transcribe-1'], { address: 'asr:7000', model: 'transcribe-1' });
  t.same(r['my-voice'], { address: 'gpu-b:50051', model: 'custom' });
  t.same(r.s1, { address: NATIVE, model: 's1' });
});

t.test('INFERENCE_BACKENDS as JSON, dns targets and the * key', async (t) => {
  const r = parseInferenceBackends('{"*": "dns:///backends.internal:50051", "llm-high": {"address": "llm:9000", "model": "big"}}', NATIVE);
  t.same(r.s1, { address: 'dns:///backends.internal:50051', model: 's1' });
  t.same(r['llm-high'], { address: 'llm:9000', model: 'big' });
  t.same(parseInferenceBackends('s1=dns:///b.internal:50051', NATIVE).s1, { address: 'dns:///b.internal:50051', model: 's1' });
});

t.test('a malformed INFERENCE_BACKENDS fails at startup', async (t) => {
  t.throws(() => parseInferenceBackends('{"s1": 5}', NATIVE), ServiceError);
  t.throws(() => parseInferenceBackends('{not json', NATIVE), ServiceError);
  t.throws(() => parseInferenceBackends('s1', NATIVE), ServiceError);
});

t.test('an unknown or missing model means s2.1-pro (speech), transcribe-1, llm-medium', async (t) => {
  const r = parseInferenceBackends('extra-voice=gpu:1/x', NATIVE);
  t.equal(resolveModelId(r, 'speech', undefined), 's2.1-pro');
  t.equal(resolveModelId(r, 'speech', ''), 's2.1-pro');
  t.equal(resolveModelId(r, 'speech', 'eleven_multilingual_v2'), 's2.1-pro');
  t.equal(resolveModelId(r, 'speech', 's1'), 's1');
  t.equal(resolveModelId(r, 'speech', 'extra-voice'), 'extra-voice');
  t.equal(resolveModelId(r, 'speech', 'transcribe-1'), 's2.1-pro', "another kind's id is not a speech model");
  t.equal(resolveModelId(r, 'transcription', 'whisper-1'), 'transcribe-1');
  t.equal(resolveModelId(r, 'chat', undefined), 'llm-medium');
  t.equal(resolveModelId(r, 'chat', 'llm-high'), 'llm-high');
});
