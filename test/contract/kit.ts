/**
 * The contract kit: checks that a backend at an address implements
 * inference.v1.InferenceService as docs/inference.md describes. Backend-agnostic: it talks
 * raw gRPC through the generated contract. Each check throws on a violation.
 *
 * Options let a backend opt into stricter checks: `exactRoundTrip` (its speech model's
 * audio transcribes back to exactly the text, e.g. the native `synthetic` model) and
 * `scriptedChat` (its chat model follows the native scripted rules).
 */
import * as grpc from '@grpc/grpc-js';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import {
  AudioEncoding,
  ServingStatus,
  SynthesizeRequestSchema,
  SynthesizeStreamRequestSchema,
  TranscribeRequestSchema,
  TranscribeStreamRequestSchema,
  TranscribeStreamsRequestSchema,
  TranscribeStreamsInputSchema,
  SynthesizeStreamsRequestSchema,
  SynthesizeStreamsInputSchema,
  GenerateStreamsRequestSchema,
  GenerateStreamsInputSchema,
  GenerateRequestSchema,
  CapabilitiesRequestSchema,
  DesignVoiceRequestSchema,
  HealthRequestSchema,
  ModelKind,
  SaveVoiceRequestSchema,
  Role,
  FinishReason,
  type AudioChunk,
  type CapabilitiesResponse,
  type DesignVoiceResponse,
  type SaveVoiceResponse,
  type Segment,
  type SynthesizeStreamResponse,
  type TranscribeStreamResponse,
  type TranscribeStreamsResponse,
  type SynthesizeStreamsResponse,
  type GenerateResponse,
  type GenerateStreamsResponse,
  type TranscribeResponse,
  type HealthResponse,
} from '../../src/gen/inference/v1/inference_pb.ts';
import { createGrpcClient, type InferenceGrpcClient } from '../../src/inference/grpc-service.ts';

export interface KitOptions {
  /** Speech model to synthesize with ('' = backend default). */
  speechModel?: string;
  /** The speech model's audio transcribes back to exactly its text. */
  exactRoundTrip?: boolean;
  /** The chat model follows the native scripted rules. */
  scriptedChat?: boolean;
}

export interface Check {
  name: string;
  run(ctx: Ctx): Promise<void>;
}

export interface Ctx {
  client: InferenceGrpcClient;
  opts: KitOptions;
  caps: CapabilitiesResponse;
}

class Violation extends Error {}
function expect(cond: unknown, msg: string): asserts cond {
  if (!cond) throw new Violation(msg);
}

const md = () => {
  const m = new grpc.Metadata();
  m.set('traceparent', '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01');
  m.set('x-request-id', 'contract-kit');
  m.set('x-team-id', 'contract-team');
  return m;
};

async function collect<T>(stream: AsyncIterable<T>): Promise<{ msgs: T[]; error: grpc.ServiceError | null }> {
  const msgs: T[] = [];
  try {
    for await (const m of stream) msgs.push(m);
    return { msgs, error: null };
  } catch (err) {
    return { msgs, error: err as grpc.ServiceError };
  }
}

function expectCode(error: grpc.ServiceError | null, code: grpc.status, what: string) {
  expect(error, `${what}: expected status ${grpc.status[code]}, got success`);
  expect(error.code === code, `${what}: expected status ${grpc.status[code]}, got ${grpc.status[error.code]} (${error.details})`);
}

function unary<T>(fn: (cb: (err: grpc.ServiceError | null, res?: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => fn((err, res) => (err ? reject(err) : resolve(res!))));
}

/** Alignment invariants over a list of segments. */
export function checkSegments(list: Segment[], totalMs: number, what: string) {
  let prevEnd = -Infinity;
  for (const s of list) {
    expect(s.startMs <= s.endMs, `${what}: "${s.text}" starts after it ends (${s.startMs} > ${s.endMs})`);
    expect(s.startMs >= prevEnd - 1e-6, `${what}: "${s.text}" overlaps the previous one (${s.startMs} < ${prevEnd})`);
    expect(s.endMs <= totalMs + 1, `${what}: "${s.text}" ends at ${s.endMs} ms, after the audio (${totalMs} ms)`);
    prevEnd = s.endMs;
  }
}

/** Stream invariants of a call's chunks: sequence, offsets, rate, final flag, alignment. */
export function checkChunks(chunks: AudioChunk[], text: string | null, what: string) {
  expect(chunks.length > 0, `${what}: no chunks`);
  const rate = chunks[0].sampleRateHz;
  expect(rate >= 8000, `${what}: sample rate ${rate}`);
  let samples = 0n;
  let producedMs = 0;
  const words: Segment[] = [];
  const chars: Segment[] = [];
  chunks.forEach((c, i) => {
    expect(c.sequence === BigInt(i), `${what}: chunk ${i} has sequence ${c.sequence}`);
    expect(c.sampleRateHz === rate, `${what}: sample rate changes at chunk ${i}`);
    expect(c.offsetSamples === samples, `${what}: chunk ${i} offset ${c.offsetSamples}, expected ${samples}`);
    expect(Math.abs(c.offsetMs - (Number(samples) / rate) * 1000) < 1, `${what}: chunk ${i} offset_ms ${c.offsetMs} disagrees with offset_samples`);
    let n = c.audio.length;
    if (c.encoding === AudioEncoding.WAV && i === 0) n -= 44;
    else expect(c.encoding === AudioEncoding.PCM_S16LE || c.encoding === AudioEncoding.WAV, `${what}: unexpected encoding ${c.encoding}`);
    expect(n % 2 === 0, `${what}: chunk ${i} has an odd byte count`);
    expect(Math.abs(c.durationMs - (n / 2 / rate) * 1000) < 1, `${what}: chunk ${i} duration_ms ${c.durationMs} disagrees with its audio`);
    samples += BigInt(n / 2);
    producedMs = (Number(samples) / rate) * 1000;
    words.push(...(c.alignment?.segments ?? []));
    chars.push(...(c.alignment?.characters ?? []));
    expect(c.final === (i === chunks.length - 1), `${what}: final is ${c.final} on chunk ${i} of ${chunks.length}`);
  });
  checkSegments(words, producedMs, `${what} words`);
  checkSegments(chars, producedMs, `${what} characters`);
  if (text !== null) {
    if (chars.length) expect(chars.map((c) => c.text).join('') === text, `${what}: characters spell "${chars.map((c) => c.text).join('')}", not the text`);
    let at = 0;
    for (const w of words) {
      const k = text.indexOf(w.text, at);
      expect(k >= 0, `${what}: word "${w.text}" is not in the text (in order)`);
      at = k + w.text.length;
    }
  }
  return { rate, pcmBytes: Number(samples) * 2, durationMs: producedMs };
}

function pcmOf(chunks: AudioChunk[]): Uint8Array {
  const parts = chunks.map((c, i) => (c.encoding === AudioEncoding.WAV && i === 0 ? c.audio.subarray(44) : c.audio));
  return Buffer.concat(parts);
}

async function synth(ctx: Ctx, text: string, extra: MessageInitShape<typeof SynthesizeRequestSchema> = {}) {
  const req = create(SynthesizeRequestSchema, { text, model: ctx.opts.speechModel ?? '', language: 'en', ...(extra as object) });
  return collect(ctx.client.synthesize(req, md()));
}

function transcribeWhole(ctx: Ctx, pcm: Uint8Array, rate: number, language = '', pieces = 1): Promise<TranscribeResponse> {
  return new Promise((resolve, reject) => {
    const call = ctx.client.transcribe(md(), {}, (err, res) => (err ? reject(err) : resolve(res!)));
    const config = { input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: rate }, language };
    const size = Math.ceil(pcm.length / pieces / 2) * 2;
    for (let i = 0; i < pieces; i++) {
      const audio = pcm.subarray(i * size, (i + 1) * size);
      call.write(create(TranscribeRequestSchema, i === 0 ? { config, audio } : { audio }));
    }
    call.end();
  });
}

