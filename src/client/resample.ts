/**
 * A streaming resampler for the browser audio helpers: windowed-sinc interpolation at any
 * ratio, low-passed below the lower rate's Nyquist frequency so that downsampling a 48 kHz
 * microphone to 16 kHz does not fold its upper band into speech. Pure arithmetic, no
 * dependencies: it runs inside the AudioWorklet (`audio-worklet.ts`) and in Node tests.
 *
 * The kernel spans `HALF_TAPS` samples of the lower rate on either side; the output lags the
 * input by that half-width (0.5 ms at 16 kHz), which is the price of a symmetric filter.
 */

/** Zero crossings of the kernel on each side, counted at the lower of the two rates. */
const HALF_TAPS = 8;
/** Kernel table resolution: points per input sample. */
const TABLE_STEPS = 256;
/** The pass band ends this fraction of the way to the lower rate's Nyquist frequency. */
const CUTOFF = 0.92;

export class Resampler {
  /** Input samples per output sample. */
  private readonly step: number;
  /** Kernel half-width in input samples. */
  private readonly width: number;
  private readonly table: Float32Array;
  private buf: Float32Array;
  private len: number;
  /** Position of the next output sample, in input samples from `buf[0]`. */
  private pos: number;

  constructor(
    readonly inRateHz: number,
    readonly outRateHz: number,
  ) {
    if (!(inRateHz > 0 && outRateHz > 0)) throw new RangeError('sample rates must be positive');
    this.step = inRateHz / outRateHz;
    const scale = Math.min(1, outRateHz / inRateHz); // < 1 when downsampling
    this.width = HALF_TAPS / scale;
    const fc = 0.5 * scale * CUTOFF; // cycles per input sample
    const n = Math.ceil(this.width * TABLE_STEPS) + 1;
    this.table = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      const x = i / TABLE_STEPS;
      const sinc = x === 0 ? 1 : Math.sin(2 * Math.PI * fc * x) / (2 * Math.PI * fc * x);
      const hann = x >= this.width ? 0 : 0.5 * (1 + Math.cos((Math.PI * x) / this.width));
      this.table[i] = sinc * hann;
    }
    // Silence before the first sample, so the first output is centred on input sample 0.
    const lead = Math.ceil(this.width);
    this.buf = new Float32Array(lead + 4096);
    this.len = lead;
    this.pos = lead;
  }

  /** Feeds `input` (floats, ±1); returns the output samples it completes. */
  process(input: Float32Array): Float32Array {
    this.append(input);
    const w = this.width;
    const count = Math.max(0, Math.floor((this.len - 1 - w - this.pos) / this.step) + 1);
    const out = new Float32Array(count);
    const { buf, table } = this;
    for (let o = 0; o < count; o++) {
      const p = this.pos;
      const lo = Math.ceil(p - w);
      const hi = Math.floor(p + w);
      let acc = 0;
      let sum = 0;
      for (let k = lo; k <= hi; k++) {
        const d = k > p ? k - p : p - k;
        const c = table[Math.round(d * TABLE_STEPS)];
        acc += buf[k] * c;
        sum += c;
      }
      out[o] = sum > 0 ? acc / sum : 0;
      this.pos += this.step;
    }
    // Keep only what later outputs still reach.
    const drop = Math.floor(this.pos - w) - 1;
    if (drop > 0) {
      buf.copyWithin(0, drop, this.len);
      this.len -= drop;
      this.pos -= drop;
    }
    return out;
  }

  private append(input: Float32Array): void {
    if (this.len + input.length > this.buf.length) {
      const bigger = new Float32Array(Math.max(this.buf.length * 2, this.len + input.length));
      bigger.set(this.buf.subarray(0, this.len));
      this.buf = bigger;
    }
    this.buf.set(input, this.len);
    this.len += input.length;
  }
}

/** Float samples (±1) to 16-bit PCM, clipped. */
export function floatToInt16(x: Float32Array): Int16Array {
  const out = new Int16Array(x.length);
  for (let i = 0; i < x.length; i++) {
    const s = x[i] < -1 ? -1 : x[i] > 1 ? 1 : x[i];
    out[i] = s < 0 ? Math.round(s * 32768) : Math.round(s * 32767);
  }
  return out;
}

/** 16-bit PCM to float samples (±1). */
export function int16ToFloat(x: Int16Array): Float32Array {
  const out = new Float32Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = x[i] / 32768;
  return out;
}
