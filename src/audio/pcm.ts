/**
 * PCM helpers. PCM in this platform is mono, 16-bit signed, little-endian, carried as
 * `Int16Array`; the codecs that want floats get [-1, 1) `Float32Array`s.
 */

const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;

/** Int16 → float in [-1, 1). Writes into `out` when given (must be long enough). */
export function int16ToFloat32(pcm: Int16Array, out?: Float32Array): Float32Array {
  const dst = out ?? new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) dst[i] = pcm[i] / 32768;
  return dst;
}

/** Float → Int16 with rounding and clipping. Writes into `out` when given. */
export function float32ToInt16(samples: Float32Array, out?: Int16Array): Int16Array {
  const dst = out ?? new Int16Array(samples.length);
  for (let i = 0; i < samples.length; i++) {
    const v = Math.round(samples[i] * 32768);
    dst[i] = v > 32767 ? 32767 : v < -32768 ? -32768 : v;
  }
  return dst;
}

/**
 * Little-endian 16-bit bytes → samples. Contract: when the bytes sit at an even offset the
 * result is a *view* on the same memory (no copy; do not mutate the input afterwards);
 * at an odd offset (a subarray of a network buffer) they are copied. A trailing odd byte
 * is ignored: use `createPcmByteReader` for a stream whose chunks may split a sample.
 */
export function pcmBytesToInt16(bytes: Uint8Array): Int16Array {
  const n = bytes.length >> 1;
  if (LITTLE_ENDIAN && (bytes.byteOffset & 1) === 0) return new Int16Array(bytes.buffer, bytes.byteOffset, n);
  const out = new Int16Array(n);
  if (LITTLE_ENDIAN) {
    new Uint8Array(out.buffer).set(bytes.subarray(0, n * 2));
  } else {
    for (let i = 0; i < n; i++) out[i] = (bytes[2 * i] | (bytes[2 * i + 1] << 8)) << 16 >> 16;
  }
  return out;
}

/** Samples → little-endian bytes. A view on the same memory on little-endian hosts. */
export function int16ToPcmBytes(pcm: Int16Array): Uint8Array {
  if (LITTLE_ENDIAN) return new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength);
  const out = new Uint8Array(pcm.length * 2);
  for (let i = 0; i < pcm.length; i++) {
    out[2 * i] = pcm[i] & 0xff;
    out[2 * i + 1] = (pcm[i] >> 8) & 0xff;
  }
  return out;
}

/** Streaming byte → sample conversion that carries an odd byte over to the next chunk. */
export function createPcmByteReader(): { push(bytes: Uint8Array): Int16Array } {
  let carry = -1;
  return {
    push(bytes) {
      if (carry < 0) {
        if ((bytes.length & 1) === 1) carry = bytes[bytes.length - 1];
        return pcmBytesToInt16(bytes);
      }
      const joined = new Uint8Array(bytes.length + 1);
      joined[0] = carry;
      joined.set(bytes, 1);
      carry = (joined.length & 1) === 1 ? joined[joined.length - 1] : -1;
      return pcmBytesToInt16(joined);
    },
  };
}

/** Number of samples in `frameMs` at `sampleRateHz` (rounded; at least 1). */
export function frameSamples(frameMs: number, sampleRateHz: number): number {
  return Math.max(1, Math.round((frameMs * sampleRateHz) / 1000));
}

/**
 * Splits a buffer into `frameMs` frames for pacing. Frames are views (no copy); the last
 * one may be shorter.
 */
export function frames(pcm: Int16Array, frameMs: number, sampleRateHz: number): Int16Array[] {
  const size = frameSamples(frameMs, sampleRateHz);
  const out: Int16Array[] = [];
  for (let i = 0; i < pcm.length; i += size) out.push(pcm.subarray(i, Math.min(pcm.length, i + size)));
  return out;
}

/**
 * Streaming framer: `push` returns the whole frames now available (copies, safe to keep),
 * holding back a partial frame; `flush` returns that remainder (possibly empty).
 */
export function createFramer(frameMs: number, sampleRateHz: number): { push(pcm: Int16Array): Int16Array[]; flush(): Int16Array } {
  const size = frameSamples(frameMs, sampleRateHz);
  let pending = new Int16Array(size);
  let fill = 0;
  return {
    push(pcm) {
      const out: Int16Array[] = [];
      let i = 0;
      while (i < pcm.length) {
        const take = Math.min(size - fill, pcm.length - i);
        pending.set(pcm.subarray(i, i + take), fill);
        fill += take;
        i += take;
        if (fill === size) {
          out.push(pending);
          pending = new Int16Array(size);
          fill = 0;
        }
      }
      return out;
    },
    flush() {
      const rest = pending.slice(0, fill);
      fill = 0;
      return rest;
    },
  };
}