const SENTENCE = 'The quick brown fox jumps over the lazy dog. Grüße aus Köln!';
const LONG = Array.from({ length: 40 }, (_, i) => `This is sentence number ${i + 1} of a long text.`).join(' ');

export const checks: Check[] = [
  {
    name: 'Capabilities describes a v1 backend',
    async run({ caps }) {
      expect(caps.contractVersion === 'v1', `contract_version is "${caps.contractVersion}"`);
      expect(caps.rpcs.includes('Capabilities') && caps.rpcs.includes('Health'), 'rpcs must list Capabilities and Health');
      expect(caps.outputFormats.some((f) => f.encoding === AudioEncoding.PCM_S16LE), 'PCM_S16LE output is required');
      for (const m of caps.models) expect(m.name, 'a model without a name');
    },
  },
  {
    name: 'Health answers SERVING',
    async run({ client }) {
      const h = await unary<HealthResponse>((cb) => client.health(create(HealthRequestSchema), md(), {}, cb));
      expect(h.status === ServingStatus.SERVING, `status ${h.status}`);
    },
  },
  {
    name: 'Synthesize streams ordered chunks with consistent alignment',
    async run(ctx) {
      const { msgs, error } = await synth(ctx, SENTENCE);
      expect(!error, `Synthesize failed: ${error?.details}`);
      const { durationMs } = checkChunks(msgs, SENTENCE, 'Synthesize');
      expect(durationMs > 200, `only ${durationMs} ms of audio`);
      expect(msgs.some((c) => (c.alignment?.segments.length ?? 0) > 0), 'no word alignment');
    },
  },
  {
    name: 'Synthesize honours the wanted sample rate or says it cannot',
    async run(ctx) {
      const { msgs, error } = await synth(ctx, 'Hello there.', { output: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: 16000 } });
      if (error) return expectCode(error, grpc.status.INVALID_ARGUMENT, 'unsupported sample rate');
      expect(msgs[0].sampleRateHz === 16000, `asked 16000 Hz, got ${msgs[0].sampleRateHz}`);
      checkChunks(msgs, 'Hello there.', 'Synthesize 16 kHz');
    },
  },
  {
    name: 'Synthesize produces WAV when Capabilities offers it',
    async run(ctx) {
      if (!ctx.caps.outputFormats.some((f) => f.encoding === AudioEncoding.WAV)) return;
      const { msgs, error } = await synth(ctx, 'Hello there.', { output: { encoding: AudioEncoding.WAV } });
      expect(!error, `Synthesize WAV failed: ${error?.details}`);
      expect(Buffer.from(msgs[0].audio.subarray(0, 4)).toString() === 'RIFF', 'the first WAV chunk starts with a RIFF header');
      checkChunks(msgs, 'Hello there.', 'Synthesize WAV');
    },
  },
  {
    name: 'Synthesize: a faster speed gives shorter audio',
    async run(ctx) {
      const slow = await synth(ctx, SENTENCE, { prosody: { speed: 0.75 } });
      const fast = await synth(ctx, SENTENCE, { prosody: { speed: 1.5 } });
      expect(!slow.error && !fast.error, 'Synthesize with prosody failed');
      const d = (c: AudioChunk[]) => c.reduce((a, b) => a + b.durationMs, 0);
      expect(d(fast.msgs) < d(slow.msgs), `speed 1.5 gave ${d(fast.msgs)} ms, speed 0.75 gave ${d(slow.msgs)} ms`);
    },
  },
  {
    name: 'Synthesize refuses empty text, bad prosody, unknown voice and unknown model',
    async run(ctx) {
      expectCode((await synth(ctx, '')).error, grpc.status.INVALID_ARGUMENT, 'empty text');
      const speed = (await synth(ctx, 'Hi.', { prosody: { speed: 5 } })).error;
      expectCode(speed, grpc.status.INVALID_ARGUMENT, 'speed 5');
      const voice = (await synth(ctx, 'Hi.', { referenceId: 'no-such-voice-0000' })).error;
      expectCode(voice, grpc.status.NOT_FOUND, 'unknown voice');
      expect(voice!.details === 'Reference not found', `unknown voice message is "${voice!.details}"`);
      expectCode((await synth(ctx, 'Hi.', { model: 'no-such-model' })).error, grpc.status.NOT_FOUND, 'unknown model');
    },
  },
  {
    name: 'Synthesize: cancelling stops the stream and the work',
    async run(ctx) {
      const req = create(SynthesizeRequestSchema, { text: LONG, model: ctx.opts.speechModel ?? '', language: 'en' });
      const call = ctx.client.synthesize(req, md());
      let got = 0;
      const { error } = await collect(
        (async function* () {
          for await (const c of call) {
            got++;
            if (got === 1) call.cancel();
            yield c;
          }
        })(),
      );
      expectCode(error, grpc.status.CANCELLED, 'cancelled Synthesize');
      // The backend's active call count returns to idle.
      let active = -1;
      for (let i = 0; i < 50; i++) {
        const h = await unary<HealthResponse>((cb) => ctx.client.health(create(HealthRequestSchema), md(), {}, cb));
        active = h.activeCalls;
        if (active === 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(active === 0, `Health still reports ${active} active calls after the cancel`);
    },
  },
  {
    name: 'Synthesize past its deadline ends with DEADLINE_EXCEEDED',
    async run(ctx) {
      const req = create(SynthesizeRequestSchema, { text: LONG, model: ctx.opts.speechModel ?? '' });
      const { error } = await collect(ctx.client.synthesize(req, md(), { deadline: Date.now() + 1 }));
      expectCode(error, grpc.status.DEADLINE_EXCEEDED, 'deadline');
    },
  },
  {
    name: 'SynthesizeStream: text pieces, flush, half-close',
    async run(ctx) {
      const call = ctx.client.synthesizeStream(md());
      const w = (m: Parameters<typeof create<typeof SynthesizeStreamRequestSchema>>[1]) => call.write(create(SynthesizeStreamRequestSchema, m));
      const events: SynthesizeStreamResponse[] = [];
      const done = collect(
        (async function* () {
          for await (const e of call) {
            events.push(e);
            if (e.event.case === 'flushed') {
              w({ event: { case: 'text', value: 'And more.' } });
              call.end();
            }
            yield e;
          }
        })(),
      );
      w({ event: { case: 'config', value: { model: ctx.opts.speechModel ?? '', language: 'en' } } });
      w({ event: { case: 'text', value: 'Hello the' } });
      w({ event: { case: 'text', value: 're, world. How are' } });
      w({ event: { case: 'text', value: ' you' } });
      w({ event: { case: 'flush', value: { id: 7n } } });
      const { error } = await done;
      expect(!error, `SynthesizeStream failed: ${error?.details}`);
      const flushAt = events.findIndex((e) => e.event.case === 'flushed');
      expect(flushAt > 0, 'no flushed event after audio');
      const f = events[flushAt].event;
      expect(f.case === 'flushed' && f.value.id === 7n, 'flushed carries another id');
      const before = events.slice(0, flushAt).flatMap((e) => (e.event.case === 'chunk' ? [e.event.value] : []));
      const after = events.slice(flushAt + 1).flatMap((e) => (e.event.case === 'chunk' ? [e.event.value] : []));
      expect(before.length > 0 && after.length > 0, 'audio missing before or after the flush');
      expect(before[before.length - 1].final, 'the last chunk before a flush is final');
      const all = [...before, ...after];
      all.forEach((c, i) => expect(c.sequence === BigInt(i), `sequence ${c.sequence} at ${i}`));
      if (ctx.opts.exactRoundTrip) {
        const text = 'Hello there, world. How are you' + 'And more.';
        const r = await transcribeWhole(ctx, pcmOf(all), all[0].sampleRateHz);
        expect(r.text === text, `stream audio transcribes to "${r.text}"`);
      }
    },
  },
  {
    name: 'SynthesizeStream: cancelling mid-stream frees the call',
    async run(ctx) {
      const call = ctx.client.synthesizeStream(md());
      call.write(create(SynthesizeStreamRequestSchema, { event: { case: 'config', value: { model: ctx.opts.speechModel ?? '', language: 'en' } } }));
      call.write(create(SynthesizeStreamRequestSchema, { event: { case: 'text', value: LONG } }));
      call.write(create(SynthesizeStreamRequestSchema, { event: { case: 'flush', value: { id: 1n } } }));
      const { error } = await collect(
        (async function* () {
          for await (const e of call) {
            call.cancel();
            yield e;
          }
        })(),
      );
      expectCode(error, grpc.status.CANCELLED, 'cancelled SynthesizeStream');
      let active = -1;
      for (let i = 0; i < 50; i++) {
        active = (await unary<HealthResponse>((cb) => ctx.client.health(create(HealthRequestSchema), md(), {}, cb))).activeCalls;
        if (active === 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(active === 0, `Health still reports ${active} active calls after the cancel`);
    },
  },
  {
    name: 'SynthesizeStream without a config first is INVALID_ARGUMENT',
    async run(ctx) {
      const call = ctx.client.synthesizeStream(md());
      call.write(create(SynthesizeStreamRequestSchema, { event: { case: 'text', value: 'Hello.' } }));
      call.end();
      expectCode((await collect(call)).error, grpc.status.INVALID_ARGUMENT, 'no config');
    },
  },
  {
    name: 'Transcribe: whole and streamed uploads agree; language echoed; timings within the audio',
    async run(ctx) {
      const s = await synth(ctx, SENTENCE);
      expect(!s.error, `Synthesize failed: ${s.error?.details}`);
      const pcm = pcmOf(s.msgs);
      const rate = s.msgs[0].sampleRateHz;
      let whole: TranscribeResponse;
      try {
        whole = await transcribeWhole(ctx, pcm, rate, 'en');
      } catch (err) {
        const e = err as grpc.ServiceError;
        // A backend that cannot recognize this speech must say so with a status, not hang.
        expect(!ctx.opts.exactRoundTrip && [grpc.status.UNAVAILABLE, grpc.status.UNIMPLEMENTED].includes(e.code), `Transcribe failed: ${e.details}`);
        return;
      }
      const durationMs = (pcm.length / 2 / rate) * 1000;
      expect(Math.abs(whole.durationMs - durationMs) < 50, `duration_ms ${whole.durationMs}, audio is ${durationMs} ms`);
      expect(whole.language === 'en', `language echoed as "${whole.language}"`);
      checkSegments(whole.words, durationMs, 'Transcribe words');
      checkSegments(whole.segments, durationMs, 'Transcribe segments');
      const streamed = await transcribeWhole(ctx, pcm, rate, '', 7);
      expect(streamed.text === whole.text, 'a streamed upload transcribes differently');
      expect(streamed.language === '', 'language must echo the empty hint');
      if (ctx.opts.exactRoundTrip) expect(whole.text === SENTENCE, `transcribed "${whole.text}"`);
    },
  },
  {
    name: 'Transcribe without a config is INVALID_ARGUMENT',
    async run(ctx) {
      const err = await new Promise<grpc.ServiceError | null>((resolve) => {
        const call = ctx.client.transcribe(md(), {}, (e) => resolve(e));
        call.write(create(TranscribeRequestSchema, { audio: new Uint8Array(3200) }));
        call.end();
      });
      expectCode(err, grpc.status.INVALID_ARGUMENT, 'no config');
    },
  },
  {
    name: 'TranscribeStream: frames and commits give speech events and committed text',
    async run(ctx) {
      const s = await synth(ctx, 'Hello realtime world.');
      expect(!s.error, `Synthesize failed: ${s.error?.details}`);
      const pcm = pcmOf(s.msgs);
      const rate = s.msgs[0].sampleRateHz;
      const call = ctx.client.transcribeStream(md());
      const w = (m: Parameters<typeof create<typeof TranscribeStreamRequestSchema>>[1]) => call.write(create(TranscribeStreamRequestSchema, m));
      w({ event: { case: 'config', value: { input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: rate } } } });
      w({ event: { case: 'commit', value: {} } });
      const frame = Math.round(rate * 0.02) * 2;
      const silence = new Uint8Array(Math.round(rate * 0.5) * 2);
      w({ event: { case: 'audio', value: silence } });
      for (let i = 0; i < pcm.length; i += frame) w({ event: { case: 'audio', value: pcm.subarray(i, i + frame) } });
      w({ event: { case: 'audio', value: silence } });
      w({ event: { case: 'commit', value: {} } });
      call.end();
      const { msgs, error } = await collect<TranscribeStreamResponse>(call);
      expect(!error, `TranscribeStream failed: ${error?.details}`);
      const committed = msgs.flatMap((m) => (m.event.case === 'committed' ? [m.event.value] : []));
      expect(committed.length >= 2, `expected a committed event per commit, got ${committed.length}`);
      expect(committed[0].text === '', `a commit before any audio commits "${committed[0].text}"`);
      if (ctx.opts.exactRoundTrip) {
        const text = committed.map((c) => c.text).join('');
        expect(text === 'Hello realtime world.', `committed "${text}"`);
        const started = msgs.findIndex((m) => m.event.case === 'speechStarted');
        const ended = msgs.findIndex((m) => m.event.case === 'speechEnded');
        expect(started >= 0 && ended > started, 'speech_started then speech_ended expected');
      }
    },
  },
  {
    name: 'TranscribeStreams (when listed): streams on one call are each their own; a cancel or failure ends one stream only',
    async run(ctx) {
      type Ev = MessageInitShape<typeof TranscribeStreamsInputSchema>['event'];
      if (!ctx.caps.rpcs.includes('TranscribeStreams')) return;
      const s = await synth(ctx, 'Hello realtime world.');
      expect(!s.error, `Synthesize failed: ${s.error?.details}`);
      const pcm = pcmOf(s.msgs);
      const rate = s.msgs[0].sampleRateHz;
      const call = ctx.client.transcribeStreams(md());
      const w = (...inputs: [number, Ev][]) =>
        call.write(create(TranscribeStreamsRequestSchema, { inputs: inputs.map(([stream, event]) => ({ stream: BigInt(stream), event })) }));
      const config = { input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: rate } };
      // Streams 1 and 2 hear the sentence; 3 is cancelled half way; 4 has a bad configuration.
      w([1, { case: 'open', value: { config, requestId: 'contract-1' } }], [2, { case: 'open', value: { config } }], [3, { case: 'open', value: { config } }]);
      w([4, { case: 'open', value: { config: { input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: 1 } } } }]);
      const frame = Math.round(rate * 0.04) * 2;
      const silence = new Uint8Array(Math.round(rate * 0.5) * 2);
      w([1, { case: 'audio', value: silence }], [2, { case: 'audio', value: silence }], [3, { case: 'audio', value: silence }]);
      for (let i = 0; i < pcm.length; i += frame) {
        const piece = pcm.subarray(i, i + frame);
        if (i === frame * 4) w([3, { case: 'cancel', value: {} }]);
        w([1, { case: 'audio', value: piece }], [2, { case: 'audio', value: piece }], ...(i < frame * 4 ? [[3, { case: 'audio', value: piece }] as [number, Ev]] : []));
      }
      w([1, { case: 'audio', value: silence }], [1, { case: 'end', value: {} }], [2, { case: 'audio', value: silence }], [2, { case: 'end', value: {} }]);
      // The call stays open until both streams have their status, then half-closes.
      const byStream = new Map<number, TranscribeStreamsResponse['outputs']>();
      const statuses = new Map<number, { code: number; message: string }>();
      const error = await new Promise<grpc.ServiceError | null>((resolve) => {
        call.on('data', (m: TranscribeStreamsResponse) => {
          for (const o of m.outputs) {
            const id = Number(o.stream);
            byStream.set(id, [...(byStream.get(id) ?? []), o]);
            if (o.event.case === 'status') statuses.set(id, o.event.value);
          }
          if (statuses.has(1) && statuses.has(2) && statuses.has(4)) call.end();
        });
        call.on('error', resolve);
        call.on('status', (st: grpc.StatusObject) => resolve(st.code === grpc.status.OK ? null : (st as unknown as grpc.ServiceError)));
      });
      expect(!error, `TranscribeStreams failed: ${error?.details}`);
      for (const id of [1, 2]) {
        const outs = byStream.get(id) ?? [];
        expect(statuses.get(id)?.code === grpc.status.OK, `stream ${id} must end OK, got ${JSON.stringify(statuses.get(id))}`);
        expect(outs[outs.length - 1].event.case === 'status', `stream ${id}: the status must come last`);
        const text = outs.flatMap((o) => (o.event.case === 'committed' ? [o.event.value.text] : [])).join('');
        expect(text.length > 0, `stream ${id}: no committed text`);
        if (ctx.opts.exactRoundTrip) expect(text === 'Hello realtime world.', `stream ${id} committed "${text}"`);
      }
      expect(!statuses.has(3), 'a cancelled stream gets no status');
      expect(statuses.get(4)?.code === grpc.status.INVALID_ARGUMENT, `a bad configuration fails its stream INVALID_ARGUMENT, got ${JSON.stringify(statuses.get(4))}`);
    },
  },
  {
    name: 'SynthesizeStreams (when listed): streams on one call are each their own; audio waits for credit; a cancel or failure ends one stream only',
    async run(ctx) {
      type Ev = MessageInitShape<typeof SynthesizeStreamsInputSchema>['event'];
      if (!ctx.caps.rpcs.includes('SynthesizeStreams')) return;
      const call = ctx.client.synthesizeStreams(md());
      const w = (...inputs: [number, Ev][]) =>
        call.write(create(SynthesizeStreamsRequestSchema, { inputs: inputs.map(([stream, event]) => ({ stream: BigInt(stream), event })) }));
      const config = { model: ctx.opts.speechModel ?? '', language: 'en' };
      const plenty = 0xffffffff;
      // 1 speaks with plenty of credit; 2 with none until 1 has ended; 3 is cancelled at its first
      // chunk; 4 names a model the backend does not have.
      w([1, { case: 'open', value: { config, requestId: 'contract-1', credit: plenty } }], [2, { case: 'open', value: { config, credit: 0 } }]);
      w([3, { case: 'open', value: { config, credit: plenty } }], [4, { case: 'open', value: { config: { model: 'no-such-model-contract-kit' }, credit: plenty } }]);
      w([1, { case: 'text', value: 'Hello the' }], [2, { case: 'text', value: 'Hello there.' }], [3, { case: 'text', value: LONG }], [1, { case: 'text', value: 're, world.' }]);
      w([1, { case: 'flush', value: { id: 7n } }], [2, { case: 'flush', value: { id: 8n } }], [3, { case: 'flush', value: { id: 9n } }], [1, { case: 'end', value: {} }]);
      const byStream = new Map<number, SynthesizeStreamsResponse['outputs']>();
      const statuses = new Map<number, { code: number; message: string }>();
      let chunksOf2AtEndOf1 = -1;
      let cancelled = false;
      let ended = false;
      const error = await new Promise<grpc.ServiceError | null>((resolve) => {
        call.on('data', (m: SynthesizeStreamsResponse) => {
          for (const o of m.outputs) {
            const id = Number(o.stream);
            byStream.set(id, [...(byStream.get(id) ?? []), o]);
            if (o.event.case === 'status') statuses.set(id, o.event.value);
            if (id === 3 && o.event.case === 'chunk' && !cancelled) {
              cancelled = true;
              w([3, { case: 'cancel', value: {} }]);
            }
            if (id === 1 && o.event.case === 'status') {
              chunksOf2AtEndOf1 = (byStream.get(2) ?? []).filter((x) => x.event.case === 'chunk').length;
              w([2, { case: 'credit', value: plenty }], [2, { case: 'end', value: {} }]);
            }
          }
          // Half-closed once stream 3's cancel went out: a slower provider's first chunk of 3 can
          // come after 1, 2 and 4 have ended, and a write after the end fails the call.
          if (statuses.has(1) && statuses.has(2) && statuses.has(4) && (cancelled || statuses.has(3)) && !ended) {
            ended = true;
            call.end();
          }
        });
        call.on('error', resolve);
        call.on('status', (st: grpc.StatusObject) => resolve(st.code === grpc.status.OK ? null : (st as unknown as grpc.ServiceError)));
      });
      expect(!error, `SynthesizeStreams failed: ${error?.details ?? error?.message}`);
      for (const id of [1, 2]) {
        const outs = byStream.get(id) ?? [];
        expect(statuses.get(id)?.code === grpc.status.OK, `stream ${id} must end OK, got ${JSON.stringify(statuses.get(id))}`);
        expect(outs[outs.length - 1].event.case === 'status', `stream ${id}: the status must come last`);
        const chunks = outs.flatMap((o) => (o.event.case === 'chunk' ? [o.event.value] : []));
        expect(chunks.length > 0, `stream ${id}: no audio`);
        chunks.forEach((c, i) => expect(c.sequence === BigInt(i), `stream ${id}: sequence ${c.sequence} at ${i}`));
        const flushAt = outs.findIndex((o) => o.event.case === 'flushed');
        const f = outs[flushAt]?.event;
        expect(f?.case === 'flushed' && f.value.id === BigInt(6 + id), `stream ${id}: its flush must be answered with its id`);
        const before = outs.slice(0, flushAt).flatMap((o) => (o.event.case === 'chunk' ? [o.event.value] : []));
        expect(before.length > 0 && before[before.length - 1].final, `stream ${id}: the last chunk before a flush is final`);
        if (ctx.opts.exactRoundTrip) {
          const r = await transcribeWhole(ctx, pcmOf(chunks), chunks[0].sampleRateHz);
          expect(r.text === (id === 1 ? 'Hello there, world.' : 'Hello there.'), `stream ${id} audio transcribes to "${r.text}"`);
        }
      }
      expect(chunksOf2AtEndOf1 === 0, `a stream without credit must send no audio (stream 2 had sent ${chunksOf2AtEndOf1} chunks)`);
      expect(!statuses.has(3), 'a cancelled stream gets no status');
      expect(statuses.get(4)?.code === grpc.status.NOT_FOUND, `an unknown model fails its stream NOT_FOUND, got ${JSON.stringify(statuses.get(4))}`);
      let active = -1;
      for (let i = 0; i < 50; i++) {
        active = (await unary<HealthResponse>((cb) => ctx.client.health(create(HealthRequestSchema), md(), {}, cb))).activeCalls;
        if (active === 0) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(active === 0, `Health still reports ${active} active calls after the streams ended`);
    },
  },
  {
    name: 'TranscribeStreams, SynthesizeStreams and GenerateStreams (when listed): stream ids increase; an open with an id not greater gets INVALID_ARGUMENT for that id, and the call goes on',
    async run(ctx) {
      type Out = { stream: bigint; event: { case: string | undefined; value?: unknown } };
      // Writes the inputs, `more` once stream 1 has its status, then half-closes the call (which
      // ends every open stream as `end` does): resolves with every output and the call's error.
      const drive = (
        call: grpc.ClientDuplexStream<unknown, { outputs: Out[] }>,
        first: () => void,
        more: () => void,
      ) => new Promise<{ outs: Out[]; error: grpc.ServiceError | null }>((resolve) => {
        const outs: Out[] = [];
        let sent = false;
        call.on('data', (m: { outputs: Out[] }) => {
          for (const o of m.outputs) {
            outs.push(o);
            if (o.stream === 1n && o.event.case === 'status' && !sent) {
              sent = true;
              more();
              call.end();
            }
          }
        });
        call.on('error', (err: grpc.ServiceError) => resolve({ outs, error: err }));
        call.on('status', (st: grpc.StatusObject) => resolve({ outs, error: st.code === grpc.status.OK ? null : (st as unknown as grpc.ServiceError) }));
        first();
      });
      const statusesOf = (outs: Out[], id: number) =>
        outs.flatMap((o) => (o.stream === BigInt(id) && o.event.case === 'status' ? [(o.event.value as { code: number }).code] : []));
      const check = (what: string, r: { outs: Out[]; error: grpc.ServiceError | null }, hasOutput: (o: Out) => boolean) => {
        expect(!r.error, `${what} failed: ${r.error?.details ?? r.error?.message}`);
        const one = statusesOf(r.outs, 1);
        expect(one.length === 2 && one[0] === grpc.status.OK && one[1] === grpc.status.INVALID_ARGUMENT,
          `${what}: an open of an ended stream's id must get INVALID_ARGUMENT (statuses of stream 1: ${JSON.stringify(one)})`);
        const three = statusesOf(r.outs, 3);
        expect(three.length === 1 && three[0] === grpc.status.INVALID_ARGUMENT,
          `${what}: an open with an id below one already used must get INVALID_ARGUMENT (statuses of stream 3: ${JSON.stringify(three)})`);
        const five = statusesOf(r.outs, 5);
        expect(five.length === 1 && five[0] === grpc.status.OK, `${what}: stream 5 must go on and end OK, got ${JSON.stringify(five)}`);
        const outs5 = r.outs.filter((o) => o.stream === 5n);
        expect(outs5.some(hasOutput) && outs5[outs5.length - 1].event.case === 'status', `${what}: stream 5 must be served, its status last`);
        expect(r.outs.every((o) => o.stream !== 3n || o.event.case === 'status'), `${what}: a refused open must open nothing`);
      };
      if (ctx.caps.rpcs.includes('TranscribeStreams')) {
        type Ev = MessageInitShape<typeof TranscribeStreamsInputSchema>['event'];
        const s = await synth(ctx, 'Hello realtime world.');
        expect(!s.error, `Synthesize failed: ${s.error?.details}`);
        const rate = s.msgs[0].sampleRateHz;
        const pcm = pcmOf(s.msgs);
        const silence = new Uint8Array(Math.round(rate * 0.5) * 2);
        const config = { input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: rate } };
        const call = ctx.client.transcribeStreams(md());
        const w = (...inputs: [number, Ev][]) =>
          call.write(create(TranscribeStreamsRequestSchema, { inputs: inputs.map(([stream, event]) => ({ stream: BigInt(stream), event })) }));
        const r = await drive(call as never,
          () => w([1, { case: 'open', value: { config } }], [1, { case: 'end', value: {} }]),
          // 1 again (ended), 5, 3 (below 5), audio for 5, and a late cancel of 1 (ignored).
          () => w([1, { case: 'open', value: { config } }], [5, { case: 'open', value: { config } }], [3, { case: 'open', value: { config } }],
            [5, { case: 'audio', value: silence }], [5, { case: 'audio', value: pcm }], [5, { case: 'audio', value: silence }], [1, { case: 'cancel', value: {} }]));
        check('TranscribeStreams', r, (o) => o.event.case === 'committed' && !!(o.event.value as { text: string }).text);
      }
      if (ctx.caps.rpcs.includes('SynthesizeStreams')) {
        type Ev = MessageInitShape<typeof SynthesizeStreamsInputSchema>['event'];
        const config = { model: ctx.opts.speechModel ?? '', language: 'en' };
        const plenty = 0xffffffff;
        const call = ctx.client.synthesizeStreams(md());
        const w = (...inputs: [number, Ev][]) =>
          call.write(create(SynthesizeStreamsRequestSchema, { inputs: inputs.map(([stream, event]) => ({ stream: BigInt(stream), event })) }));
        const r = await drive(call as never,
          () => w([1, { case: 'open', value: { config, credit: plenty } }], [1, { case: 'text', value: 'Hi.' }], [1, { case: 'end', value: {} }]),
          // 1 again (ended), 5, 3 (below 5), text for 5, and a late credit and cancel of 1 (ignored).
          () => w([1, { case: 'open', value: { config, credit: plenty } }], [5, { case: 'open', value: { config, credit: plenty } }],
            [3, { case: 'open', value: { config, credit: plenty } }], [5, { case: 'text', value: 'Hello there.' }],
            [1, { case: 'credit', value: 1000 }], [1, { case: 'cancel', value: {} }]));
        check('SynthesizeStreams', r, (o) => o.event.case === 'chunk');
      }
      if (ctx.caps.rpcs.includes('GenerateStreams')) {
        type Ev = MessageInitShape<typeof GenerateStreamsInputSchema>['event'];
        const request = { messages: [{ role: Role.USER, content: 'Hello there' }] };
        const call = ctx.client.generateStreams(md());
        const w = (...inputs: [number, Ev][]) =>
          call.write(create(GenerateStreamsRequestSchema, { inputs: inputs.map(([stream, event]) => ({ stream: BigInt(stream), event })) }));
        const r = await drive(call as never,
          () => w([1, { case: 'open', value: { request } }]),
          // 1 again (ended), 5, 3 (below 5), and a late cancel of 1 (ignored).
          () => w([1, { case: 'open', value: { request } }], [5, { case: 'open', value: { request } }], [3, { case: 'open', value: { request } }], [1, { case: 'cancel', value: {} }]));
        check('GenerateStreams', r, (o) => o.event.case === 'finish');
      }
    },
  },
  {
    name: 'GenerateStreams (when listed): each generation on one call gets what a Generate call gives; a cancel or a failure ends one generation only',
    async run(ctx) {
      type Ev = MessageInitShape<typeof GenerateStreamsInputSchema>['event'];
      if (!ctx.caps.rpcs.includes('GenerateStreams')) return;
      const requests = [
        { messages: [{ role: Role.SYSTEM, content: 'You are terse.' }, { role: Role.USER, content: 'Hello there' }] },
        { messages: [{ role: Role.USER, content: 'say "two streams at once"' }] },
      ];
      // What each request gives on a Generate call of its own.
      const own = await Promise.all(requests.map((r) => collect<GenerateResponse>(ctx.client.generate(create(GenerateRequestSchema, r), md()))));
      for (const o of own) expect(!o.error, `Generate failed: ${o.error?.details}`);
      const call = ctx.client.generateStreams(md());
      const w = (...inputs: [number, Ev][]) =>
        call.write(create(GenerateStreamsRequestSchema, { inputs: inputs.map(([stream, event]) => ({ stream: BigInt(stream), event })) }));
      // 1 and 2 are served; 3 is cancelled as it opens; 4 has no messages.
      w([1, { case: 'open', value: { request: requests[0], requestId: 'contract-1' } }], [2, { case: 'open', value: { request: requests[1] } }]);
      w([3, { case: 'open', value: { request: requests[0] } }], [3, { case: 'cancel', value: {} }], [4, { case: 'open', value: { request: { messages: [] } } }]);
      const byStream = new Map<number, GenerateStreamsResponse['outputs']>();
      const statuses = new Map<number, { code: number; message: string }>();
      let ended = false;
      const error = await new Promise<grpc.ServiceError | null>((resolve) => {
        call.on('data', (m: GenerateStreamsResponse) => {
          for (const o of m.outputs) {
            const id = Number(o.stream);
            byStream.set(id, [...(byStream.get(id) ?? []), o]);
            if (o.event.case === 'status') statuses.set(id, o.event.value);
          }
          if (statuses.has(1) && statuses.has(2) && statuses.has(4) && !ended) {
            ended = true;
            // Half-closed after a moment: a status for the cancelled stream would have come by then.
            setTimeout(() => call.end(), 200);
          }
        });
        call.on('error', resolve);
        call.on('status', (st: grpc.StatusObject) => resolve(st.code === grpc.status.OK ? null : (st as unknown as grpc.ServiceError)));
      });
      expect(!error, `GenerateStreams failed: ${error?.details ?? error?.message}`);
      for (const id of [1, 2]) {
        const outs = byStream.get(id) ?? [];
        expect(statuses.get(id)?.code === grpc.status.OK, `stream ${id} must end OK, got ${JSON.stringify(statuses.get(id))}`);
        expect(outs[outs.length - 1].event.case === 'status', `stream ${id}: the status must come last`);
        const events = outs.slice(0, -1).map((o) => o.event);
        expect(events.filter((e) => e.case === 'finish').length === 1 && events[events.length - 1]?.case === 'finish', `stream ${id}: one finish, last before the status`);
        const text = events.flatMap((e) => (e.case === 'textDelta' ? [e.value] : [])).join('');
        expect(text.length > 0, `stream ${id}: no text`);
        if (ctx.opts.scriptedChat) {
          const expected = own[id - 1].msgs.flatMap((m) => (m.event.case === 'textDelta' ? [m.event.value] : [])).join('');
          expect(text === expected, `stream ${id}: "${text}" where a Generate call of its own gives "${expected}"`);
        }
      }
      expect(!statuses.has(3), 'a cancelled stream gets no status');
      expect(statuses.get(4)?.code === grpc.status.INVALID_ARGUMENT, `a request without messages fails its stream INVALID_ARGUMENT, got ${JSON.stringify(statuses.get(4))}`);
    },
  },
  {
    name: 'Generate: text deltas then exactly one finish with usage',
    async run(ctx) {
      const req = create(GenerateRequestSchema, { messages: [{ role: Role.SYSTEM, content: 'You are terse.' }, { role: Role.USER, content: 'Hello there' }] });
      const { msgs, error } = await collect<GenerateResponse>(ctx.client.generate(req, md()));
      expect(!error, `Generate failed: ${error?.details}`);
      const finishes = msgs.filter((m) => m.event.case === 'finish');
      expect(finishes.length === 1 && msgs[msgs.length - 1].event.case === 'finish', 'finish must come once, last');
      const text = msgs.flatMap((m) => (m.event.case === 'textDelta' ? [m.event.value] : [])).join('');
      expect(text.length > 0, 'no text');
      const f = msgs[msgs.length - 1].event;
      expect(f.case === 'finish' && f.value.reason === FinishReason.STOP && (f.value.usage?.outputTokens ?? 0) > 0, 'finish reason STOP with usage');
      if (ctx.opts.scriptedChat) expect(text === 'You said: Hello there', `scripted reply "${text}"`);
    },
  },
  {
    name: 'Generate: a tool call with JSON arguments',
    async run(ctx) {
      const tools = [{ name: 'book_table', description: 'Books a table', parametersJsonSchema: JSON.stringify({ type: 'object', properties: { guests: { type: 'integer' }, time: { type: 'string' } }, required: ['guests', 'time'] }) }];
      const req = create(GenerateRequestSchema, { messages: [{ role: Role.USER, content: 'Please book table, guests: 4, time is "19:30".' }], tools, toolChoice: 'book_table' });
      const { msgs, error } = await collect<GenerateResponse>(ctx.client.generate(req, md()));
      expect(!error, `Generate failed: ${error?.details}`);
      const calls = msgs.flatMap((m) => (m.event.case === 'toolCall' ? [m.event.value] : []));
      expect(calls.length >= 1 && calls[0].name === 'book_table' && calls[0].id, 'expected a book_table call with an id');
      const args = JSON.parse(calls[0].argumentsJson);
      expect(args && typeof args === 'object', 'arguments are not a JSON object');
      if (ctx.opts.scriptedChat) expect(args.guests === 4 && args.time === '19:30', `arguments ${calls[0].argumentsJson}`);
      const f = msgs[msgs.length - 1].event;
      expect(f.case === 'finish' && f.value.reason === FinishReason.TOOL_CALLS, 'finish reason TOOL_CALLS');
    },
  },
  {
    name: 'Generate: structured mode returns JSON matching the schema',
    async run(ctx) {
      const schema = {
        type: 'object',
        properties: {
          summary: { type: 'string' },
          data: { type: 'object', properties: { city: { type: 'object', properties: { value: { type: ['string', 'null'] }, rationale: { type: 'string' } }, required: ['value', 'rationale'] } }, required: ['city'] },
          criteria: { type: 'object', properties: { greeted: { type: 'object', properties: { result: { enum: ['success', 'failure', 'unknown'] }, rationale: { type: 'string' } }, required: ['result', 'rationale'] } }, required: ['greeted'] },
        },
        required: ['summary', 'data', 'criteria'],
      };
      const req = create(GenerateRequestSchema, {
        messages: [{ role: Role.USER, content: 'Hi, my city is Lyon and greeted: success.' }, { role: Role.ASSISTANT, content: 'Noted.' }],
        structured: { name: 'analysis', jsonSchema: JSON.stringify(schema) },
      });
      const { msgs, error } = await collect<GenerateResponse>(ctx.client.generate(req, md()));
      expect(!error, `Generate failed: ${error?.details}`);
      const text = msgs.flatMap((m) => (m.event.case === 'textDelta' ? [m.event.value] : [])).join('');
      let doc: { summary: unknown; data: { city: { value: unknown; rationale: unknown } }; criteria: { greeted: { result: unknown } } };
      try {
        doc = JSON.parse(text);
      } catch {
        throw new Violation(`structured output is not JSON: ${text.slice(0, 80)}`);
      }
      expect(typeof doc.summary === 'string', 'summary must be a string');
      expect(doc.data?.city && 'value' in doc.data.city && typeof doc.data.city.rationale === 'string', 'data.city must have value and rationale');
      expect(['success', 'failure', 'unknown'].includes(doc.criteria?.greeted?.result as string), 'criteria.greeted.result must be one of the enum');
      if (ctx.opts.scriptedChat) expect(doc.data.city.value === 'Lyon' && doc.criteria.greeted.result === 'success', `scripted analysis ${text}`);
    },
  },
  {
    name: 'Generate refuses an unknown model',
    async run(ctx) {
      const req = create(GenerateRequestSchema, { model: 'no-such-model', messages: [{ role: Role.USER, content: 'Hi' }] });
      expectCode((await collect(ctx.client.generate(req, md()))).error, grpc.status.NOT_FOUND, 'unknown chat model');
    },
  },
];

