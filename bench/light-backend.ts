/**
 * A light inference backend for `bench/sessions.ts --light-backend`: the native backend's
 * service and gRPC server, with the two engine parts that cost CPU replaced, so that the load
 * leaves the machine's cores to the platform being measured.
 *
 * - Recognition: the bench's callers say one known phrase. This recognizer does not decode
 *   audio: it detects sound (any sample over the synthetic decoder's silence threshold) and
 *   sends the events the synthetic recognizer sends for that phrase, in the same order and at
 *   the same points of the stream (`speech_started` where sound starts, one `partial` per
 *   character as the sound goes on, `committed` when a burst ends, `speech_ended` 300 ms of
 *   silence later, at the burst's end).
 * - Synthesis: the synthetic engine, each distinct text synthesized once and served from memory
 *   after (the agent answers the same text every turn).
 *
 * The platform sees the same calls, messages and sizes as with the native backend (it offers
 * TranscribeStreams and SynthesizeStreams, credit included, as that is the service it runs);
 * only the backend's own CPU time shrinks. The bench starts it with `spawnNativeBackend({ entry })`: it
 * listens on BACKEND_ADDRESS and prints the native backend's ready line.
 *
 *   BENCH_PHRASE='What time is it?' BENCH_PHRASE_MS=1800 node --import tsx bench/light-backend.ts
 */
import { pathToFileURL } from 'node:url';
import { pino } from 'pino';
import { readNativeConfig } from '../native/config.ts';
import { startBackend, stopWhenAsked } from '../native/server.ts';
import type { StreamEvent } from '../native/engines/synthetic-engine.ts';
import type { SpeechEngine, SpeechPiece } from '../native/engines/types.ts';
import type { StreamRecognizer } from '../native/service.ts';

/** The synthetic decoder's silence threshold and utterance gap (native/engines/synthetic). */
const SILENCE = 64;
const UTTERANCE_GAP_MS = 300;

/** Events of the synthetic recognizer for `phrase`, driven by where there is sound. */
export function phraseRecognizer(sampleRateHz: number, phrase: string, phraseMs: number): StreamRecognizer {
  const gap = (UTTERANCE_GAP_MS * sampleRateHz) / 1000;
  const perChar = (phraseMs * sampleRateHz) / 1000 / phrase.length;
  const ms = (pos: number) => (pos / sampleRateHz) * 1000;
  let pos = 0;
  let inUtterance = false;
  let burstStart = -1; // in a burst while ≥ 0
  let lastSound = 0; // sample position just after the last loud sample
  let chars = 0;
  const endBurst = (events: StreamEvent[]) => {
    while (chars < phrase.length) events.push({ type: 'partial', text: phrase.slice(0, ++chars) });
    events.push({ type: 'committed', text: phrase, words: [] });
    burstStart = -1;
    chars = 0;
  };
  return {
    push(pcm: Int16Array): StreamEvent[] {
      const events: StreamEvent[] = [];
      let first = -1;
      let last = -1;
      for (let i = 0; i < pcm.length; i++) {
        if (pcm[i]! > SILENCE || pcm[i]! < -SILENCE) {
          if (first < 0) first = i;
          last = i;
        }
      }
      if (first >= 0) {
        if (!inUtterance) {
          inUtterance = true;
          events.push({ type: 'speech_started', atMs: ms(pos + first) });
        }
        if (burstStart < 0) burstStart = pos + first;
        lastSound = pos + last + 1;
        const due = Math.min(phrase.length - 1, Math.floor((lastSound - burstStart) / perChar));
        while (chars < due) events.push({ type: 'partial', text: phrase.slice(0, ++chars) });
      } else if (burstStart >= 0) {
        endBurst(events);
      }
      pos += pcm.length;
      if (inUtterance && burstStart < 0 && pos >= lastSound + gap) {
        events.push({ type: 'speech_ended', atMs: ms(lastSound) });
        inUtterance = false;
      }
      return events;
    },
    flush(): StreamEvent[] {
      const events: StreamEvent[] = [];
      if (burstStart >= 0) endBurst(events);
      if (inUtterance) events.push({ type: 'speech_ended', atMs: ms(lastSound) });
      inUtterance = false;
      return events;
    },
  };
}

/** `engine`, with each distinct request synthesized once. */
export function memoizedSpeech(engine: SpeechEngine): SpeechEngine {
  const done = new Map<string, Promise<SpeechPiece>>();
  return {
    name: engine.name,
    defaultSampleRateHz: engine.defaultSampleRateHz,
    languages: engine.languages,
    voices: engine.voices,
    sampleRatesHz: engine.sampleRatesHz,
    warm: engine.warm?.bind(engine),
    health: () => engine.health(),
    close: () => engine.close(),
    async synthesize(text, opts, signal) {
      const key = JSON.stringify([text, opts.language, opts.speed, opts.sampleRateHz, opts.voice]);
      let p = done.get(key);
      if (!p) {
        p = engine.synthesize(text, opts, new AbortController().signal);
        p.catch(() => done.delete(key));
        done.set(key, p);
      }
      signal.throwIfAborted();
      return p;
    },
  };
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const phrase = process.env.BENCH_PHRASE ?? '';
  const phraseMs = Number(process.env.BENCH_PHRASE_MS ?? 0);
  if (!phrase || !(phraseMs > 0)) throw new Error('BENCH_PHRASE and BENCH_PHRASE_MS are required');
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' }, pino.destination(2));
  const backend = await startBackend({
    address: process.env.BACKEND_ADDRESS ?? '127.0.0.1:0',
    engine: 'synthetic',
    pacing: 'fast',
    wrapSpeech: memoizedSpeech,
    streamRecognizer: (rate) => phraseRecognizer(rate, phrase, phraseMs),
    logger,
  });
  logger.info({ address: backend.address }, 'light bench backend listening');
  process.stdout.write(`${JSON.stringify({ ready: true, address: backend.address })}\n`);
  stopWhenAsked(backend, readNativeConfig().parentPipe);
}
