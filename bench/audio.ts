/**
 * Audio encode throughput, in multiples of real time per core (audio seconds encoded per
 * CPU second of this process; the work is single-threaded). Input is a 1 kHz tone plus a
 * sweep and noise (so the codecs cannot coast on silence), pushed in 100 ms chunks as a
 * synthesis stream delivers it. Prints one JSON object.
 *
 *   npx tsx bench/audio.ts [seconds-of-audio-per-case=20]
 */
import { createEncoder, createResampler, loadMp3Module, type EncoderOptions } from '../src/audio/index.ts';
import { testSignal } from './lib.ts';

const AUDIO_S = Number(process.argv[2] ?? 20);


function chunks(pcm: Int16Array, sampleRateHz: number, ms: number): Int16Array[] {
  const size = Math.round((sampleRateHz * ms) / 1000);
  const out: Int16Array[] = [];
  for (let i = 0; i < pcm.length; i += size) out.push(pcm.subarray(i, i + size));
  return out;
}

interface Result {
  name: string;
  xRealTime: number;
  cpuMs: number;
  audioS: number;
  outBytes?: number;
  kbps?: number;
}

function measure(name: string, audioS: number, run: () => number): Result {
  run(); // warm up (JIT, WASM tiers)
  const c0 = process.cpuUsage();
  const outBytes = run();
  const c = process.cpuUsage(c0);
  const cpuMs = (c.user + c.system) / 1000;
  return {
    name,
    xRealTime: Math.round((audioS * 1000) / cpuMs),
    cpuMs: Math.round(cpuMs),
    audioS,
    ...(outBytes ? { outBytes, kbps: Math.round((outBytes * 8) / audioS / 100) / 10 } : {}),
  };
}

async function encodeCase(name: string, opts: EncoderOptions): Promise<Result> {
  const pcm = testSignal(opts.inputSampleRateHz, AUDIO_S);
  const parts = chunks(pcm, opts.inputSampleRateHz, 100);
  // Encoders are created outside the timed region; creation is measured separately.
  const encoders = [await createEncoder(opts), await createEncoder(opts)];
  let k = 0;
  return measure(name, AUDIO_S, () => {
    const enc = encoders[k++];
    let bytes = 0;
    for (const p of parts) for (const b of enc.push(p)) bytes += b.length;
    for (const b of enc.end()) bytes += b.length;
    return bytes;
  });
}

function resampleCase(from: number, to: number): Result {
  const parts = chunks(testSignal(from, AUDIO_S), from, 100);
  return measure(`resample ${from}→${to}`, AUDIO_S, () => {
    const r = createResampler(from, to);
    let n = 0;
    for (const p of parts) n += r.push(p).length;
    n += r.end().length;
    return 0 * n;
  });
}

async function creation(): Promise<Record<string, number>> {
  const t0 = performance.now();
  await loadMp3Module();
  const compileMs = performance.now() - t0;
  const out: Record<string, number> = { mp3WasmCompileMs: Math.round(compileMs * 10) / 10 };
  for (const format of ['mp3', 'opus', 'wav'] as const) {
    const sampleRateHz = format === 'opus' ? 48000 : 44100;
    const t = performance.now();
    for (let i = 0; i < 50; i++) (await createEncoder({ format, sampleRateHz, inputSampleRateHz: 24000 })).end();
    out[`${format}CreateMs`] = Math.round(((performance.now() - t) / 50) * 1000) / 1000;
  }
  return out;
}

const cases: [string, EncoderOptions][] = [
  ['mp3 64k 44.1kHz', { format: 'mp3', sampleRateHz: 44100, inputSampleRateHz: 44100, mp3BitrateKbps: 64 }],
  ['mp3 128k 44.1kHz', { format: 'mp3', sampleRateHz: 44100, inputSampleRateHz: 44100, mp3BitrateKbps: 128 }],
  ['mp3 192k 44.1kHz', { format: 'mp3', sampleRateHz: 44100, inputSampleRateHz: 44100, mp3BitrateKbps: 192 }],
  ['mp3 128k 32kHz', { format: 'mp3', sampleRateHz: 32000, inputSampleRateHz: 32000, mp3BitrateKbps: 128 }],
  ['opus auto 48kHz', { format: 'opus', sampleRateHz: 48000, inputSampleRateHz: 48000 }],
  ['opus 32k 48kHz', { format: 'opus', sampleRateHz: 48000, inputSampleRateHz: 48000, opusBitrate: 32000 }],
  ['wav 44.1kHz', { format: 'wav', sampleRateHz: 44100, inputSampleRateHz: 44100 }],
  ['wav 48kHz', { format: 'wav', sampleRateHz: 48000, inputSampleRateHz: 48000 }],
  ['pcm 16kHz', { format: 'pcm', sampleRateHz: 16000, inputSampleRateHz: 16000 }],
  // With resampling from a typical 24 kHz synthesis rate.
  ['mp3 128k 44.1kHz from 24kHz', { format: 'mp3', sampleRateHz: 44100, inputSampleRateHz: 24000, mp3BitrateKbps: 128 }],
  ['opus auto 48kHz from 24kHz', { format: 'opus', sampleRateHz: 48000, inputSampleRateHz: 24000 }],
  ['wav 44.1kHz from 24kHz', { format: 'wav', sampleRateHz: 44100, inputSampleRateHz: 24000 }],
  ['pcm 8kHz from 24kHz', { format: 'pcm', sampleRateHz: 8000, inputSampleRateHz: 24000 }],
];

const created = await creation();
const encode: Result[] = [];
for (const [name, opts] of cases) encode.push(await encodeCase(name, opts));
const resample = [resampleCase(44100, 48000), resampleCase(24000, 48000), resampleCase(24000, 44100), resampleCase(48000, 16000), resampleCase(16000, 8000)];

console.log(
  JSON.stringify({
    bench: 'audio',
    node: process.version,
    audioSecondsPerCase: AUDIO_S,
    chunkMs: 100,
    unit: 'xRealTime = seconds of audio encoded per CPU second (one core)',
    creation: created,
    encode,
    resample,
  }),
);
