// The native backend's shared calls (TranscribeStreams, SynthesizeStreams) over many streams:
// stream ids increase on a call (docs/inference.md), so an `open` with an id not greater than
// every earlier one (a stream that ended, one that failed to open, a gap below the highest) is
// refused with INVALID_ARGUMENT for that id, while late inputs for ended streams are ignored and
// the call keeps serving its other streams.
import * as grpc from '@grpc/grpc-js';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import t, { type Test } from 'tap';
import { startBackend } from '../../native/server.ts';
import { createGrpcClient } from '../../src/inference/grpc-service.ts';
import {
  AudioEncoding,
  SynthesizeRequestSchema,
  SynthesizeStreamsInputSchema,
  SynthesizeStreamsRequestSchema,
  TranscribeStreamsInputSchema,
  TranscribeStreamsRequestSchema,
  type AudioChunk,
} from '../../src/gen/inference/v1/inference_pb.ts';

type Out = { stream: bigint; event: { case: string | undefined; value?: unknown } };

/** A shared call's outputs as they come, and a wait for a condition on them. */
function watch(call: grpc.ClientDuplexStream<unknown, { outputs: Out[] }>) {
  const outs: Out[] = [];
  let wake = () => {};
  let ended: { error: grpc.ServiceError | null } | null = null;
  call.on('data', (m: { outputs: Out[] }) => {
    outs.push(...m.outputs);
    wake();
  });
  call.on('error', (error: grpc.ServiceError) => {
    ended = { error };
    wake();
  });
  call.on('status', (st: grpc.StatusObject) => {
    ended ??= { error: st.code === grpc.status.OK ? null : (st as unknown as grpc.ServiceError) };
    wake();
  });
  const statuses = (id: number) =>
    outs.flatMap((o) => (o.stream === BigInt(id) && o.event.case === 'status' ? [(o.event.value as { code: number }).code] : []));
  const until = async (cond: () => boolean) => {
    while (!cond()) {
      if (ended) throw new Error(`the call ended first: ${ended.error?.details ?? 'OK'}`);
      await new Promise<void>((r) => (wake = r));
    }
  };
  const end = async () => {
    call.end();
    while (!ended) await new Promise<void>((r) => (wake = r));
    return ended.error;
  };
  return { outs, statuses, until, end };
}

const { OK, INVALID_ARGUMENT, RESOURCE_EXHAUSTED } = grpc.status;

/** A client of a native backend of its own (synthetic engine), both closed with the test. */
async function clientOf(t: Test, o: { maxConcurrentCalls?: number } = {}) {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic', ...o });
  const client = createGrpcClient(backend.address);
  t.teardown(async () => {
    client.close();
    await backend.close();
  });
  return client;
}

t.test('TranscribeStreams: many streams on one call; an open with an id not greater is refused, the rest goes on', async (t) => {
  const client = await clientOf(t, { maxConcurrentCalls: 3 });
  type Ev = MessageInitShape<typeof TranscribeStreamsInputSchema>['event'];
  const call = client.transcribeStreams();
  const w = (...inputs: [number, Ev][]) =>
    call.write(create(TranscribeStreamsRequestSchema, { inputs: inputs.map(([stream, event]) => ({ stream: BigInt(stream), event })) }));
  const c = watch(call as never);
  const config = { input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: 16000 } };
  const open = (id: number): [number, Ev] => [id, { case: 'open', value: { config } }];
  const silence: Ev = { case: 'audio', value: new Uint8Array(16000) };

  // 1-3 take the three slots; 4 finds none (its open fails), so it has ended: its audio is
  // ignored and opening it again is refused.
  w(open(1), open(2), open(3), open(4), [4, silence], open(4));
  w([1, silence], [1, { case: 'end', value: {} }], [2, { case: 'end', value: {} }], [3, { case: 'end', value: {} }]);
  await c.until(() => [1, 2, 3].every((id) => c.statuses(id).length));
  t.same(c.statuses(4), [RESOURCE_EXHAUSTED, INVALID_ARGUMENT], 'stream 4: no slot, then its id may not be opened again');

  // Forty more streams, two at a time, each opened, fed and ended.
  for (let id = 10; id < 50; id += 2) {
    w(open(id), open(id + 1), [id, silence], [id + 1, silence], [id, { case: 'end', value: {} }], [id + 1, { case: 'end', value: {} }]);
    await c.until(() => c.statuses(id).length > 0 && c.statuses(id + 1).length > 0);
  }
  // Late inputs for ended streams are ignored; opening an ended id again, or an id below the
  // highest one used, is refused; a new id whose first input is not `open` is refused once and
  // then counts as used.
  w([17, { case: 'cancel', value: {} }], [17, silence], open(17), open(12), open(45));
  w([60, silence], [60, { case: 'commit', value: {} }], open(55), open(61), [61, silence]);
  // Half-closing the call ends its open streams, then the call.
  const error = await c.end();
  t.equal(error, null, 'the call ends OK');

  for (const id of [1, 2, 3]) t.same(c.statuses(id), [OK], `stream ${id} ends OK`);
  const firstForty = Array.from({ length: 40 }, (_, i) => 10 + i);
  t.same(firstForty.filter((id) => ![12, 17, 45].includes(id)).map((id) => c.statuses(id)), firstForty.filter((id) => ![12, 17, 45].includes(id)).map(() => [OK]), 'each of the forty streams ends OK, once');
  for (const id of [12, 17, 45]) t.same(c.statuses(id), [OK, INVALID_ARGUMENT], `stream ${id}: OK, then its open again refused`);
  t.same(c.statuses(60), [INVALID_ARGUMENT], 'a new id whose first input is not open: one refusal, then nothing');
  t.same(c.statuses(55), [INVALID_ARGUMENT], 'an id below one already used is refused');
  t.same(c.statuses(61), [OK], 'a stream opened after the refusals is served (ended by the half-close)');
  const refused = c.outs.filter((o) => o.event.case === 'status' && (o.event.value as { code: number }).code === INVALID_ARGUMENT);
  t.ok(refused.every((o) => /increase|first input/.test((o.event.value as { message: string }).message)), 'the refusals say why');
});

