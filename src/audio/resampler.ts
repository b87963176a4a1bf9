/**
 * Streaming sample-rate converter: a Kaiser-windowed sinc evaluated as a polyphase filter
 * bank, written here rather than taken from `@alexanderolsen/libsamplerate-js` because that
 * package (checked on Node 20): creates each converter asynchronously, reserves a separate
 * WASM memory of ~26 MB per converter (hundreds of concurrent streams would not fit),
 * cannot be told "end of input" (the filter tail is lost: 44.1→48 kHz of 1 s gave 47,979
 * samples, not 48,000) and ran at ~90× real time with its fastest sinc, slower than this.
 *
 * Design. For rates `fromHz → toHz` with L/M = toHz/fromHz in lowest terms, output sample
 * n sits at input time t = n·M/L. It is Σ x[j]·h(t − j) over the 2H input samples nearest
 * to t, where h(u) = c·sinc(c·u)·kaiser(u/H), c = min(1, toHz/fromHz)·ROLLOFF is the
 * cut-off in units of the input Nyquist (anti-aliasing when going down) and H = ⌈Z/c⌉
 * (Z zero crossings each side). The L fractional offsets p/L are tabulated once per rate
 * pair and shared by every stream (read only); each row is normalised to unit DC gain. Rate
 * pairs with more than MAX_PHASES offsets use the nearest of MAX_PHASES + 1 rows (timing
 * error under 1/8192 of an input sample). Output is time-aligned with the input (no delay):
 * the stream starts from zeros, waits for H samples of look-ahead, and `end()` pads zeros
 * so the total output length is exactly ⌈inputLength·toHz/fromHz⌉.
 */

const ZERO_CROSSINGS = 16;
const ROLLOFF = 0.92;
const KAISER_BETA = 8.6;
const MAX_PHASES = 4096;

interface Kernel {
  /** Input/output ratio in lowest terms: output n is at input n·M/L. */
  L: number;
  M: number;
  /** Half-width in input samples; each row has 2H taps. */
  H: number;
  /** Rows of the table (P + 1 rows when quantised, L rows when exact). */
  P: number;
  exact: boolean;
  table: Float32Array;
}

const kernels = new Map<string, Kernel>();

function gcd(a: number, b: number): number {
  while (b) [a, b] = [b, a % b];
  return a;
}

/** Zeroth-order modified Bessel function of the first kind (series). */
function besselI0(x: number): number {
  let sum = 1;
  let term = 1;
  const q = (x * x) / 4;
  for (let k = 1; k < 50; k++) {
    term *= q / (k * k);
    sum += term;
    if (term < sum * 1e-12) break;
  }
  return sum;
}

function kernelFor(fromHz: number, toHz: number): Kernel {
  const key = `${fromHz}:${toHz}`;
  const hit = kernels.get(key);
  if (hit) return hit;
  const g = gcd(fromHz, toHz);
  const L = toHz / g;
  const M = fromHz / g;
  const c = Math.min(1, toHz / fromHz) * ROLLOFF;
  const H = Math.ceil(ZERO_CROSSINGS / c);
  const exact = L <= MAX_PHASES;
  const P = exact ? L : MAX_PHASES;
  const rows = exact ? L : MAX_PHASES + 1;
  const taps = 2 * H;
  const table = new Float32Array(rows * taps);
  const i0Beta = besselI0(KAISER_BETA);
  for (let r = 0; r < rows; r++) {
    const frac = r / P;
    let sum = 0;
    for (let k = 0; k < taps; k++) {
      // Tap k multiplies input sample j = i − H + 1 + k, at distance u = t − j from t = i + frac.
      const u = H - 1 - k + frac;
      const a = u / H;
      const w = Math.abs(a) >= 1 ? 0 : besselI0(KAISER_BETA * Math.sqrt(1 - a * a)) / i0Beta;
      const x = Math.PI * c * u;
      const s = x === 0 ? c : (c * Math.sin(x)) / x;
      table[r * taps + k] = s * w;
      sum += s * w;
    }
    for (let k = 0; k < taps; k++) table[r * taps + k] /= sum;
  }
  const kernel: Kernel = { L, M, H, P, exact, table };
  if (kernels.size > 64) kernels.clear();
  kernels.set(key, kernel);
  return kernel;
}

