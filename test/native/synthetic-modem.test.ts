import t from 'tap';
import { createMp3Encoder } from 'wasm-media-encoders';
import decode from 'audio-decode';
import { Decoder, Encoder } from '@evan/opus';
import libsamplerate from '@alexanderolsen/libsamplerate-js';
import {
  StreamDecoder,
  decodeAudio,
  encodeText,
  type StreamEvent,
  type Timed,
} from '../../native/engines/synthetic/modem.ts';

// ---- helpers: deterministic random text, PCM conversions and codec round trips ----

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = Math.imul(a ^ (a >>> 15), 1 | a);
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x;
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

const ASCII = ['hello', 'world', 'the', 'quick', 'brown', 'fox', 'API', 'v2.1', '42', 'ok?', '(yes)', 'a-b_c', '"quoted"', '#tag', 'x=1;'];
const LATIN = ['café', 'naïve', 'Größe', 'déjà', 'vu', 'façade', 'señor', 'Ålborg', 'Łódź', 'œuvre', 'ça', 'über', 'ñandú'];
const CJK = ['你好', '世界', '今天', '天气', '很好', '日本語', 'テスト', '한국어', '漢字', '。', '、'];
const EMOJI = ['🎉', '🚀', '👍🏽', '😀', '❤️', '👩‍💻', '🇫🇷', '🙂'];

function sentence(r: () => number): string {
  const n = 1 + Math.floor(r() * 8);
  const parts: string[] = [];
  for (let i = 0; i < n; i++) {
    const pool = [ASCII, LATIN, CJK, EMOJI][Math.floor(r() * 4)];
    let w = pool[Math.floor(r() * pool.length)];
    if (r() < 0.25) w += pool === CJK ? CJK[Math.floor(r() * CJK.length)] : EMOJI[Math.floor(r() * EMOJI.length)];
    parts.push(w);
  }
  return parts.join(' ') + (r() < 0.5 ? '.' : '');
}

const r = rng(20261125);
const SENTENCES = Array.from({ length: 200 }, () => sentence(r));

function toFloat(pcm: Int16Array): Float32Array {
  const x = new Float32Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) x[i] = pcm[i] / 32768;
  return x;
}

function toInt16(x: Float32Array): Int16Array {
  const y = new Int16Array(x.length);
  for (let i = 0; i < x.length; i++) y[i] = Math.max(-32768, Math.min(32767, Math.round(x[i] * 32768)));
  return y;
}

