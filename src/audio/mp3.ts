import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createEncoder as createWasmEncoder, type WasmMediaEncoder } from 'wasm-media-encoders';
import { int16ToFloat32 } from './pcm.ts';

/**
 * MP3 via LAME compiled to WASM (`wasm-media-encoders`), constant bitrate, mono. The WASM
 * binary is compiled once per process and cached. Each instance owns a 16 MB WASM memory,
 * and a fresh one cost ~11 ms of CPU per stream (allocation, GC of the old memories) where
 * reconfiguring a finished one cost ~2–3 ms, so instances whose stream ended cleanly go
 * back to a small idle pool (at most MAX_IDLE) and are reconfigured for the next stream.
 * A stream abandoned without `end()` simply lets its instance be garbage-collected.
 *
 * LAME's legal bitrates depend on the MPEG version the rate implies: MPEG-1 (32, 44.1,
 * 48 kHz) up to 320 kbit/s, MPEG-2 (16, 22.05, 24 kHz) up to 160, MPEG-2.5 (8, 11.025,
 * 12 kHz) up to 64. A tier above the ceiling is clamped to it (see `mp3BitrateFor`).
 */

type Mp3Bitrate = 8 | 16 | 24 | 32 | 40 | 48 | 64 | 80 | 96 | 112 | 128 | 160 | 192 | 224 | 256 | 320;
type Mp3Rate = 8000 | 11025 | 12000 | 16000 | 22050 | 24000 | 32000 | 44100 | 48000;
const BITRATES: readonly Mp3Bitrate[] = [8, 16, 24, 32, 40, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320];
const CHUNK = 8192;
const MAX_IDLE = 8;
const idle: WasmMediaEncoder<'audio/mpeg'>[] = [];

let modulePromise: Promise<WebAssembly.Module> | undefined;

/** Compiles the LAME WASM once (call at start-up to take the cost out of the first request). */
export function loadMp3Module(): Promise<WebAssembly.Module> {
  if (!modulePromise) {
    const path = createRequire(import.meta.url).resolve('wasm-media-encoders/wasm/mp3');
    modulePromise = WebAssembly.compile(readFileSync(path));
    modulePromise.catch(() => (modulePromise = undefined));
  }
  return modulePromise;
}

/** The CBR bitrate LAME will use for a requested one at a rate: the highest legal ≤ request. */
export function mp3BitrateFor(sampleRateHz: number, kbps: number): Mp3Bitrate {
  const ceiling = sampleRateHz >= 32000 ? 320 : sampleRateHz >= 16000 ? 160 : 64;
  const want = Math.min(kbps, ceiling);
  let best: Mp3Bitrate = 8;
  for (const b of BITRATES) if (b <= want) best = b;
  return best;
}

export class Mp3Stream {
  private scratch = new Float32Array(CHUNK);
  private done = false;
  private constructor(private readonly lame: WasmMediaEncoder<'audio/mpeg'>) {}

  static async create(sampleRateHz: number, kbps: number): Promise<Mp3Stream> {
    const lame = idle.pop() ?? (await createWasmEncoder('audio/mpeg', await loadMp3Module()));
    lame.configure({
      sampleRate: sampleRateHz,
      channels: 1,
      bitrate: mp3BitrateFor(sampleRateHz, kbps),
      outputSampleRate: sampleRateHz as Mp3Rate,
    });
    return new Mp3Stream(lame);
  }

  /** Samples at the configured rate in; whole MP3 frames out (LAME holds back a partial one). */
  push(pcm: Int16Array): Uint8Array[] {
    if (this.done) throw new Error('mp3 stream ended');
    const out: Uint8Array[] = [];
    for (let i = 0; i < pcm.length; i += CHUNK) {
      const part = pcm.subarray(i, Math.min(pcm.length, i + CHUNK));
      const f = int16ToFloat32(part, this.scratch).subarray(0, part.length);
      // The returned bytes live in the encoder's memory until the next call: copy.
      const bytes = this.lame.encode([f]);
      if (bytes.length) out.push(bytes.slice());
    }
    return out;
  }

  end(): Uint8Array[] {
    if (this.done) return [];
    this.done = true;
    const bytes = this.lame.finalize();
    const out = bytes.length ? [bytes.slice()] : [];
    if (idle.length < MAX_IDLE) idle.push(this.lame);
    return out;
  }
}