t.test('SynthesizeStreams: many streams on one call; an open with an id not greater is refused, the rest goes on', async (t) => {
  const client = await clientOf(t);
  type Ev = MessageInitShape<typeof SynthesizeStreamsInputSchema>['event'];
  const call = client.synthesizeStreams();
  const w = (...inputs: [number, Ev][]) =>
    call.write(create(SynthesizeStreamsRequestSchema, { inputs: inputs.map(([stream, event]) => ({ stream: BigInt(stream), event })) }));
  const c = watch(call as never);
  const open = (id: number): [number, Ev] => [id, { case: 'open', value: { config: create(SynthesizeRequestSchema, { language: 'en' }), credit: 0xffffffff } }];
  const say = (id: number): [number, Ev][] => [[id, { case: 'text', value: 'Hi.' }], [id, { case: 'end', value: {} }]];

  for (let id = 1; id <= 40; id += 4) {
    w(open(id), open(id + 1), open(id + 2), open(id + 3), ...say(id), ...say(id + 1), ...say(id + 2), ...say(id + 3));
    await c.until(() => [0, 1, 2, 3].every((k) => c.statuses(id + k).length > 0));
  }
  w([7, { case: 'credit', value: 1000 }], [7, { case: 'cancel', value: {} }], [7, { case: 'text', value: 'late' }], open(7), open(3), open(40));
  w([50, { case: 'text', value: 'no open' }], [50, { case: 'end', value: {} }], open(44), open(51), ...say(51));
  const error = await c.end();
  t.equal(error, null, 'the call ends OK');

  const ids = Array.from({ length: 40 }, (_, i) => i + 1).filter((id) => ![3, 7, 40].includes(id));
  t.same(ids.map((id) => c.statuses(id)), ids.map(() => [OK]), 'each of the forty streams ends OK, once');
  for (const id of [3, 7, 40]) t.same(c.statuses(id), [OK, INVALID_ARGUMENT], `stream ${id}: OK, then its open again refused`);
  t.same(c.statuses(50), [INVALID_ARGUMENT], 'a new id whose first input is not open: one refusal, then nothing');
  t.same(c.statuses(44), [INVALID_ARGUMENT], 'an id below one already used is refused');
  t.same(c.statuses(51), [OK], 'a stream opened after the refusals is served');
  const chunks = c.outs.filter((o) => o.stream === 51n && o.event.case === 'chunk').map((o) => o.event.value as AudioChunk);
  t.ok(chunks.length > 0 && chunks.every((ch, i) => ch.sequence === BigInt(i)), 'stream 51 has its audio, in sequence');
  for (const id of [3, 7, 40, 44, 50]) {
    const outs = c.outs.filter((o) => o.stream === BigInt(id));
    const lastOk = outs.findIndex((o) => o.event.case === 'status' && (o.event.value as { code: number }).code === OK);
    t.ok(outs.slice(lastOk + 1).every((o) => o.event.case === 'status'), `stream ${id}: nothing but the refusal after its end`);
  }
});
