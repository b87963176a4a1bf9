// Shared by the tts*/live*/tracing* tests: decode what the API returned back to text.
import { decodeAudio as decodeContainer, pcmBytesToInt16 } from '../../src/audio/index.ts';
import { decodeAudio as decodeSpeech } from '../../native/engines/synthetic/modem.ts';

export const MAGIC: Record<string, (b: Buffer) => boolean> = {
  wav: (b) => b.subarray(0, 4).toString('latin1') === 'RIFF' && b.subarray(8, 12).toString('latin1') === 'WAVE',
  mp3: (b) => b.subarray(0, 3).toString('latin1') === 'ID3' || (b[0] === 0xff && (b[1]! & 0xe0) === 0xe0),
  opus: (b) => b.subarray(0, 4).toString('latin1') === 'OggS' && b.subarray(28, 36).toString('latin1') === 'OpusHead',
  pcm: (b) => b.length > 0 && b.length % 2 === 0,
};

/** The container decoded to PCM (pcm: raw s16le at `rate`), then the synthetic speech decoded to its text. */
export async function heard(bytes: Uint8Array, format: string, rate = 44100): Promise<string | undefined> {
  const { pcm, sampleRateHz } = format === 'pcm' ? { pcm: pcmBytesToInt16(new Uint8Array(bytes)), sampleRateHz: rate } : await decodeContainer(bytes);
  return decodeSpeech(pcm, sampleRateHz)?.text;
}

export async function collect(stream: ReadableStream<Uint8Array> | AsyncIterable<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  for await (const p of stream as AsyncIterable<Uint8Array>) parts.push(p);
  return Buffer.concat(parts);
}

/** Polls `read` until it stays the same for `stableMs`; returns the settled value. */
export async function settle(read: () => number, stableMs = 400, stepMs = 50): Promise<number> {
  let last = read();
  let since = Date.now();
  for (;;) {
    await new Promise((r) => setTimeout(r, stepMs));
    const v = read();
    if (v !== last) {
      last = v;
      since = Date.now();
    } else if (Date.now() - since >= stableMs) return v;
  }
}

export async function until(cond: () => boolean, timeoutMs = 10_000): Promise<boolean> {
  const end = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}
