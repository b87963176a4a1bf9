/**
 * Platform-added turn latency measured against the backend's own clock (bench/sessions.ts).
 *
 * The platform's own figure (`platform_ms` of each turn) takes the backend's parts as the
 * platform sees them: a response that waits in the platform's socket while its event loop is
 * busy counts as the backend's time. Here each part is taken from the backend's timings of the
 * same call instead (`PARLEY_BACKEND_TIMINGS`, `CallTiming` in native/service.ts), on the same
 * machine's wall clock, so everything between them counts as the platform's: its reads and
 * writes, its event-loop waits, and the loopback transport (and the backend's own wait before
 * its handler runs, so this is an upper bound on the platform's share).
 *
 *   added = (first audio sent − arrival at the platform of the caller's end of speech)
 *         − recognition (end-of-speech audio arriving at the backend → its end-of-speech event)
 *         − eagerness wait
 *         − model (request arriving at the backend → the text delta that completed the first sentence)
 *         − synthesis (first text arriving at the backend → its first audio)
 */
import { readFileSync } from 'node:fs';
import type { TurnTimeline } from '../actors/types.ts';
import type { CallTiming, LoopTiming } from '../native/service.ts';

/** Reads JSON-lines timing files; a missing file or a torn last line is skipped. */
export function readBackendTimings(files: string[]): CallTiming[] {
  return files.flatMap((f) => readLines(f)).filter((l): l is CallTiming => l.rpc !== 'loop');
}

/** The last event-loop delay each file reported (its process's, since it started); null if none. */
export function readBackendLoops(files: string[]): (LoopTiming | null)[] {
  return files.map((f) => readLines(f).filter((l): l is LoopTiming => l.rpc === 'loop').at(-1) ?? null);
}

function readLines(f: string): (CallTiming | LoopTiming)[] {
  const out: (CallTiming | LoopTiming)[] = [];
  let text = '';
  try {
    text = readFileSync(f, 'utf8');
  } catch {
    return out;
  }
  for (const line of text.split('\n')) {
    if (!line) continue;
    try {
      out.push(JSON.parse(line) as CallTiming | LoopTiming);
    } catch {
      // a line cut by the backend's exit
    }
  }
  return out;
}

/**
 * Where a turn's platform-added time went, hop by hop (ms; each a difference of two processes'
 * clock readings, so a hop can read −1):
 * `ingest` the end-of-speech audio, platform → recognizer; `recognized` the end-of-speech event,
 * recognizer → platform; `toModel` platform → model; `fromModel` the sentence's text, model →
 * platform; `toSynthesis` that text, platform → synthesis; `fromSynthesis` its first audio,
 * synthesis → platform and out to the client; `inPlatform` the platform's own steps between
 * them (event handled → model asked, less the eagerness wait; sentence → synthesis).
 */
export const HOPS = ['ingest', 'recognized', 'toModel', 'fromModel', 'toSynthesis', 'fromSynthesis', 'inPlatform'] as const;
export type Hop = (typeof HOPS)[number];

export interface BackendTimed {
  /** Platform-added ms of each spoken turn whose three backend parts were found. */
  values: number[];
  /** The same turns' time by hop (`values[i]` is the sum of `hops[h][i]`, at least 0). */
  hops: Record<Hop, number[]>;
  /** Spoken turns whose recognition, model or synthesis timing was not found. */
  unmatched: number;
}

/**
 * Matches each spoken turn to its backend calls by session (`x-request-id`) and time: the last
 * end-of-speech event sent before the platform handled it, the first Generate call that arrived
 * after the reply started, the first synthesis text that arrived after the platform sent it.
 * Wall-clock times are whole milliseconds on both sides, so each part is within ±1 ms.
 */
export function backendTimedPlatformMs(timelines: TurnTimeline[], timings: CallTiming[]): BackendTimed {
  const bySession = new Map<string, CallTiming[]>();
  for (const t of timings) {
    let list = bySession.get(t.requestId);
    if (!list) bySession.set(t.requestId, (list = []));
    list.push(t);
  }
  const values: number[] = [];
  const hops = Object.fromEntries(HOPS.map((h) => [h, [] as number[]])) as Record<Hop, number[]>;
  let unmatched = 0;
  for (const tl of timelines) {
    if (tl.speechEndedAt === null || tl.recognizedAt === null || tl.firstAudioAt === null || tl.firstTtsAt === null || tl.textEventsToSpeakable < 1) continue;
    const calls = bySession.get(tl.sessionId) ?? [];
    let rec: Extract<CallTiming, { rpc: 'transcribeStream' }> | null = null;
    let gen: Extract<CallTiming, { rpc: 'generate' }> | null = null;
    let syn: Extract<CallTiming, { rpc: 'synthesizeStream' }> | null = null;
    for (const c of calls) {
      if (c.rpc === 'transcribeStream') {
        if (c.sentAt <= tl.recognizedAt + 1 && (!rec || c.sentAt > rec.sentAt)) rec = c;
      } else if (c.rpc === 'generate') {
        if (c.receivedAt >= tl.startedAt - 1 && (!gen || c.receivedAt < gen.receivedAt)) gen = c;
      } else if (c.textAt >= tl.firstTtsAt - 1 && (!syn || c.textAt < syn.textAt)) syn = c;
    }
    const speakable = gen?.textAt[tl.textEventsToSpeakable - 1];
    if (!rec || !gen || !syn || speakable === undefined) {
      unmatched++;
      continue;
    }
    const total = tl.firstAudioAt - tl.speechEndedAt;
    const backend = (rec.sentAt - rec.heardAt) + (speakable - gen.receivedAt) + (syn.audioAt - syn.textAt);
    values.push(Math.max(0, total - backend - (tl.decideMs ?? 0)));
    const firstSpeakableAt = tl.firstSpeakableAt ?? tl.firstTtsAt;
    hops.ingest.push(rec.heardAt - tl.speechEndedAt);
    hops.recognized.push(tl.recognizedAt - rec.sentAt);
    hops.toModel.push(gen.receivedAt - tl.startedAt);
    hops.fromModel.push(firstSpeakableAt - speakable);
    hops.toSynthesis.push(syn.textAt - tl.firstTtsAt);
    hops.fromSynthesis.push(tl.firstAudioAt - syn.audioAt);
    hops.inPlatform.push(tl.startedAt - tl.recognizedAt - (tl.decideMs ?? 0) + (tl.firstTtsAt - firstSpeakableAt));
  }
  return { values, hops, unmatched };
}
