/**
 * Browser audio for conversations: `browserMicrophone()` and `browserSpeaker()`, passed to
 * `start()` / `startPublic()` as `microphone` and `speaker`. Both run in an AudioWorklet at the
 * AudioContext's rate (the device's) and convert to and from the transport's 16 kHz mono PCM
 * there (`audio-worklet.ts`), off the main thread.
 *
 * The worklet module is a file of its own, `parley-audio-worklet.js`: the platform serves it at
 * `/sdk/parley-audio-worklet.js`, the package ships it beside `dist/client/index.js`, and by
 * default it is loaded from beside the script that holds this code (`import.meta.url`). An app
 * bundled elsewhere passes `workletUrl`. It is a plain same-origin or CORS script: a page's CSP
 * needs no `blob:` for it (`script-src` must allow its origin).
 */
import { ClientError, type Microphone, type Speaker } from './types.ts';

const PCM_RATE_HZ = 16_000;
const WORKLET_FILE = 'parley-audio-worklet.js';
/**
 * The microphone's frame length by default. The platform passes caller audio to its recognizer
 * in messages of at least 40 ms, joining shorter frames (docs/websocket-transport.md, "Frames"):
 * a 40 ms frame reaches the recognizer when two 20 ms frames would, and the node reads, polices
 * and records half as many messages (bench/README.md, twenty-fifth pass).
 */
const MICROPHONE_FRAME_MS = 40;
/**
 * Agent audio the speaker holds unplayed at most. The platform paces audio in real time, so
 * a healthy queue holds well under a second; more means the output is not running (a context
 * the autoplay policy keeps suspended), and further audio is dropped rather than kept.
 */
const MAX_BUFFERED_MS = 10_000;

/**
 * The DOM's AudioContext and MediaTrackConstraints, named so that these declarations compile
 * in a program without the DOM library (a Node project): there they are `never`.
 */
type DomAudioContext = typeof globalThis extends { AudioContext: { prototype: infer T } } ? T : never;
type DomTrackConstraints = typeof globalThis extends { MediaStreamTrack: { prototype: { getConstraints(): infer C } } } ? C : never;

export interface BrowserAudioOptions {
  /** The worklet module's URL. Default: `parley-audio-worklet.js` beside this script. */
  workletUrl?: string | URL;
  /** An AudioContext to run in (left open by the helper). Default: a new one at the device's rate, closed at the end. */
  audioContext?: DomAudioContext;
}

export interface BrowserMicrophoneOptions extends BrowserAudioOptions {
  /**
   * Audio constraints for `getUserMedia`, over the defaults: mono, echo cancellation (the
   * agent's voice must not come back as the caller's), noise suppression, gain control.
   */
  constraints?: DomTrackConstraints;
  /**
   * Length of the 16 kHz frames sent, in ms (default 40: the platform hands caller audio to its
   * recognizer in 40 ms messages anyway, so shorter frames only cost more messages).
   */
  frameMs?: number;
}

export interface BrowserMicrophone extends Microphone {
  /** While true the microphone sends silence (the recognizer needs an unbroken stream). */
  muted: boolean;
  /** The rate captured at (the AudioContext's, usually the device's); undefined until started. */
  readonly sampleRateHz: number | undefined;
}

export interface BrowserSpeaker extends Speaker {
  /** Settles when the speaker can play; rejects with `audio_unavailable` when its worklet cannot load. */
  readonly ready: Promise<void>;
  /** Agent audio played so far, in ms (updated by the worklet about every 50 ms). */
  readonly playedMs: number;
  /** Agent audio received and not yet played, in ms (an estimate between updates). */
  readonly bufferedMs: number;
  /** Stops playing for good and releases the AudioContext it created (the SDK calls it at the end). */
  close(): void;
}

function workletUrlOf(o: BrowserAudioOptions): string {
  return String(o.workletUrl ?? new URL(`./${WORKLET_FILE}`, import.meta.url));
}

/** Loads the worklet module into `ctx` once (contexts shared by a microphone and a speaker load it once). */
const loaded = new WeakMap<AudioContext, Map<string, Promise<void>>>();
function loadWorklet(ctx: AudioContext, url: string): Promise<void> {
  let byUrl = loaded.get(ctx);
  if (!byUrl) loaded.set(ctx, (byUrl = new Map()));
  let p = byUrl.get(url);
  if (!p) {
    p = ctx.audioWorklet.addModule(url);
    byUrl.set(url, p);
    p.catch(() => byUrl!.delete(url));
  }
  return p;
}

function newContext(): AudioContext {
  const Ctx = (globalThis as { AudioContext?: typeof AudioContext }).AudioContext;
  if (!Ctx) throw new ClientError('audio_unavailable', 'This browser has no Web Audio (AudioContext)');
  return new Ctx();
}

/** Resumes a context the autoplay policy suspended; it stays suspended until the page has had a user gesture. */
function wake(ctx: AudioContext): void {
  if (ctx.state === 'suspended') ctx.resume().catch(() => {});
}

/**
 * The device's microphone as a `Microphone`: captured at the device's rate, resampled to
 * 16 kHz in the worklet and sent in frames of `frameMs`. `start` rejects with
 * `audio_unavailable` (no `getUserMedia` — it needs https or localhost —, permission
 * denied, no device, or the worklet could not load); its stop function releases the device.
 */
