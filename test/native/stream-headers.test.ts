// The native backend answers a streaming call's headers as soon as the call starts, before any
// response message: a grpc-js client keeps every message it writes for a transparent retry
// until the headers arrive, so a recognizer that answered only at the first speech event had
// the platform hold every caller frame until then.
import { create } from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import t from 'tap';
import { startBackend } from '../../native/server.ts';
import { AudioEncoding, SynthesizeStreamRequestSchema, TranscribeStreamRequestSchema } from '../../src/gen/inference/v1/inference_pb.ts';
import { createGrpcClient } from '../../src/inference/grpc-service.ts';

async function setup(t: { teardown(fn: () => unknown): void }) {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
  const client = createGrpcClient(backend.address);
  t.teardown(async () => {
    client.close();
    await backend.close();
  });
  return client;
}

/** Resolves with what the call emitted first: its headers, a message, or its status. */
function firstEvent(call: grpc.ClientDuplexStream<unknown, unknown>): Promise<string> {
  call.on('error', () => {}); // the test cancels the call
  return new Promise((resolve) => {
    setTimeout(() => resolve('nothing within 5 s'), 5000).unref();
    call.once('metadata', () => resolve('metadata'));
    call.once('data', () => resolve('data'));
    call.once('status', (s: grpc.StatusObject) => resolve(`status ${s.code}`));
  });
}

t.test('TranscribeStream: headers arrive before any speech, with silence only sent', async (t) => {
  const client = await setup(t);
  const call = client.transcribeStream() as unknown as grpc.ClientDuplexStream<unknown, unknown>;
  const first = firstEvent(call);
  call.write(create(TranscribeStreamRequestSchema, { event: { case: 'config', value: { model: 'transcribe-1', language: 'en', input: { encoding: AudioEncoding.PCM_S16LE, sampleRateHz: 16000 } } } }));
  call.write(create(TranscribeStreamRequestSchema, { event: { case: 'audio', value: new Uint8Array(3200) } }));
  t.equal(await first, 'metadata', 'the headers come first, with no recognizer event to send');
  call.cancel();
});

t.test('SynthesizeStream: headers arrive before any text is sent', async (t) => {
  const client = await setup(t);
  const call = client.synthesizeStream() as unknown as grpc.ClientDuplexStream<unknown, unknown>;
  const first = firstEvent(call);
  call.write(create(SynthesizeStreamRequestSchema, { event: { case: 'config', value: { model: 's2.1-pro' } } }));
  t.equal(await first, 'metadata');
  call.cancel();
});
