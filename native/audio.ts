// Small PCM helpers for the native backend: 16-bit mono samples only.

/** Little-endian bytes of 16-bit samples (a copy, safe to send). */
export function pcmBytes(pcm: Int16Array): Uint8Array {
  const out = new Uint8Array(pcm.length * 2);
  const view = new DataView(out.buffer);
  for (let i = 0; i < pcm.length; i++) view.setInt16(i * 2, pcm[i], true);
  return out;
}

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/**
 * Samples from little-endian bytes; a trailing odd byte is dropped. On a little-endian host
 * with the bytes at an even offset (2-byte aligned, as an `Int16Array` must be) the result is
 * a view on the same memory, no copy: the caller's frame is read where it arrived, so neither
 * side may write to it afterwards. At an odd offset (a field inside a network buffer) the
 * bytes are copied once.
 */
export function bytesToPcm(bytes: Uint8Array): Int16Array {
  const n = bytes.byteLength >> 1;
  if (LITTLE_ENDIAN && (bytes.byteOffset & 1) === 0) return new Int16Array(bytes.buffer, bytes.byteOffset, n);
  const out = new Int16Array(n);
  if (LITTLE_ENDIAN) {
    new Uint8Array(out.buffer).set(bytes.subarray(0, n * 2));
  } else {
    const view = new DataView(bytes.buffer, bytes.byteOffset, n * 2);
    for (let i = 0; i < n; i++) out[i] = view.getInt16(i * 2, true);
  }
  return out;
}

/** Multiply by a gain given in decibels, clamping to the 16-bit range. */
export function applyGainDb(pcm: Int16Array, db: number): Int16Array {
  if (!db) return pcm;
  const g = Math.pow(10, db / 20);
  const out = new Int16Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) out[i] = Math.max(-32768, Math.min(32767, Math.round(pcm[i] * g)));
  return out;
}

/** Linear-interpolation resampling; good enough for espeak's band-limited speech. */
export function resampleLinear(pcm: Int16Array, fromHz: number, toHz: number): Int16Array {
  if (fromHz === toHz || pcm.length === 0) return pcm;
  const n = Math.max(1, Math.round((pcm.length * toHz) / fromHz));
  const out = new Int16Array(n);
  const step = fromHz / toHz;
  for (let i = 0; i < n; i++) {
    const x = i * step;
    const i0 = Math.floor(x);
    const i1 = Math.min(i0 + 1, pcm.length - 1);
    const f = x - i0;
    out[i] = Math.round(pcm[Math.min(i0, pcm.length - 1)] * (1 - f) + pcm[i1] * f);
  }
  return out;
}

/** A WAV header for 16-bit mono; `dataBytes` 0xffffffff marks a stream of unknown length. */
export function wavHeader(sampleRateHz: number, dataBytes = 0xffffffff): Uint8Array {
  const h = new Uint8Array(44);
  const v = new DataView(h.buffer);
  const ascii = (o: number, s: string) => { for (let i = 0; i < s.length; i++) h[o + i] = s.charCodeAt(i); };
  ascii(0, 'RIFF');
  v.setUint32(4, dataBytes === 0xffffffff ? 0xffffffff : 36 + dataBytes, true);
  ascii(8, 'WAVE');
  ascii(12, 'fmt ');
  v.setUint32(16, 16, true);
  v.setUint16(20, 1, true);
  v.setUint16(22, 1, true);
  v.setUint32(24, sampleRateHz, true);
  v.setUint32(28, sampleRateHz * 2, true);
  v.setUint16(32, 2, true);
  v.setUint16(34, 16, true);
  ascii(36, 'data');
  v.setUint32(40, dataBytes, true);
  return h;
}

/** Parses a PCM WAV file (any channel count, 8/16/32-bit int or 32-bit float) into mono 16-bit. */
export function parseWav(bytes: Uint8Array): { pcm: Int16Array; sampleRateHz: number } | null {
  const text = (o: number, n: number) => String.fromCharCode(...bytes.subarray(o, o + n));
  if (bytes.byteLength < 12 || text(0, 4) !== 'RIFF' || text(8, 4) !== 'WAVE') return null;
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  let off = 12;
  let fmt: { format: number; channels: number; rate: number; bits: number } | null = null;
  while (off + 8 <= bytes.byteLength) {
    const id = text(off, 4);
    let size = v.getUint32(off + 4, true);
    const body = off + 8;
    if (id === 'fmt ') {
      fmt = { format: v.getUint16(body, true), channels: v.getUint16(body + 2, true), rate: v.getUint32(body + 4, true), bits: v.getUint16(body + 14, true) };
      if (fmt.format === 0xfffe) fmt.format = v.getUint16(body + 24, true);
    } else if (id === 'data' && fmt) {
      if (size === 0xffffffff || body + size > bytes.byteLength) size = bytes.byteLength - body;
      const bps = fmt.bits / 8;
      const frames = Math.floor(size / (bps * fmt.channels));
      const out = new Int16Array(frames);
      for (let i = 0; i < frames; i++) {
        let sum = 0;
        for (let c = 0; c < fmt.channels; c++) {
          const p = body + (i * fmt.channels + c) * bps;
          if (fmt.format === 3 && fmt.bits === 32) sum += v.getFloat32(p, true) * 32767;
          else if (fmt.bits === 16) sum += v.getInt16(p, true);
          else if (fmt.bits === 8) sum += (v.getUint8(p) - 128) * 256;
          else if (fmt.bits === 32) sum += v.getInt32(p, true) / 65536;
          else if (fmt.bits === 24) sum += ((v.getUint8(p) | (v.getUint8(p + 1) << 8) | (v.getInt8(p + 2) << 16)) / 256);
        }
        out[i] = Math.max(-32768, Math.min(32767, Math.round(sum / fmt.channels)));
      }
      return { pcm: out, sampleRateHz: fmt.rate };
    }
    off = body + size + (size & 1);
  }
  return null;
}