/** A streaming converter. `push` and `end` return new arrays (possibly empty). */
export interface Resampler {
  readonly fromHz: number;
  readonly toHz: number;
  push(pcm: Int16Array): Int16Array;
  /** Flushes the filter tail. The resampler must not be used afterwards. */
  end(): Int16Array;
}

/**
 * Creates a streaming resampler (synchronous; tables are cached per rate pair). When the
 * rates are equal it passes samples through (copies, so the caller may reuse its buffer).
 */
export function createResampler(fromHz: number, toHz: number): Resampler {
  if (!Number.isInteger(fromHz) || !Number.isInteger(toHz) || fromHz <= 0 || toHz <= 0) {
    throw new RangeError(`sample rates must be positive integers (got ${fromHz} → ${toHz})`);
  }
  if (fromHz === toHz) {
    return { fromHz, toHz, push: (pcm) => pcm.slice(), end: () => new Int16Array(0) };
  }
  const { L, M, H, P, exact, table } = kernelFor(fromHz, toHz);
  const taps = 2 * H;
  // History: buf[k] holds input sample (bufStart + k). It starts with H zeros before sample 0.
  let buf = new Float32Array(Math.max(4096, 4 * taps));
  let bufLen = H;
  let bufStart = -H;
  let inputCount = 0;
  let outputCount = 0;
  // Position of the next output: input index i and phase p (t = i + p/L).
  let i = 0;
  let p = 0;
  let ended = false;

  function append(pcm: Int16Array): void {
    if (bufLen + pcm.length > buf.length) {
      const next = new Float32Array(Math.max(buf.length * 2, bufLen + pcm.length));
      next.set(buf.subarray(0, bufLen));
      buf = next;
    }
    for (let k = 0; k < pcm.length; k++) buf[bufLen + k] = pcm[k] / 32768;
    bufLen += pcm.length;
    inputCount += pcm.length;
  }

  /** Produces outputs whose look-ahead is buffered, at most `limit` of them. */
  function produce(limit: number): Int16Array {
    const last = bufStart + bufLen - 1;
    // Output count: positions with i + H <= last.
    let n = 0;
    if (i + H <= last) {
      // Outputs while (i + H <= last): i advances by (p + M)/L per output.
      const span = last - H - i; // how far i may still advance
      n = Math.floor((span * L + (L - 1 - p)) / M) + 1;
      // ↑ number of outputs m ≥ 0 with i + floor((p + m·M)/L) ≤ last − H
    }
    if (n > limit) n = limit;
    const out = new Int16Array(n);
    // Locals for the hot loop (closure variables are reloaded on every access).
    const x = buf;
    const h = table;
    let ii = i;
    let pp = p;
    const first = 1 - H - bufStart;
    for (let m = 0; m < n; m++) {
      const row = exact ? pp : Math.round((pp * P) / L);
      const base = ii + first;
      const off = row * taps;
      let acc = 0;
      for (let k = 0; k < taps; k++) acc += x[base + k] * h[off + k];
      const v = Math.round(acc * 32768);
      out[m] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
      pp += M;
      if (pp >= L) {
        ii += Math.floor(pp / L);
        pp %= L;
      }
    }
    i = ii;
    p = pp;
    outputCount += n;
    // Drop history that no future output needs (keep from i − H + 1).
    const keepFrom = i - H + 1 - bufStart;
    if (keepFrom > 0) {
      buf.copyWithin(0, keepFrom, bufLen);
      bufLen -= keepFrom;
      bufStart += keepFrom;
    }
    return out;
  }

  return {
    fromHz,
    toHz,
    push(pcm) {
      if (ended) throw new Error('resampler ended');
      append(pcm);
      return produce(Number.MAX_SAFE_INTEGER);
    },
    end() {
      if (ended) return new Int16Array(0);
      ended = true;
      append(new Int16Array(H + 1));
      inputCount -= H + 1;
      const total = Math.ceil((inputCount * L) / M);
      return produce(total - outputCount);
    },
  };
}

/** Resamples a whole buffer (e.g. a decoded upload to 16 kHz for recognition). */
export function resampleAll(pcm: Int16Array, fromHz: number, toHz: number): Int16Array {
  if (fromHz === toHz) return pcm;
  const r = createResampler(fromHz, toHz);
  const a = r.push(pcm);
  const b = r.end();
  if (b.length === 0) return a;
  const out = new Int16Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
