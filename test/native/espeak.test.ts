// Acceptance: espeak speaks each of the seven languages as valid audio of plausible
// length, with word alignment, and honours speed.
import t from 'tap';
import decode from 'audio-decode';
import { startBackend } from '../../native/server.ts';
import { wavHeader } from '../../native/audio.ts';
import { createInferenceClient, type InferenceClient } from '../../src/inference/index.ts';

const SENTENCES: Record<string, string> = {
  en: 'The weather is lovely today.',
  ja: 'こんにちは、元気ですか。',
  zh: '今天天气很好。',
  ko: '오늘 날씨가 좋네요.',
  es: 'Hoy hace muy buen tiempo.',
  fr: 'Il fait très beau aujourd’hui.',
  de: 'Das Wetter ist heute schön.',
};

async function speak(client: InferenceClient, text: string, language: string, speed = 1) {
  const parts: Uint8Array[] = [];
  const words: string[] = [];
  let rate = 0;
  for await (const c of client.synthesize({ text, language, model: 's1', prosody: { speed } })) {
    parts.push(c.audio);
    rate = c.sampleRateHz;
    words.push(...(c.alignment?.segments ?? []).map((s) => s.text));
  }
  const pcm = Buffer.concat(parts);
  const wav = Buffer.concat([wavHeader(rate, pcm.length), pcm]);
  return { wav, rate, words, durationMs: (pcm.length / 2 / rate) * 1000 };
}

t.test('espeak speaks the seven languages', async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'espeak' });
  const client = createInferenceClient({ nativeAddress: backend.address, backends: '' });
  t.teardown(async () => {
    await client.close();
    await backend.close();
  });
  for (const [lang, text] of Object.entries(SENTENCES)) {
    const r = await speak(client, text, lang);
    const audio = await decode(r.wav);
    const samples = audio.channelData[0];
    let peak = 0;
    for (const v of samples) peak = Math.max(peak, Math.abs(v));
    const seconds = samples.length / audio.sampleRate;
    t.equal(audio.sampleRate, 22050, `${lang}: decodes as 22.05 kHz audio`);
    t.ok(seconds > 0.8 && seconds < 12, `${lang}: plausible length (${seconds.toFixed(2)} s)`);
    t.ok(peak > 0.05, `${lang}: not silent`);
    t.ok(r.words.length > 0 && text.includes(r.words[0]), `${lang}: words aligned`);
  }
  const normal = await speak(client, SENTENCES.en, 'en', 1);
  const fast = await speak(client, SENTENCES.en, 'en', 2);
  t.ok(fast.durationMs < normal.durationMs * 0.8, 'speed 2 speaks faster');
  t.same(normal.words, ['The', 'weather', 'is', 'lovely', 'today.'], 'English words aligned one by one');
});