/**
 * The voice-design model to check (the default one, else the first listed) and the speech
 * model its voices are for: the speech model of the same name when there is one (an engine's
 * name, e.g. `espeak`), else the default speech model.
 */
function designModels(caps: CapabilitiesResponse): { design: string; speech: string } | null {
  const designers = caps.models.filter((m) => m.kind === ModelKind.VOICE_DESIGN);
  const d = designers.find((m) => m.isDefault) ?? designers[0];
  if (!d) return null;
  const speech = caps.models.find((m) => m.kind === ModelKind.SPEECH && m.name === d.name);
  return { design: d.name, speech: speech?.name ?? '' };
}

function design(ctx: Ctx, req: MessageInitShape<typeof DesignVoiceRequestSchema>): Promise<DesignVoiceResponse> {
  return unary<DesignVoiceResponse>((cb) => ctx.client.designVoice(create(DesignVoiceRequestSchema, req), md(), {}, cb));
}

function saveVoice(ctx: Ctx, req: MessageInitShape<typeof SaveVoiceRequestSchema>): Promise<SaveVoiceResponse> {
  return unary<SaveVoiceResponse>((cb) => ctx.client.saveVoice(create(SaveVoiceRequestSchema, req), md(), {}, cb));
}

async function codeOf(p: Promise<unknown>): Promise<grpc.ServiceError | null> {
  try {
    await p;
    return null;
  } catch (err) {
    return err as grpc.ServiceError;
  }
}

