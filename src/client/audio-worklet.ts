/**
 * The AudioWorklet module of the browser audio helpers (`audio.ts`), built on its own into
 * `parley-audio-worklet.js` (served by the platform at `/sdk/parley-audio-worklet.js`, shipped
 * in the package beside `dist/client/index.js`). It registers two processors; both run at the
 * AudioContext's rate (the device's) and speak 16 kHz mono PCM to the main thread:
 *
 * - `parley-capture`: the microphone, mixed to mono, resampled to 16 kHz, posted as Int16
 *   frames of `frameSamples` (the buffer is transferred).
 * - `parley-playback`: the agent's audio: Int16 16 kHz frames posted in (`{type: 'audio', pcm}`),
 *   resampled to the context's rate and played in order; `{type: 'clear'}` drops everything
 *   not yet played before the next render quantum (barge-in), answered by `{type: 'cleared'}`.
 *   It reports `{type: 'position', playedSamples, queuedSamples}` (at 16 kHz) about every 50 ms
 *   while it plays and whenever it runs dry.
 */
import { floatToInt16, int16ToFloat, Resampler } from './resample.ts';

// The AudioWorkletGlobalScope, which the DOM library does not describe.
declare const sampleRate: number;
declare function registerProcessor(name: string, ctor: new (options: { processorOptions?: Record<string, unknown> }) => Processor): void;
declare class AudioWorkletProcessor {
  readonly port: MessagePort;
}
interface Processor {
  process(inputs: Float32Array[][], outputs: Float32Array[][]): boolean;
}

/** The transport's rate (docs/websocket-transport.md: 16 kHz mono 16-bit PCM both ways). */
const PCM_RATE_HZ = 16_000;

class CaptureProcessor extends AudioWorkletProcessor implements Processor {
  private readonly resampler = new Resampler(sampleRate, PCM_RATE_HZ);
  private readonly frameSamples: number;
  private frameBuf: Int16Array;
  private filled = 0;

  constructor(options: { processorOptions?: Record<string, unknown> }) {
    super();
    const n = Number(options.processorOptions?.frameSamples);
    this.frameSamples = Number.isInteger(n) && n > 0 ? n : 640; // 40 ms, the SDK's default
    this.frameBuf = new Int16Array(this.frameSamples);
  }

  process(inputs: Float32Array[][]): boolean {
    const channels = inputs[0];
    if (!channels || channels.length === 0) return true; // no source connected yet
    let mono = channels[0]!;
    if (channels.length > 1) {
      mono = new Float32Array(mono.length);
      for (const ch of channels) for (let i = 0; i < mono.length; i++) mono[i] += ch[i]! / channels.length;
    }
    const pcm = floatToInt16(this.resampler.process(mono));
    for (let i = 0; i < pcm.length; ) {
      const take = Math.min(pcm.length - i, this.frameBuf.length - this.filled);
      this.frameBuf.set(pcm.subarray(i, i + take), this.filled);
      this.filled += take;
      i += take;
      if (this.filled === this.frameBuf.length) {
        const full = this.frameBuf;
        this.port.postMessage(full, [full.buffer]);
        this.frameBuf = new Int16Array(this.frameSamples);
        this.filled = 0;
      }
    }
    return true;
  }
}

/** Render quanta between position reports (128 samples each: ~50 ms at 48 kHz). */
const REPORT_EVERY = 18;

class PlaybackProcessor extends AudioWorkletProcessor implements Processor {
  private resampler = new Resampler(PCM_RATE_HZ, sampleRate);
  /** Resampled audio waiting to play, oldest first; `head` is the read offset into the first. */
  private queue: Float32Array[] = [];
  private head = 0;
  private queued = 0;
  /** Output samples played since the start (at the context's rate). */
  private played = 0;
  private quanta = 0;

  constructor() {
    super();
    this.port.onmessage = (ev: MessageEvent) => {
      const m = ev.data as { type: string; pcm?: Int16Array };
      if (m.type === 'audio' && m.pcm) {
        const out = this.resampler.process(int16ToFloat(m.pcm));
        if (out.length) {
          this.queue.push(out);
          this.queued += out.length;
        }
      } else if (m.type === 'clear') {
        const dropped = this.queued;
        this.queue = [];
        this.head = 0;
        this.queued = 0;
        // A fresh filter: the next reply must not start with the tail of the dropped one.
        this.resampler = new Resampler(PCM_RATE_HZ, sampleRate);
        this.port.postMessage({ type: 'cleared', droppedSamples: this.toPcm(dropped), playedSamples: this.toPcm(this.played) });
      }
    };
  }

  private toPcm(n: number): number {
    return Math.round((n * PCM_RATE_HZ) / sampleRate);
  }

  process(_inputs: Float32Array[][], outputs: Float32Array[][]): boolean {
    const out = outputs[0]!;
    const first = out[0];
    if (!first) return true;
    let i = 0;
    while (i < first.length && this.queue.length) {
      const chunk = this.queue[0]!;
      const take = Math.min(first.length - i, chunk.length - this.head);
      first.set(chunk.subarray(this.head, this.head + take), i);
      i += take;
      this.head += take;
      if (this.head === chunk.length) {
        this.queue.shift();
        this.head = 0;
      }
    }
    first.fill(0, i);
    this.queued -= i;
    this.played += i;
    for (let c = 1; c < out.length; c++) out[c]!.set(first);
    if (i > 0 && (++this.quanta % REPORT_EVERY === 0 || this.queued === 0)) {
      this.port.postMessage({ type: 'position', playedSamples: this.toPcm(this.played), queuedSamples: this.toPcm(this.queued) });
    }
    return true;
  }
}

registerProcessor('parley-capture', CaptureProcessor);
registerProcessor('parley-playback', PlaybackProcessor);
