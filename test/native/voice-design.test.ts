// Voice design in the native backend: the description's words mapped onto what espeak can vary
// (voice variant, pitch, pace), heard in the audio (fundamental frequency, duration), designed
// voice ids spoken by Synthesize, and UNIMPLEMENTED where the engine has a single voice.
import t from 'tap';
import { designsFor, parseDesignId, traitsOf } from '../../native/engines/espeak-design.ts';
import { startBackend, type Backend } from '../../native/server.ts';
import { AudioEncoding } from '../../src/gen/inference/v1/inference_pb.ts';
import { createInferenceClient, type InferenceClient } from '../../src/inference/index.ts';
import { medianF0 } from '../helpers/pitch.ts';
import { bytesInt16 } from './helpers.ts';

t.test('the description\'s words: gender, age, pitch and pace are applied; the rest is reported', async (t) => {
  const tr = traitsOf('A warm, confident grandmother with a deep voice who speaks slowly');
  t.match(tr, { gender: 'female', age: 'old', pitch: 'low', pace: 'slow', whisper: false });
  t.same(tr.applied, ['grandmother', 'deep', 'slowly']);
  t.same(tr.ignored, ['warm', 'confident']);
  t.match(traitsOf('an energetic young man, high-pitched'), { gender: 'male', age: 'young', pitch: 'high', pace: 'fast' });
  t.match(traitsOf('someone whispering'), { whisper: true, gender: undefined });
  t.same(traitsOf('Warm, confident studio narrator with a natural tone').applied, [], 'nothing espeak can vary');
});

t.test('designs: distinct, seeded, within the pools the words select', async (t) => {
  const a = designsFor('a woman', 4, 1, 7);
  t.equal(a.length, 4);
  t.equal(new Set(a.map((d) => `${d.design.variant}:${d.design.pitch}:${d.design.pace}`)).size, 4, 'four distinct voices');
  t.ok(a.every((d) => /^f\d$/.test(d.design.variant)), `female variants only: ${a.map((d) => d.design.variant)}`);
  t.same(designsFor('a woman', 4, 1, 7), a, 'the same seed gives the same designs');
  t.ok(designsFor('an old man', 3, 1, 1).every((d) => ['grandpa', 'croak', 'm1'].includes(d.design.variant)), 'older male variants');
  const either = designsFor('a narrator', 2, 1, 3).map((d) => d.design.variant[0]);
  t.same(either.sort(), ['f', 'm'], 'no gender named: one of each');
  const deep = designsFor('a deep voice', 1, 1, 5)[0]!.design;
  const high = designsFor('a high voice', 1, 1, 5)[0]!.design;
  t.ok(deep.pitch < high.pitch - 15, `deep ${deep.pitch} below high ${high.pitch}`);
  const slow = designsFor('slow', 1, 1, 5)[0]!.design;
  const fast = designsFor('fast', 1, 1.5, 5)[0]!.design;
  t.ok(slow.pace < 90 && fast.pace > 150, `paces ${slow.pace} and ${fast.pace} (speed 1.5 on top of "fast")`);
  t.same(parseDesignId('espeak-design:f3:62:115'), { variant: 'f3', pitch: 62, pace: 115 });
  for (const bad of ['espeak-design:zz9:50:100', 'espeak-design:f3:50:20', 'espeak-design:f3:100:100', 'male', 'espeak-design:f3:50']) t.equal(parseDesignId(bad), null, bad);
});