export function browserMicrophone(options: BrowserMicrophoneOptions = {}): BrowserMicrophone {
  let rate: number | undefined;
  const mic: BrowserMicrophone = {
    muted: false,
    get sampleRateHz() {
      return rate;
    },
    async start(onFrame) {
      const media = (globalThis as { navigator?: Navigator }).navigator?.mediaDevices;
      if (!media?.getUserMedia) throw new ClientError('audio_unavailable', 'No microphone access here: getUserMedia needs a secure page (https or localhost)');
      let stream: MediaStream;
      try {
        stream = await media.getUserMedia({ audio: { channelCount: 1, echoCancellation: true, noiseSuppression: true, autoGainControl: true, ...options.constraints } });
      } catch (err) {
        throw new ClientError('audio_unavailable', `The microphone is unavailable: ${(err as Error)?.name ?? 'Error'}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
      }
      const own = !options.audioContext;
      let ctx: AudioContext | undefined;
      try {
        ctx = options.audioContext ?? newContext();
        wake(ctx);
        await loadWorklet(ctx, workletUrlOf(options));
      } catch (err) {
        for (const track of stream.getTracks()) track.stop();
        if (own) ctx?.close().catch(() => {});
        if (err instanceof ClientError) throw err;
        throw new ClientError('audio_unavailable', `The audio worklet could not load from ${workletUrlOf(options)}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
      }
      rate = ctx.sampleRate;
      const frameSamples = Math.max(1, Math.round(((options.frameMs ?? MICROPHONE_FRAME_MS) * PCM_RATE_HZ) / 1000));
      const source = ctx.createMediaStreamSource(stream);
      // No output: a worklet node without outputs is pulled by the graph on its own.
      const node = new AudioWorkletNode(ctx, 'parley-capture', { numberOfInputs: 1, numberOfOutputs: 0, channelCount: 1, channelCountMode: 'explicit', processorOptions: { frameSamples } });
      node.port.onmessage = (ev: MessageEvent<Int16Array>) => onFrame(mic.muted ? new Int16Array(ev.data.length) : ev.data);
      source.connect(node);
      const context = ctx;
      return () => {
        node.port.onmessage = null;
        source.disconnect();
        node.disconnect();
        for (const track of stream.getTracks()) track.stop();
        if (own) context.close().catch(() => {});
      };
    },
  };
  return mic;
}

/**
 * A `Speaker` on the page's audio output: the agent's 16 kHz audio is resampled to the
 * device's rate in the worklet and played in order; `stop()` drops what is queued before the
 * next 128-sample render quantum (about 3 ms). Create it from a click: browsers start audio
 * only after a user gesture. Audio that arrives before the worklet has loaded waits for it.
 */
export function browserSpeaker(options: BrowserAudioOptions = {}): BrowserSpeaker {
  const own = !options.audioContext;
  const ctx = options.audioContext ?? newContext();
  wake(ctx);
  let node: AudioWorkletNode | null = null;
  let closed = false;
  let waiting: Int16Array[] = [];
  /** Samples (16 kHz) played, and queued, as last reported; samples sent since that report. */
  let played = 0;
  let queued = 0;
  let sentSince = 0;
  const url = workletUrlOf(options);
  const ready = loadWorklet(ctx, url).then(() => {
    if (closed) return;
    node = new AudioWorkletNode(ctx, 'parley-playback', { numberOfInputs: 0, numberOfOutputs: 1, outputChannelCount: [1] });
    node.port.onmessage = (ev: MessageEvent<{ type: string; playedSamples: number; queuedSamples?: number }>) => {
      played = ev.data.playedSamples;
      queued = ev.data.type === 'cleared' ? 0 : (ev.data.queuedSamples ?? 0);
      sentSince = 0;
    };
    node.connect(ctx.destination);
    const held = waiting;
    waiting = [];
    sentSince = 0;
    for (const pcm of held) post(pcm);
  }, (err: unknown) => {
    throw new ClientError('audio_unavailable', `The audio worklet could not load from ${url}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  });
  ready.catch(() => {}); // `ready` tells whoever asks; a conversation goes on without sound
  const post = (pcm: Int16Array) => {
    const copy = pcm.slice(); // transferred: the caller's array stays intact
    node!.port.postMessage({ type: 'audio', pcm: copy }, [copy.buffer]);
    sentSince += copy.length;
  };
  const speaker: BrowserSpeaker = {
    ready,
    get playedMs() {
      return (played * 1000) / PCM_RATE_HZ;
    },
    get bufferedMs() {
      return ((queued + sentSince) * 1000) / PCM_RATE_HZ;
    },
    play(pcm) {
      if (closed) return;
      wake(ctx);
      if (speaker.bufferedMs > MAX_BUFFERED_MS) return;
      if (node) post(pcm);
      else {
        waiting.push(pcm.slice());
        sentSince += pcm.length;
      }
    },
    stop() {
      waiting = [];
      queued = 0;
      sentSince = 0;
      node?.port.postMessage({ type: 'clear' });
    },
    close() {
      if (closed) return;
      closed = true;
      waiting = [];
      node?.disconnect();
      if (own) ctx.close().catch(() => {});
    },
  };
  return speaker;
}
