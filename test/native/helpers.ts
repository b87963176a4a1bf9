// Helpers for the native backend's tests: codecs round trips and random text.
import { createMp3Encoder } from 'wasm-media-encoders';
import decode from 'audio-decode';
import { Decoder, Encoder } from '@evan/opus';

export function toFloat(pcm: Int16Array): Float32Array {
  const x = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) x[i] = pcm[i] / 32768;
  return x;
}

export function toInt16(x: Float32Array): Int16Array {
  const out = new Int16Array(x.length);
  for (let i = 0; i < x.length; i++) out[i] = Math.max(-32768, Math.min(32767, Math.round(x[i] * 32767)));
  return out;
}

export function int16Bytes(pcm: Int16Array): Uint8Array {
  return new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength);
}

export function bytesInt16(bytes: Uint8Array): Int16Array {
  const copy = bytes.slice();
  return new Int16Array(copy.buffer, 0, copy.byteLength >> 1);
}

/** MP3 at `kbps` with LAME, decoded back with audio-decode. */
let mp3Encoder: Awaited<ReturnType<typeof createMp3Encoder>> | null = null;
export async function mp3RoundTrip(pcm: Int16Array, sampleRateHz: number, kbps = 64): Promise<{ pcm: Int16Array; sampleRateHz: number; bytes: number }> {
  const enc = (mp3Encoder ??= await createMp3Encoder());
  enc.configure({ sampleRate: sampleRateHz, channels: 1, bitrate: kbps as 64 });
  const body = enc.encode([toFloat(pcm)]).slice();
  const tail = enc.finalize().slice();
  const bytes = new Uint8Array(body.length + tail.length);
  bytes.set(body);
  bytes.set(tail, body.length);
  const audio = await decode(bytes);
  return { pcm: toInt16(audio.channelData[0]), sampleRateHz: audio.sampleRate, bytes: bytes.length };
}

/** Opus (automatic bitrate, 20 ms frames at 48 kHz) encoded and decoded with libopus. */
export function opusRoundTrip(pcm48k: Int16Array): Int16Array {
  const enc = new Encoder({ channels: 1, sample_rate: 48000, application: 'audio' });
  enc.bitrate = 'auto';
  const dec = new Decoder({ channels: 1, sample_rate: 48000 });
  const frame = 960;
  const out = new Int16Array(Math.ceil(pcm48k.length / frame) * frame);
  let at = 0;
  for (let i = 0; i < pcm48k.length; i += frame) {
    const f = new Int16Array(frame);
    f.set(pcm48k.subarray(i, Math.min(i + frame, pcm48k.length)));
    const d = dec.decode(enc.encode(f));
    const s = new Int16Array(d.buffer, d.byteOffset, d.byteLength >> 1);
    out.set(s, at);
    at += s.length;
  }
  return out.subarray(0, at);
}

/** A small deterministic PRNG (mulberry32). */
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ASCII = ['hello', 'world', 'voice', 'agent', 'quick', 'brown', 'fox', 'call', 'me', 'at', '5pm', 'order', '#42', 'ok?', 'yes!', 'data-driven', "it's", '(test)', 'a+b=c', 'path/to'];
const LATIN = ['café', 'naïve', 'Grüße', 'Köln', 'señor', 'año', 'élève', 'français', 'Øresund', 'Łódź', 'crème', 'brûlée', 'façade', 'Zürich', 'São', 'Paulo'];
const CJK = ['你好', '世界', 'こんにちは', 'ありがとう', '안녕하세요', '감사합니다', '東京', '北京', '音声', '合成', 'テスト', '한국어'];
const EMOJI = ['🎉', '😀', '👍🏽', '🚀', '❤️', '🇫🇷', '👩‍💻', '🍣'];

/** A random sentence mixing ASCII, accented Latin, CJK and emoji words. */
export function randomSentence(next: () => number): string {
  const pick = <T>(a: T[]) => a[Math.floor(next() * a.length)];
  const n = 2 + Math.floor(next() * 7);
  const words: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = next();
    words.push(r < 0.4 ? pick(ASCII) : r < 0.65 ? pick(LATIN) : r < 0.88 ? pick(CJK) : pick(EMOJI));
  }
  const end = pick(['.', '!', '?', '', '。']);
  const s = words.join(' ') + end;
  return s.charAt(0).toUpperCase() + s.slice(1);
}