/**
 * Streaming band-limited resampling (a Hann-windowed sinc, 16 taps a side), for audio that
 * arrives in pieces: provider speech at its own rate, resampled to the rate a request asked for.
 * The rates' ratio is rational (to/from = L/M in lowest terms), so the output falls on L
 * phases between input samples: their weights are computed once (polyphase). Pieces
 * concatenate seamlessly; `flush()` gives the tail, so the total is round(input × toHz / fromHz).
 */
export class StreamResampler {
  private static readonly HALF = 16;
  /** Weights per phase: phases × 2·HALF. */
  private readonly weights: Float32Array;
  private readonly L: number;
  private readonly M: number;
  /** Input not yet consumed; `histStart` is the absolute index of its first sample. */
  private hist: Float32Array;
  private histStart: number;
  private inCount = 0;
  private outCount = 0;

  constructor(readonly fromHz: number, readonly toHz: number) {
    const H = StreamResampler.HALF;
    const gcd = (a: number, b: number): number => (b ? gcd(b, a % b) : a);
    const g = gcd(fromHz, toHz);
    this.L = toHz / g;
    this.M = fromHz / g;
    // Below both Nyquist frequencies, with a little room for the transition band.
    const cutoff = Math.min(1, toHz / fromHz) * 0.94;
    this.weights = new Float32Array(this.L * 2 * H);
    for (let phase = 0; phase < this.L; phase++) {
      const frac = phase / this.L;
      for (let j = 0; j < 2 * H; j++) {
        const x = frac + H - 1 - j; // distance from the tap at c − H + 1 + j to the output
        const sinc = x === 0 ? 1 : Math.sin(Math.PI * cutoff * x) / (Math.PI * cutoff * x);
        const w = Math.abs(x) >= H ? 0 : 0.5 * (1 + Math.cos((Math.PI * x) / H));
        this.weights[phase * 2 * H + j] = cutoff * sinc * w;
      }
    }
    // H zeros of virtual past, so the first output sits on the first input sample.
    this.hist = new Float32Array(H);
    this.histStart = -H;
  }

  private run(input: Float32Array | null, limit: number): Int16Array {
    const H = StreamResampler.HALF;
    let all = this.hist;
    if (input && input.length) {
      all = new Float32Array(this.hist.length + input.length);
      all.set(this.hist);
      all.set(input, this.hist.length);
    }
    const end = this.histStart + all.length; // absolute index after the last sample held
    const { L, M } = this;
    // Outputs whose taps all lie within what is held.
    let last = Math.floor(((end - H - 1) * L) / M); // largest k with floor(kM/L) + H < end
    while (Math.floor((last * M) / L) + H >= end) last--;
    const n = Math.max(0, Math.min(limit, last + 1) - this.outCount);
    const out = new Int16Array(n);
    const w = this.weights;
    for (let i = 0; i < n; i++) {
      const k = this.outCount + i;
      const km = k * M;
      const c = Math.floor(km / L);
      const phase = km - c * L;
      const base = c - H + 1 - this.histStart;
      const wb = phase * 2 * H;
      let acc = 0;
      for (let j = 0; j < 2 * H; j++) acc += all[base + j]! * w[wb + j]!;
      out[i] = acc > 32767 ? 32767 : acc < -32768 ? -32768 : Math.round(acc);
    }
    this.outCount += n;
    // Keep what the next output still needs.
    const nextC = Math.floor((this.outCount * M) / L);
    const keepFrom = Math.max(this.histStart, nextC - H + 1);
    this.hist = all.slice(keepFrom - this.histStart);
    this.histStart = keepFrom;
    return out;
  }

  push(pcm: Int16Array): Int16Array {
    if (this.fromHz === this.toHz) return pcm;
    this.inCount += pcm.length;
    const f = new Float32Array(pcm.length);
    for (let i = 0; i < pcm.length; i++) f[i] = pcm[i]!;
    return this.run(f, Number.POSITIVE_INFINITY);
  }

  /** The rest of the output (the input's last samples, with silence after them). */
  flush(): Int16Array {
    if (this.fromHz === this.toHz) return new Int16Array(0);
    const total = Math.round((this.inCount * this.toHz) / this.fromHz);
    return this.run(new Float32Array(StreamResampler.HALF * 2 + Math.ceil(this.M / this.L) + 2), total);
  }
}
