// Acceptance (shared by the three roundtrip-*.test.ts files, split so each stays short):
// random sentences → synthetic speech through the native backend and the platform's
// client → Transcribe gives exactly the text, raw or after a codec.
import type { Test } from 'tap';
import { startBackend } from '../../native/server.ts';
import { createInferenceClient, pb } from '../../src/inference/index.ts';
import { bytesInt16, int16Bytes, mp3RoundTrip, opusRoundTrip, randomSentence, rng } from './helpers.ts';

export const COUNT = 200;

/** Runs COUNT sentences through `path` and reports the ones that did not come back exactly. */
export async function roundTrip(t: Test, path: 'raw' | 'mp3' | 'opus') {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '' });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  const next = rng(20261125);
  const sentences = Array.from({ length: COUNT }, () => randomSentence(next));
  t.ok(
    sentences.some((s) => /\p{Script=Han}/u.test(s)) && sentences.some((s) => /\p{Extended_Pictographic}/u.test(s)) && sentences.some((s) => /[éüñø]/.test(s)),
    'the sample covers CJK, emoji and accented Latin',
  );
  // The compat layer's rates: MP3 at 44.1 kHz (all sentences) and 32 kHz (the first 50);
  // Opus at 48 kHz; raw PCM at 44.1 kHz.
  const runs: [string, number][] = sentences.map((s) => [s, path === 'opus' ? 48000 : 44100]);
  if (path === 'mp3') runs.push(...sentences.slice(0, 50).map((s): [string, number] => [s, 32000]));
  const failures: { text: string; heard: string; rate: number }[] = [];
  for (const [text, rate] of runs) {
    const parts: Uint8Array[] = [];
    for await (const c of client.synthesize({ text, model: 's2.1-pro', output: { sampleRateHz: rate } })) parts.push(c.audio);
    let pcm = bytesInt16(Buffer.concat(parts));
    let pcmRate = rate;
    if (path === 'mp3') ({ pcm, sampleRateHz: pcmRate } = await mp3RoundTrip(pcm, rate, 64));
    if (path === 'opus') pcm = opusRoundTrip(pcm);
    const heard = (await client.transcribe({ input: { encoding: pb.AudioEncoding.PCM_S16LE, sampleRateHz: pcmRate } }, int16Bytes(pcm))).text;
    if (heard !== text) failures.push({ text, heard, rate });
  }
  t.same(failures, [], `${runs.length} runs of ${COUNT} random sentences transcribe exactly (${path})`);
}