t.test('DesignVoice on the espeak engine: previews that sound as designed, voices Synthesize speaks with', async (t) => {
  const backend: Backend = await startBackend({ address: '127.0.0.1:0', engine: 'espeak' });
  const client: InferenceClient = createInferenceClient({ nativeAddress: backend.address, backends: '' });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const text = 'One two three four five six seven eight nine ten.';
  const one = async (description: string) => {
    const r = await client.designVoice({ description, text, count: 1, seed: 11n, language: 'en' });
    const v = r.voices[0]!;
    return { ...v, pcm: bytesInt16(v.audio) };
  };
  const high = await one('a high-pitched young woman');
  const deep = await one('a deep-voiced old man');
  t.match(high.voiceId, /^espeak-design:f\d:\d+:\d+$/);
  t.match(deep.voiceId, /^espeak-design:(grandpa|croak|m1):\d+:\d+$/);
  t.equal(high.encoding, AudioEncoding.PCM_S16LE);
  t.equal(high.sampleRateHz, 22050);
  t.equal(high.text, text);
  t.equal(high.language, 'en');
  t.ok(Math.abs(high.durationMs - (high.pcm.length / 22050) * 1000) < 1);
  const [fHigh, fDeep] = [medianF0(high.pcm, 22050), medianF0(deep.pcm, 22050)];
  t.ok(fHigh > fDeep * 1.4, `the high-pitched woman's voice is higher: ${fHigh.toFixed(0)} Hz against ${fDeep.toFixed(0)} Hz`);
  const slow = await one('a man who speaks slowly');
  const fast = await one('a man who speaks fast');
  t.ok(fast.durationMs < slow.durationMs * 0.8, `fast ${fast.durationMs.toFixed(0)} ms against slow ${slow.durationMs.toFixed(0)} ms`);
  t.match(high.summary, /^espeak-ng voice variant f\d \(female\), pitch \d+ of 99, pace [\d.]+× \(\d+ words per minute\)\. Applied: high-pitched, young, woman\.$/);
  const narrator = await client.designVoice({ description: 'Warm, confident studio narrator with a natural tone', count: 2, seed: 3n });
  t.equal(narrator.voices.length, 2);
  t.match(narrator.voices[0]!.summary, /Not applied \(espeak varies only voice variant, pitch and pace\): warm, confident, studio, narrator, natural\.$/);
  t.match(narrator.voices[0]!.text, /^Hello! This is how I sound\./, 'the default preview text');

  const again = await client.designVoice({ description: 'a high-pitched young woman', text, count: 1, seed: 11n, language: 'en' });
  t.equal(again.voices[0]!.voiceId, high.voiceId, 'the same seed designs the same voice');

  // Synthesis with the designed voice sounds like its preview, in other languages too.
  const spoken: Int16Array[] = [];
  for await (const c of client.synthesize({ text, referenceId: high.voiceId, language: 'en' })) spoken.push(bytesInt16(c.audio));
  const pcm = Int16Array.from(spoken.flatMap((p) => Array.from(p)));
  t.ok(Math.abs(medianF0(pcm, 22050) - fHigh) < 15, 'Synthesize speaks with the designed pitch');
  t.ok(Math.abs(pcm.length - high.pcm.length) < 2205, 'and pace (the same length as the preview, within 0.1 s)');
  let german = 0;
  for await (const c of client.synthesize({ text: 'Guten Tag, wie geht es Ihnen?', referenceId: deep.voiceId, language: 'de' })) german += c.audio.length;
  t.ok(german > 0, 'a designed voice speaks German');
  const kept = await client.saveVoice({ voiceId: high.voiceId, name: 'Bright' });
  t.equal(kept.voiceId, high.voiceId, 'an espeak design lasts by itself: SaveVoice answers the same id');

  const wav = await client.designVoice({ description: 'a calm woman', count: 1, output: { encoding: AudioEncoding.WAV, sampleRateHz: 16000 } });
  t.equal(Buffer.from(wav.voices[0]!.audio.subarray(0, 4)).toString(), 'RIFF');
  t.equal(wav.voices[0]!.sampleRateHz, 16000);

  const refused = async (p: Promise<unknown>) => p.then(() => 'ok', (e: { status?: number; message: string; fields?: { loc: unknown[] }[] }) => `${e.status} ${e.fields ? `${e.fields[0]!.loc.join('.')}: ` : ''}${e.message}`);
  t.equal(await refused(client.saveVoice({ voiceId: 'espeak-design:nope:50:100' })), '400 Reference not found');
  t.equal(await refused(client.designVoice({ description: 'calm', count: 9 })), '422 body.count: must be between 1 and 4');
  t.equal(await refused(client.designVoice({ description: 'calm', speed: 4 })), '422 body.speed: must be above 0 and at most 3');
  const sneaky: string[] = [];
  for await (const c of client.synthesize({ text: 'Hi.', referenceId: 'espeak-design:f3:62:115' })) sneaky.push(String(c.audio.length));
  t.ok(sneaky.length > 0, 'a well-formed design id is a voice, whoever wrote it (it only names espeak settings)');
});

t.test('the synthetic engine has one voice: DesignVoice answers UNIMPLEMENTED naming what designs; the model espeak designs', async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '' });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const err = await client.designVoice({ description: 'a calm woman' }).then(() => null, (e: { status: number; message: string }) => e);
  t.equal(err?.status, 400);
  t.equal(err?.message, 'Not supported by the inference backend: voice design: the synthetic engine cannot vary its voice; voice design needs the espeak engine (PARLEY_SPEECH_ENGINE=espeak, or the model espeak) or an ElevenLabs speech provider');
  const caps = await client.capabilities();
  t.same(caps.models.filter((m) => m.kind === 4).map((m) => m.name), ['espeak'], 'only the espeak engine is listed as a designer');
});