checks.push(
  {
    name: 'DesignVoice: distinct candidates with previews, whose voices the speech model speaks with (after SaveVoice too); or UNIMPLEMENTED (not offered here, or by the provider behind it)',
    async run(ctx) {
      const models = designModels(ctx.caps);
      if (!ctx.caps.rpcs.includes('DesignVoice') || !models) {
        expectCode(await codeOf(design(ctx, { description: 'a calm voice' })), grpc.status.UNIMPLEMENTED, 'DesignVoice on a backend that does not list it');
        return;
      }
      // Listed, and still not offered: a designer that relies on a provider which turns out not
      // to have voice design answers UNIMPLEMENTED (it cannot know before asking).
      const first = await codeOf(design(ctx, { description: 'a calm voice', count: 1, model: models.design }));
      if (first?.code === grpc.status.UNIMPLEMENTED) return;
      expect(!first, `DesignVoice failed: ${first && grpc.status[first.code]}: ${first?.details}`);
      const res = await design(ctx, { description: 'a calm older woman with a low voice', count: 3, language: 'en', model: models.design });
      expect(res.voices.length >= 1 && res.voices.length <= 3, `asked 3 candidates, got ${res.voices.length}`);
      expect(new Set(res.voices.map((v) => v.voiceId)).size === res.voices.length, 'candidates share a voice_id');
      for (const [i, v] of res.voices.entries()) {
        expect(v.voiceId, `candidate ${i} has no voice_id`);
        expect(v.sampleRateHz >= 8000, `candidate ${i}: sample rate ${v.sampleRateHz}`);
        expect(v.encoding === AudioEncoding.PCM_S16LE || v.encoding === AudioEncoding.UNSPECIFIED, `candidate ${i}: asked PCM, got encoding ${v.encoding}`);
        expect(v.audio.length > 0 && v.audio.length % 2 === 0, `candidate ${i}: ${v.audio.length} bytes of audio`);
        expect(Math.abs(v.durationMs - (v.audio.length / 2 / v.sampleRateHz) * 1000) < 1, `candidate ${i}: duration_ms ${v.durationMs} disagrees with its audio`);
        expect(v.text.trim(), `candidate ${i}: no preview text`);
        expect(v.summary.trim(), `candidate ${i}: no summary of what the description became`);
      }
      const voice = res.voices[0]!.voiceId;
      const spoken = await synth({ ...ctx, opts: { ...ctx.opts, speechModel: models.speech } }, 'Hello there.', { referenceId: voice });
      expect(!spoken.error, `Synthesize with the designed voice ${voice} on "${models.speech}" failed: ${spoken.error?.details}`);
      checkChunks(spoken.msgs, 'Hello there.', 'Synthesize with a designed voice');
      const kept = await saveVoice(ctx, { voiceId: voice, name: 'Contract kit voice', description: 'a calm older woman with a low voice', model: models.design });
      expect(kept.voiceId, 'SaveVoice answered no voice_id');
      const again = await synth({ ...ctx, opts: { ...ctx.opts, speechModel: models.speech } }, 'Hello there.', { referenceId: kept.voiceId });
      expect(!again.error, `Synthesize with the saved voice ${kept.voiceId} failed: ${again.error?.details}`);
    },
  },
  {
    name: 'DesignVoice refuses an empty description, a count over 4 and an unknown model; SaveVoice an unknown voice',
    async run(ctx) {
      const models = designModels(ctx.caps);
      if (!ctx.caps.rpcs.includes('DesignVoice') || !models) return;
      expectCode(await codeOf(design(ctx, { description: '  ', model: models.design })), grpc.status.INVALID_ARGUMENT, 'empty description');
      expectCode(await codeOf(design(ctx, { description: 'a calm voice', count: 5, model: models.design })), grpc.status.INVALID_ARGUMENT, 'count 5');
      expectCode(await codeOf(design(ctx, { description: 'a calm voice', model: 'no-such-model' })), grpc.status.NOT_FOUND, 'unknown design model');
      const unknown = await codeOf(saveVoice(ctx, { voiceId: 'no-such-voice-0000', model: models.design }));
      expectCode(unknown, grpc.status.NOT_FOUND, 'SaveVoice of an unknown voice');
      expect(unknown!.details === 'Reference not found', `unknown voice message is "${unknown!.details}"`);
    },
  },
);