function concat(parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

type Resampler = { simple(x: Float32Array): Float32Array; destroy(): void };
const resamplers = new Map<string, Promise<Resampler>>();
t.teardown(async () => {
  for (const r of resamplers.values()) (await r).destroy();
});

async function resample(x: Float32Array, fromHz: number, toHz: number): Promise<Float32Array> {
  const key = `${fromHz}:${toHz}`;
  let src = resamplers.get(key);
  if (!src) {
    const { create, ConverterType } = libsamplerate;
    src = create(1, fromHz, toHz, { converterType: ConverterType.SRC_SINC_FASTEST }) as Promise<Resampler>;
    resamplers.set(key, src);
  }
  return (await src).simple(x);
}

const mp3Encoder = createMp3Encoder();

async function mp3RoundTrip(pcm: Int16Array, sampleRateHz: number): Promise<{ pcm: Float32Array; sampleRateHz: number }> {
  const enc = await mp3Encoder;
  enc.configure({ sampleRate: sampleRateHz, channels: 1, bitrate: 64 });
  const body = enc.encode([toFloat(pcm)]).slice();
  const tail = enc.finalize().slice();
  const bytes = new Uint8Array(body.length + tail.length);
  bytes.set(body);
  bytes.set(tail, body.length);
  const audio = await decode(bytes);
  return { pcm: audio.channelData[0], sampleRateHz: audio.sampleRate };
}

function opusRoundTrip(pcm48k: Int16Array, bitrate: 'auto' | number): Int16Array {
  const enc = new Encoder({ channels: 1, sample_rate: 48000, application: 'audio' });
  enc.bitrate = bitrate;
  const dec = new Decoder({ channels: 1, sample_rate: 48000 });
  const frame = 960;
  const out: Int16Array[] = [];
  for (let i = 0; i < pcm48k.length; i += frame) {
    const f = new Int16Array(frame);
    f.set(pcm48k.subarray(i, Math.min(i + frame, pcm48k.length)));
    const d = dec.decode(enc.encode(f));
    out.push(new Int16Array(d.buffer.slice(d.byteOffset, d.byteOffset + d.byteLength)));
  }
  return concat(out);
}

/** Adds white noise at the given SNR relative to the signal's power over its active part. */
function withNoise(pcm: Int16Array, snrDb: number, seed: number): Int16Array {
  const g = rng(seed);
  let power = 0;
  for (const v of pcm) power += v * v;
  power /= pcm.length;
  const sigma = Math.sqrt(power / 10 ** (snrDb / 10));
  const out = new Int16Array(pcm.length);
  for (let i = 0; i < pcm.length; i++) {
    // Box-Muller: Gaussian white noise.
    const n = Math.sqrt(-2 * Math.log(1 - g())) * Math.cos(2 * Math.PI * g());
    out[i] = Math.max(-32768, Math.min(32767, Math.round(pcm[i] + sigma * n)));
  }
  return out;
}

function pad(pcm: Int16Array, before: number, after: number): Int16Array {
  const out = new Int16Array(before + pcm.length + after);
  out.set(pcm, before);
  return out;
}

/** Monotonic, non-overlapping, non-empty, within [0, durationMs]. */
function timelineOk(items: Timed[], durationMs: number): boolean {
  let prevEnd = 0;
  for (const it of items) {
    if (!(it.startMs >= prevEnd && it.endMs > it.startMs && it.endMs <= durationMs)) return false;
    prevEnd = it.endMs;
  }
  return true;
}

// ---- round trips ----

t.test('200 random sentences round-trip exactly at default settings', async (tt) => {
  const wrong: string[] = [];
  for (const text of SENTENCES) {
    const enc = encodeText(text);
    const dec = decodeAudio(enc.pcm, enc.sampleRateHz);
    if (dec?.text !== text) wrong.push(`${JSON.stringify(text)} → ${JSON.stringify(dec?.text)}`);
  }
  tt.same(wrong, [], 'every sentence decodes to itself');
  tt.ok(SENTENCES.some((s) => /[\u4e00-\u9fff]/u.test(s)) && SENTENCES.some((s) => /\p{Extended_Pictographic}/u.test(s)));
});

t.test('default pace is roughly speech pace and every tone lies in the telephone band', async (tt) => {
  const text = 'This is an ordinary sentence of plain ASCII text.';
  const enc = encodeText(text);
  const cps = text.length / ((enc.chars.at(-1)!.endMs - enc.chars[0].startMs) / 1000);
  tt.ok(cps >= 12 && cps <= 20, `${cps.toFixed(1)} characters per second`);
  const fast = encodeText(text, { speed: 2 });
  tt.ok(fast.durationMs < enc.durationMs, 'speed 2 is faster');
  let peak = 0;
  for (const v of enc.pcm) peak = Math.max(peak, Math.abs(v));
  tt.ok(peak > 0.4 * 32768 && peak <= 0.5 * 32768 + 1, 'peak about half of full scale');
  // Energy outside 300-3400 Hz, measured with a DFT over the whole burst, is negligible.
  const x = toFloat(enc.pcm);
  const sr = enc.sampleRateHz;
  let inBand = 0;
  let outBand = 0;
  for (let f = 100; f < 6000; f += 25) {
    let re = 0;
    let im = 0;
    const w = (2 * Math.PI * f) / sr;
    for (let n = 0; n < x.length; n++) {
      re += x[n] * Math.cos(w * n);
      im -= x[n] * Math.sin(w * n);
    }
    const p = re * re + im * im;
    if (f >= 300 && f <= 3400) inBand += p;
    else outBand += p;
  }
  tt.ok(outBand / inBand < 1e-3, `out-of-band share ${(outBand / inBand).toExponential(1)}`);
});

t.test('encoded at every supported rate, decoded at another after resampling', async (tt) => {
  const rates = [8000, 16000, 22050, 24000, 44100, 48000];
  for (const [i, from] of rates.entries()) {
    const to = rates[(i + 2) % rates.length];
    const text = SENTENCES[i];
    const enc = encodeText(text, { sampleRateHz: from });
    tt.equal(decodeAudio(enc.pcm, from)?.text, text, `${from} Hz as is`);
    const y = await resample(toFloat(enc.pcm), from, to);
    tt.equal(decodeAudio(y, to)?.text, text, `${from} Hz → ${to} Hz`);
  }
});

t.test('speeds from 0.5 to 2 round-trip, also through MP3', async (tt) => {
  for (const speed of [0.5, 1.5, 2]) {
    const text = SENTENCES[10 + speed * 2];
    const enc = encodeText(text, { speed, sampleRateHz: 44100 });
    tt.equal(decodeAudio(enc.pcm, 44100)?.text, text, `speed ${speed}`);
    const mp3 = await mp3RoundTrip(enc.pcm, 44100);
    tt.equal(decodeAudio(mp3.pcm, mp3.sampleRateHz)?.text, text, `speed ${speed} through MP3`);
  }
});

const SUBSET = SENTENCES.slice(0, 30);

t.test('MP3 64 kbit/s (44.1 and 24 kHz) with leading silence', async (tt) => {
  const wrong: string[] = [];
  for (const [i, text] of SUBSET.entries()) {
    const sampleRateHz = i % 2 === 0 ? 44100 : 24000;
    const enc = encodeText(text, { sampleRateHz });
    const mp3 = await mp3RoundTrip(pad(enc.pcm, 317 * i, 2000), sampleRateHz);
    const dec = decodeAudio(mp3.pcm, mp3.sampleRateHz);
    if (dec?.text !== text) wrong.push(`${sampleRateHz}: ${JSON.stringify(text)} → ${JSON.stringify(dec?.text)}`);
  }
  tt.same(wrong, []);
});

for (const bitrate of ['auto', 24000] as const) {
  t.test(`Opus at ${bitrate} bit/s (48 kHz)`, async (tt) => {
    const wrong: string[] = [];
    for (const [i, text] of SUBSET.entries()) {
      const enc = encodeText(text, { sampleRateHz: 48000 });
      const dec = decodeAudio(opusRoundTrip(pad(enc.pcm, 131 * i, 4800), bitrate), 48000);
      if (dec?.text !== text) wrong.push(`${JSON.stringify(text)} → ${JSON.stringify(dec?.text)}`);
    }
    tt.same(wrong, []);
  });
}

t.test('8 kHz telephone audio resampled from 24 kHz', async (tt) => {
  const wrong: string[] = [];
  for (const text of SUBSET) {
    const enc = encodeText(text);
    const y = await resample(toFloat(enc.pcm), 24000, 8000);
    const dec = decodeAudio(toInt16(y), 8000);
    if (dec?.text !== text) wrong.push(`${JSON.stringify(text)} → ${JSON.stringify(dec?.text)}`);
  }
  tt.same(wrong, []);
});

t.test('white noise at 20 dB SNR', async (tt) => {
  const wrong: string[] = [];
  for (const [i, text] of SUBSET.entries()) {
    const enc = encodeText(text);
    const dec = decodeAudio(withNoise(pad(enc.pcm, 2400, 2400), 20, i + 1), 24000);
    if (dec?.text !== text) wrong.push(`${JSON.stringify(text)} → ${JSON.stringify(dec?.text)}`);
  }
  tt.same(wrong, []);
});

/** `pcm` with `ms` of silence inserted every `everyMs`, the first at `from` ms. */
function withGaps(pcm: Int16Array, rateHz: number, everyMs: number, ms: number, from: number): Int16Array {
  const parts: Int16Array[] = [];
  const every = (everyMs * rateHz) / 1000;
  let at = 0;
  for (let cut = (from * rateHz) / 1000; cut < pcm.length; cut += every) {
    parts.push(pcm.subarray(at, cut), new Int16Array((ms * rateHz) / 1000));
    at = cut;
  }
  parts.push(pcm.subarray(at));
  return concat(parts);
}

t.test('silence inserted inside speech (a capture device that ran late) loses no character', async (tt) => {
  const text = 'What is the capital of France?';
  const enc = encodeText(text);
  // The first 160 ms are the preamble, 160–240 ms the header, then the data.
  for (const [everyMs, ms] of [[150, 10], [300, 10], [500, 20], [700, 30], [900, 50]] as const) {
    for (const from of [260, 413, 170, 215]) {
      const dec = decodeAudio(pad(withGaps(enc.pcm, 24000, everyMs, ms, from), 2400, 2400), 24000);
      tt.equal(dec?.text, text, `${ms} ms of silence inserted every ${everyMs} ms from ${from} ms`);
    }
  }
  // In the preamble, 10 ms gaps (a late capture buffer) are read through; longer ones may not be.
  for (const from of [5, 47, 93, 131]) {
    const dec = decodeAudio(pad(withGaps(enc.pcm, 24000, 300, 10, from), 2400, 2400), 24000);
    tt.equal(dec?.text, text, `10 ms of silence inserted every 300 ms from ${from} ms`);
  }
  // Through the stream decoder in 40 ms pieces, as the recognizer receives it.
  const d = new StreamDecoder(24000);
  const audio = pad(withGaps(enc.pcm, 24000, 250, 10, 300), 2400, 9600);
  const events: StreamEvent[] = [];
  for (let i = 0; i < audio.length; i += 960) events.push(...d.push(audio.subarray(i, i + 960)));
  events.push(...d.flush());
  tt.same(events.filter((e) => e.type === 'committed').map((e) => (e as { text: string }).text).join(''), text, 'streamed');
  // Through MP3 the inserted silence is no longer exact zeros; below the codec's noise floor.
  const mp3 = await mp3RoundTrip(pad(withGaps(enc.pcm, 24000, 300, 10, 300), 2400, 2400), 24000);
  tt.equal(decodeAudio(mp3.pcm, mp3.sampleRateHz)?.text, text, 'through MP3');
});

t.test('concatenated bursts decode to the concatenated text', async (tt) => {
  const a = encodeText('first part, ');
  const b = encodeText('ça continue 世界 🎉');
  const c = encodeText('end');
  tt.equal(decodeAudio(concat([a.pcm, b.pcm, c.pcm]), 24000)?.text, 'first part, ça continue 世界 🎉end', 'back to back');
  const gap = new Int16Array(12000);
  const spaced = concat([gap, a.pcm, gap, b.pcm, new Int16Array(37), c.pcm, gap]);
  tt.equal(decodeAudio(spaced, 24000)?.text, 'first part, ça continue 世界 🎉end', 'with silence between');
  const mp3 = await mp3RoundTrip(spaced, 24000);
  tt.equal(decodeAudio(mp3.pcm, mp3.sampleRateHz)?.text, 'first part, ça continue 世界 🎉end', 'with silence, through MP3');
});

t.test('empty text is a short burst that decodes to empty text', async (tt) => {
  const enc = encodeText('');
  tt.ok(enc.pcm.length > 0);
  tt.same(enc.words, []);
  tt.same(enc.chars, []);
  tt.same(decodeAudio(enc.pcm, 24000), { text: '', durationMs: enc.durationMs, words: [] });
});

// ---- timings ----

t.test('word and character timings', async (tt) => {
  for (const text of SENTENCES.slice(0, 40)) {
    const enc = encodeText(text);
    tt.ok(timelineOk(enc.chars, enc.durationMs), 'chars: monotonic, non-overlapping, within the audio');
    tt.ok(timelineOk(enc.words, enc.durationMs), 'words: monotonic, non-overlapping, within the audio');
    tt.equal(enc.chars.map((c) => c.text).join(''), text, 'chars are the code points of the text');
    tt.same(enc.chars.length, [...text].length);
    tt.same(
      enc.words.map((w) => w.text),
      text.split(/\s+/u).filter(Boolean),
    );
    for (const w of enc.words) {
      const from = Math.round((w.startMs * enc.sampleRateHz) / 1000);
      const to = Math.round((w.endMs * enc.sampleRateHz) / 1000);
      tt.equal(decodeAudio(enc.pcm.subarray(from, to), enc.sampleRateHz)?.text, w.text, `region of ${w.text}`);
    }
  }
});

t.test('decoded word timings match the encoded ones, shifted by the leading audio', async (tt) => {
  const text = 'timing check with 世界 and 🎉 too';
  const enc = encodeText(text);
  const lead = 5555;
  const dec = decodeAudio(pad(enc.pcm, lead, 4000), 24000)!;
  tt.equal(dec.text, text);
  const shift = (lead / 24000) * 1000;
  const err = Math.max(
    ...dec.words.map((w, i) => Math.max(Math.abs(w.startMs - shift - enc.words[i].startMs), Math.abs(w.endMs - shift - enc.words[i].endMs))),
  );
  tt.ok(err < 1, `largest word boundary error ${err.toFixed(3)} ms`);
  tt.ok(timelineOk(dec.words, dec.durationMs), 'decoded words: monotonic, non-overlapping, within the audio');
  tt.equal(dec.words.length, enc.words.length);
});

// ---- not speech ----

t.test('decodeAudio returns null when there is no synthetic speech', async (tt) => {
  const sr = 24000;
  tt.equal(decodeAudio(new Int16Array(sr), sr), null, 'silence');
  tt.equal(decodeAudio(new Int16Array(0), sr), null, 'nothing');
  const g = rng(7);
  const noise = new Float32Array(2 * sr).map(() => (g() * 2 - 1) * 0.5);
  tt.equal(decodeAudio(noise, sr), null, 'white noise');
  for (const f of [440, 1700, 1900, 3100]) {
    const sine = new Float32Array(2 * sr).map((_, n) => 0.5 * Math.sin((2 * Math.PI * f * n) / sr));
    tt.equal(decodeAudio(sine, sr), null, `a ${f} Hz sine`);
  }
});

t.test('decodeAudio returns null for real speech, whole or cut into word-sized pieces', async (tt) => {
  // espeak-ng ships no types; it is an Emscripten module with its file system exposed.
  const espeakModule: string = 'espeak-ng';
  const { default: ESpeakNg } = (await import(espeakModule)) as {
    default: (o: { arguments: string[] }) => Promise<{ FS: { readFile(path: string): Uint8Array } }>;
  };
  const espeak = await ESpeakNg({
    arguments: ['-w', 'speech.wav', '-v', 'en-us', 'Hello there, this is real speech. It should not decode as tones, one two three.'],
  });
  const wav: Uint8Array = espeak.FS.readFile('speech.wav');
  const view = new DataView(wav.buffer, wav.byteOffset, wav.byteLength);
  const sr = view.getUint32(24, true);
  const pcm = new Int16Array(wav.slice(44, 44 + (wav.length - 44 - (wav.length % 2))).buffer);
  tt.ok(pcm.length > sr, 'espeak produced speech');
  tt.equal(decodeAudio(pcm, sr), null, 'whole utterance');
  const g = rng(5);
  const found: string[] = [];
  for (let i = 0; i < 100; i++) {
    const len = Math.round(sr * (0.05 + g() * 0.6));
    const at = Math.floor(g() * (pcm.length - len));
    const d = decodeAudio(pcm.subarray(at, at + len), sr);
    if (d) found.push(d.text);
  }
  tt.same(found, [], 'pieces');
});

// ---- streaming ----

function feed(dec: StreamDecoder, pcm: Int16Array, seed: number): StreamEvent[] {
  const g = rng(seed);
  const events: StreamEvent[] = [];
  for (let i = 0; i < pcm.length; ) {
    const n = 1 + Math.floor(g() * 2000);
    events.push(...dec.push(pcm.subarray(i, i + n)));
    i += n;
  }
  return events;
}

function summary(events: StreamEvent[]): string[] {
  return events.filter((e) => e.type !== 'partial').map((e) => (e.type === 'committed' ? `committed:${e.text}` : e.type));
}

t.test('streaming: events in order for pieces of any size', async (tt) => {
  const sr = 24000;
  const one = encodeText('hello 世界', { sampleRateHz: sr });
  const two = encodeText(' again 🎉', { sampleRateHz: sr });
  const three = encodeText('next turn', { sampleRateHz: sr });
  const audio = concat([
    new Int16Array(3000),
    one.pcm,
    new Int16Array(sr / 10), // 100 ms: the same utterance
    two.pcm,
    new Int16Array(sr), // 1 s: the utterance ends
    three.pcm,
    new Int16Array(sr / 2),
  ]);
  const dec = new StreamDecoder(sr);
  const events = [...feed(dec, audio, 3), ...dec.flush()];
  tt.same(summary(events), [
    'speech_started',
    'committed:hello 世界',
    'committed: again 🎉',
    'speech_ended',
    'speech_started',
    'committed:next turn',
    'speech_ended',
  ]);
  const partials = events.filter((e) => e.type === 'partial').map((e) => e.text);
  tt.ok(partials.includes('hello 世'), 'a partial per decoded character');
  tt.ok(partials.includes('hello 世界 again'), 'partials carry the utterance so far');
  tt.equal(partials.at(-1), 'next turn');
  const started = events.find((e) => e.type === 'speech_started');
  tt.ok(started && Math.abs(started.atMs - 125) < 1, 'speech_started at the preamble');
  const ended = events.find((e) => e.type === 'speech_ended');
  const end1 = ((3000 + one.pcm.length + sr / 10 + two.pcm.length) / sr) * 1000;
  tt.ok(ended && Math.abs(ended.atMs - end1) < 1, 'speech_ended at the end of the last burst');
  const committed = events.find((e) => e.type === 'committed');
  tt.ok(committed && committed.type === 'committed');
  if (committed?.type === 'committed') {
    tt.same(
      committed.words.map((w) => w.text),
      ['hello', '世界'],
    );
    tt.ok(Math.abs(committed.words[0].startMs - (125 + one.words[0].startMs)) < 1, 'word times in stream time');
  }
});

t.test('streaming: speech_ended comes after ~300 ms of silence, without flush', async (tt) => {
  const sr = 16000;
  const enc = encodeText('short', { sampleRateHz: sr });
  const dec = new StreamDecoder(sr);
  const early = feed(dec, concat([enc.pcm, new Int16Array(sr / 5)]), 5);
  tt.same(summary(early), ['speech_started', 'committed:short'], 'not ended after 200 ms');
  const late = feed(dec, new Int16Array(sr / 5), 6);
  tt.same(summary(late), ['speech_ended'], 'ended after 400 ms');
  tt.same(dec.flush(), []);
});

t.test('streaming: flush in the middle of a burst commits what was decoded', async (tt) => {
  const enc = encodeText('cut short here');
  const dec = new StreamDecoder(24000);
  const cut = Math.round((enc.words[1].endMs * 24000) / 1000);
  const events = [...dec.push(enc.pcm.subarray(0, cut)), ...dec.flush()];
  tt.same(summary(events), ['speech_started', 'committed:cut short', 'speech_ended']);
});

t.test('streaming: through Opus, silence and noise give no events', async (tt) => {
  const enc = encodeText('over opus 你好', { sampleRateHz: 48000 });
  const audio = opusRoundTrip(pad(enc.pcm, 9000, 24000), 24000);
  const dec = new StreamDecoder(48000);
  tt.same(summary([...feed(dec, audio, 9), ...dec.flush()]), ['speech_started', 'committed:over opus 你好', 'speech_ended']);
  const quiet = new StreamDecoder(8000);
  const g = rng(11);
  const noise = new Int16Array(8000 * 3).map(() => Math.round((g() * 2 - 1) * 8000));
  tt.same([...feed(quiet, new Int16Array(8000), 1), ...feed(quiet, noise, 2), ...quiet.flush()], []);
});
