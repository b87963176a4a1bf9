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
 *
 * Cost (it is most of a resampled provider call's CPU): the input is held as it came, 16-bit, in
 * one reused buffer (no copy of the history per piece, only the output is allocated; about
 * 0.35 ms per second of 24 → 16 kHz audio against 0.8 ms before, bench/README.md
 * "providers.ts"), and the phases whose
 * weights are symmetric (an output on an input sample, or half way between two: both phases of
 * 24 → 16 kHz, 48 → 32 kHz, the only phase of 48 → 16 or 24 kHz) add each mirrored pair of
 * input samples before one multiply: half the multiplies.
 */
export class StreamResampler {
  /** Taps a side; the folded phases in `run` are written out for 16. */
  private static readonly HALF = 16;
  /** Weights per phase: phases × 2·HALF (tap j of phase p at p·2·HALF + j). */
  private readonly weights: Float64Array;
  /** Phase 0 folded: [0] for the centre sample, [d] for the pair at distance d. */
  private readonly folded0: Float64Array;
  /** The half-way phase (L even) folded: [e] for the pair at e and e + 1 from the centre; null when L is odd. */
  private readonly foldedHalf: Float64Array | null;
  private readonly L: number;
  private readonly M: number;
  /** Input held: `buf[0, held)` is absolute input index `bufStart` onwards. */
  private buf: Int16Array;
  private held: number;
  private bufStart: number;
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
    /** The filter at distance x (input samples) from the output. */
    const weight = (x: number) => {
      const sinc = x === 0 ? 1 : Math.sin(Math.PI * cutoff * x) / (Math.PI * cutoff * x);
      const w = Math.abs(x) >= H ? 0 : 0.5 * (1 + Math.cos((Math.PI * x) / H));
      return cutoff * sinc * w;
    };
    this.weights = new Float64Array(this.L * 2 * H);
    for (let phase = 0; phase < this.L; phase++) {
      const frac = phase / this.L;
      // Tap j is input sample c − H + 1 + j: at distance frac + H − 1 − j from the output.
      for (let j = 0; j < 2 * H; j++) this.weights[phase * 2 * H + j] = weight(frac + H - 1 - j);
    }
    this.folded0 = Float64Array.from({ length: H }, (_, d) => weight(d));
    this.foldedHalf = this.L % 2 === 0 ? Float64Array.from({ length: H }, (_, e) => weight(e + 0.5)) : null;
    // H zeros of virtual past, so the first output sits on the first input sample.
    this.buf = new Int16Array(4096);
    this.held = H;
    this.bufStart = -H;
  }

  /** Appends input after dropping what no output needs any more. */
  private append(pcm: Int16Array | null, zeros: number) {
    const H = StreamResampler.HALF;
    const nextC = Math.floor((this.outCount * this.M) / this.L);
    const drop = Math.max(0, nextC - H + 1 - this.bufStart);
    if (drop > 0) {
      this.buf.copyWithin(0, drop, this.held);
      this.held -= drop;
      this.bufStart += drop;
    }
    const add = pcm ? pcm.length : zeros;
    if (this.held + add > this.buf.length) {
      const bigger = new Int16Array(Math.max(this.buf.length * 2, this.held + add));
      bigger.set(this.buf.subarray(0, this.held));
      this.buf = bigger;
    }
    if (pcm) this.buf.set(pcm, this.held);
    else this.buf.fill(0, this.held, this.held + zeros);
    this.held += add;
  }

  private run(limit: number): Int16Array {
    const H = StreamResampler.HALF;
    const end = this.bufStart + this.held; // absolute index after the last sample held
    const { L, M } = this;
    // Outputs whose taps all lie within what is held.
    let last = Math.floor(((end - H - 1) * L) / M); // largest k with floor(kM/L) + H < end
    while (Math.floor((last * M) / L) + H >= end) last--;
    const n = Math.max(0, Math.min(limit, last + 1) - this.outCount);
    const out = new Int16Array(n);
    const b = this.buf;
    const w = this.weights;
    // The folded phases written out term by term (HALF is 16): twice as fast as a loop over the
    // weights, V8 does not unroll loops.
    const f0 = this.folded0;
    const fh = this.foldedHalf ?? this.folded0;
    const a0 = f0[0]!, a1 = f0[1]!, a2 = f0[2]!, a3 = f0[3]!, a4 = f0[4]!, a5 = f0[5]!, a6 = f0[6]!, a7 = f0[7]!;
    const a8 = f0[8]!, a9 = f0[9]!, a10 = f0[10]!, a11 = f0[11]!, a12 = f0[12]!, a13 = f0[13]!, a14 = f0[14]!, a15 = f0[15]!;
    const h0 = fh[0]!, h1 = fh[1]!, h2 = fh[2]!, h3 = fh[3]!, h4 = fh[4]!, h5 = fh[5]!, h6 = fh[6]!, h7 = fh[7]!;
    const h8 = fh[8]!, h9 = fh[9]!, h10 = fh[10]!, h11 = fh[11]!, h12 = fh[12]!, h13 = fh[13]!, h14 = fh[14]!, h15 = fh[15]!;
    const folded = this.foldedHalf !== null;
    const halfPhase = L / 2;
    const k0 = this.outCount;
    let c = Math.floor((k0 * M) / L);
    let phase = k0 * M - c * L;
    const cStep = Math.floor(M / L);
    const pStep = M - cStep * L;
    const origin = this.bufStart;
    for (let i = 0; i < n; i++) {
      const at = c - origin; // the centre tap's place in buf
      let acc: number;
      if (phase === 0) {
        acc = a0 * b[at]! + a1 * (b[at - 1]! + b[at + 1]!)
          + a2 * (b[at - 2]! + b[at + 2]!) + a3 * (b[at - 3]! + b[at + 3]!)
          + a4 * (b[at - 4]! + b[at + 4]!) + a5 * (b[at - 5]! + b[at + 5]!)
          + a6 * (b[at - 6]! + b[at + 6]!) + a7 * (b[at - 7]! + b[at + 7]!)
          + a8 * (b[at - 8]! + b[at + 8]!) + a9 * (b[at - 9]! + b[at + 9]!)
          + a10 * (b[at - 10]! + b[at + 10]!) + a11 * (b[at - 11]! + b[at + 11]!)
          + a12 * (b[at - 12]! + b[at + 12]!) + a13 * (b[at - 13]! + b[at + 13]!)
          + a14 * (b[at - 14]! + b[at + 14]!) + a15 * (b[at - 15]! + b[at + 15]!);
      } else if (folded && phase === halfPhase) {
        acc = h0 * (b[at]! + b[at + 1]!) + h1 * (b[at - 1]! + b[at + 2]!)
          + h2 * (b[at - 2]! + b[at + 3]!) + h3 * (b[at - 3]! + b[at + 4]!)
          + h4 * (b[at - 4]! + b[at + 5]!) + h5 * (b[at - 5]! + b[at + 6]!)
          + h6 * (b[at - 6]! + b[at + 7]!) + h7 * (b[at - 7]! + b[at + 8]!)
          + h8 * (b[at - 8]! + b[at + 9]!) + h9 * (b[at - 9]! + b[at + 10]!)
          + h10 * (b[at - 10]! + b[at + 11]!) + h11 * (b[at - 11]! + b[at + 12]!)
          + h12 * (b[at - 12]! + b[at + 13]!) + h13 * (b[at - 13]! + b[at + 14]!)
          + h14 * (b[at - 14]! + b[at + 15]!) + h15 * (b[at - 15]! + b[at + 16]!);
      } else {
        acc = 0;
        const base = at - H + 1;
        const wb = phase * 2 * H;
        for (let j = 0; j < 2 * H; j++) acc += b[base + j]! * w[wb + j]!;
      }
      out[i] = acc > 32767 ? 32767 : acc < -32768 ? -32768 : Math.round(acc);
      c += cStep;
      phase += pStep;
      if (phase >= L) {
        phase -= L;
        c++;
      }
    }
    this.outCount += n;
    return out;
  }

  push(pcm: Int16Array): Int16Array {
    if (this.fromHz === this.toHz) return pcm;
    this.inCount += pcm.length;
    this.append(pcm, 0);
    return this.run(Number.POSITIVE_INFINITY);
  }

  /** The rest of the output (the input's last samples, with silence after them). */
  flush(): Int16Array {
    if (this.fromHz === this.toHz) return new Int16Array(0);
    const total = Math.round((this.inCount * this.toHz) / this.fromHz);
    this.append(null, StreamResampler.HALF * 2 + Math.ceil(this.M / this.L) + 2);
    return this.run(total);
  }
}