export interface CheckResult {
  name: string;
  ok: boolean;
  error?: string;
  ms: number;
}

/** Connects to `address`, runs every check (or the ones whose name matches `only`). */
export async function runKit(address: string, opts: KitOptions = {}, onResult?: (r: CheckResult) => void): Promise<CheckResult[]> {
  const client = createGrpcClient(address);
  const results: CheckResult[] = [];
  try {
    await new Promise<void>((resolve, reject) => client.waitForReady(Date.now() + 5000, (err) => (err ? reject(err) : resolve())));
    const caps = await unary<CapabilitiesResponse>((cb) => client.capabilities(create(CapabilitiesRequestSchema), md(), {}, cb));
    const ctx: Ctx = { client, opts, caps };
    for (const c of checks) {
      const t0 = performance.now();
      let r: CheckResult;
      try {
        await c.run(ctx);
        r = { name: c.name, ok: true, ms: performance.now() - t0 };
      } catch (err) {
        const e = err as grpc.ServiceError;
        r = { name: c.name, ok: false, error: e instanceof Violation ? e.message : `${e.code !== undefined ? grpc.status[e.code] + ': ' : ''}${e.details ?? e.message}`, ms: performance.now() - t0 };
      }
      results.push(r);
      onResult?.(r);
    }
  } finally {
    client.close();
  }
  return results;
}
