/**
 * Synthetic modem decode speed: seconds of audio one core decodes per second of CPU time,
 * through StreamDecoder fed 20 ms frames, for continuous speech, speech with pauses (half
 * silence) and silence alone; then 1,000 decoders fed interleaved 20 ms frames (10 s each of
 * speech with pauses) the way a server would; plus encode speed. Prints one JSON object.
 */
import { StreamDecoder, encodeText } from '../native/engines/synthetic/modem.ts';

const sampleRateHz = Number(process.env.RATE ?? 24000);
const words = 'the quick brown fox jumps over a lazy dog while déjà vu naïve 世界 你好 🎉 ok'.split(' ');

function sentence(i: number): string {
  const n = 4 + (i % 7);
  return Array.from({ length: n }, (_, k) => words[(i * 7 + k * 3) % words.length]).join(' ');
}

function stream(seconds: number, speechShare: number): Int16Array {
  const total = Math.round(seconds * sampleRateHz);
  const out = new Int16Array(total);
  let at = 0;
  for (let i = 0; at < total; i++) {
    if (speechShare > 0) {
      const burst = encodeText(sentence(i), { sampleRateHz }).pcm;
      out.set(burst.subarray(0, Math.min(burst.length, total - at)), at);
      at += burst.length;
      at += Math.round((burst.length * (1 - speechShare)) / speechShare);
    } else at = total;
  }
  return out;
}

function measure(pcm: Int16Array): { realtimeFactor: number; committed: number } {
  const frame = Math.round(sampleRateHz / 50);
  const dec = new StreamDecoder(sampleRateHz);
  let committed = 0;
  const t0 = process.cpuUsage();
  for (let i = 0; i < pcm.length; i += frame) {
    for (const e of dec.push(pcm.subarray(i, i + frame))) if (e.type === 'committed') committed++;
  }
  for (const e of dec.flush()) if (e.type === 'committed') committed++;
  const used = process.cpuUsage(t0);
  const cpuS = (used.user + used.system) / 1e6;
  return { realtimeFactor: Math.round(pcm.length / sampleRateHz / cpuS), committed };
}

const seconds = 120;
const speech = stream(seconds, 1);
const mixed = stream(seconds, 0.5);
const silence = new Int16Array(seconds * sampleRateHz);
measure(mixed); // warm-up

const e0 = process.cpuUsage();
let encodedS = 0;
for (let i = 0; i < 200; i++) encodedS += encodeText(sentence(i), { sampleRateHz }).durationMs / 1000;
const eUsed = process.cpuUsage(e0);

/** 1,000 streams, frames interleaved across decoders: CPU per audio second and heap. */
function concurrent(streams: number, seconds: number): { realtimeFactor: number; coresNeeded: number; heapKBPerStream: number; committed: number } {
  const audio = stream(seconds, 0.5);
  const frame = Math.round(sampleRateHz / 50);
  global.gc?.();
  const heap0 = process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers;
  const decoders = Array.from({ length: streams }, () => new StreamDecoder(sampleRateHz));
  let committed = 0;
  const t0 = process.cpuUsage();
  let heapPeak = 0;
  for (let i = 0; i < audio.length; i += frame) {
    // Each stream starts at a different point of the audio, as real calls would.
    for (let s = 0; s < streams; s++) {
      const at = (i + s * 977 * frame) % (audio.length - frame);
      for (const e of decoders[s].push(audio.subarray(at, at + frame))) if (e.type === 'committed') committed++;
    }
    if (i % (frame * 50) === 0) heapPeak = Math.max(heapPeak, process.memoryUsage().heapUsed + process.memoryUsage().arrayBuffers);
  }
  const used = process.cpuUsage(t0);
  const cpuS = (used.user + used.system) / 1e6;
  const realtimeFactor = Math.round((streams * seconds) / cpuS);
  return {
    realtimeFactor,
    coresNeeded: Math.round((streams / realtimeFactor) * 100) / 100,
    heapKBPerStream: Math.round((heapPeak - heap0) / streams / 1024),
    committed,
  };
}

const continuous = measure(speech);
const halfSilence = measure(mixed);
const silent = measure(silence);
console.log(
  JSON.stringify({
    sampleRateHz,
    audioSecondsEach: seconds,
    decodeRealtimeFactorPerCore: {
      continuousSpeech: continuous.realtimeFactor,
      halfSpeechHalfSilence: halfSilence.realtimeFactor,
      silence: silent.realtimeFactor,
    },
    burstsCommitted: { continuousSpeech: continuous.committed, halfSpeechHalfSilence: halfSilence.committed },
    encodeRealtimeFactorPerCore: Math.round(encodedS / ((eUsed.user + eUsed.system) / 1e6)),
    streamsPerTwoCoresAtHalfSpeech: 2 * halfSilence.realtimeFactor,
    thousandConcurrentStreams: concurrent(1000, 10),
  }),
);
