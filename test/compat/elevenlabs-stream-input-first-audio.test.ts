// docs/api/compat.md, "Family C sockets": "With alignment on, the first audio of a
// turn arrives only after its first text chunk is fully synthesized." Driven on one speech
// context (the turn of a stream-input socket, or one context of multi-stream-input) with a
// backend stand-in whose audio chunks the test releases one at a time, so what the client has
// been sent is read at each step, without timing.
import t from 'tap';
import { SpeechContext } from '../../src/compat/elevenlabs/ws-speech-context.ts';
import type { Prepared } from '../../src/speech/tts.ts';
import { gatedSynthesis } from '../fixtures/gated-synthesis.ts';
import { until } from '../speech/tts-helpers.ts';

function context(sync: boolean) {
  const g = gatedSynthesis();
  const sent: Record<string, unknown>[] = [];
  const prepared = {
    req: { model: 's2.1-pro', format: 'pcm', sampleRateHz: 16000, characters: 0, body: { text: '' } },
    input: { text: '' },
    span: { end() {}, child: () => ({ traceparent: undefined, span: { end() {} } }) },
  } as unknown as Prepared;
  const ctx = new SpeechContext({
    tts: g.tts,
    prepared,
    caller: { teamId: 'team', requestId: 'req', signal: new AbortController().signal },
    syncAlignment: sync,
    schedule: [120],
    send: (f) => {
      sent.push(f);
      return undefined;
    },
    onError: (err) => { throw err; },
  });
  return { g, ctx, sent, audio: () => sent.filter((f) => typeof f.audio === 'string') };
}

t.test('with alignment on, the first audio of a turn arrives only after its first text chunk is fully synthesized', async (t) => {
  const { g, ctx, sent, audio } = context(true);
  ctx.append('Hello there, friend. ');
  ctx.flush();
  await g.parked();
  await g.next();
  t.equal(sent.length, 0, 'after the first of three chunks: nothing sent');
  await g.next();
  t.equal(sent.length, 0, 'after the second: still nothing');
  await g.next();
  t.equal(sent.length, 0, 'after the third: still nothing while the synthesis has not ended');
  g.end();
  t.ok(await until(() => audio().length === 3), 'the whole first chunk is synthesized: its three audio frames go out');
  t.same(audio().map((f) => Buffer.from(f.audio as string, 'base64').readInt16LE(0)), [1000, 1001, 1002], 'in order');
  t.ok(audio()[0]!.alignment, 'with their alignment');

  // The turn's later text chunks stream as they are synthesized.
  ctx.append('How are you today? ');
  ctx.flush();
  await g.parked();
  await g.next();
  t.equal(audio().length, 4, 'a later chunk\'s first audio is sent before its synthesis ends');
  const finished = ctx.finish();
  await g.rest();
  t.equal(await finished, true);
  t.equal(audio().length, 6);
  t.same(g.texts, ['Hello there, friend. ', 'How are you today? ']);
});

t.test('without alignment, the first audio is sent as soon as its chunk is synthesized', async (t) => {
  const { g, ctx, audio } = context(false);
  ctx.append('Hello there, friend. ');
  ctx.flush();
  await g.parked();
  await g.next();
  t.equal(audio().length, 1, 'after the first of three chunks: its audio is out');
  t.notOk('alignment' in audio()[0]!, 'audio only');
  const finished = ctx.finish();
  await g.rest();
  t.equal(await finished, true);
  t.equal(audio().length, 3);
});
