// Family C building blocks that the WebSocket routes will reuse: character timings,
// output_format, model ids, truthy options, the error map.
import t from 'tap';
import { ServiceError } from '../../src/errors.ts';
import { CharacterTimeline, parseElevenLabsFormat, restAlignment, speechModelFor, toElevenLabsError, truthy, wsAlignment } from '../../src/compat/elevenlabs/common.ts';

/** What `f` throws (undefined when it does not). */
function thrown(f: () => unknown): unknown {
  try {
    f();
  } catch (err) {
    return err;
  }
  return undefined;
}

t.test('CharacterTimeline: words spread over their segment, gaps over the pause, tail to the end', async (t) => {
  const tl = new CharacterTimeline('Hi, you!');
  const a = tl.push({ text: 'Hi,', startMs: 100, endMs: 400 });
  t.same(a.map((c) => [c.char, c.startMs, c.endMs]), [['H', 100, 200], ['i', 200, 300], [',', 300, 400]]);
  const b = tl.push({ text: 'you', startMs: 500, endMs: 650 });
  t.same(b.map((c) => [c.char, c.startMs, c.endMs]), [[' ', 400, 500], ['y', 500, 550], ['o', 550, 600], ['u', 600, 650]]);
  const c = tl.finish(700);
  t.same(c.map((x) => [x.char, x.startMs, x.endMs]), [['!', 650, 700]]);
  t.same(restAlignment(a)!.character_start_times_seconds, [0.1, 0.2, 0.3], 'seconds');
  t.same(wsAlignment(b), { chars: [' ', 'y', 'o', 'u'], charStartTimesMs: [400, 500, 550, 600], charDurationsMs: [100, 50, 50, 50] });
  t.equal(restAlignment([]), null);
});

t.test('CharacterTimeline: millisecond rounding, unmatched segments, code points, offsets', async (t) => {
  const tl = new CharacterTimeline('abc 12 x', 1000);
  const first = tl.push({ text: 'abc', startMs: 1000.4, endMs: 1100.6 });
  for (const c of first) t.ok(Number.isInteger(c.startMs) && Number.isInteger(c.endMs), 'whole ms');
  t.same(tl.push({ text: 'twelve', startMs: 1200, endMs: 1300 }), [], 'normalized text not in the input: timed later');
  const x = tl.push({ text: 'x', startMs: 1400, endMs: 1450 });
  t.equal(x.map((c) => c.char).join(''), ' 12 x', 'skipped characters come with the next match');
  for (let i = 1; i < x.length; i++) t.ok(x[i]!.startMs >= x[i - 1]!.endMs, 'no overlap');
  const emoji = new CharacterTimeline('👋 hi');
  const all = [...emoji.push({ text: '👋', startMs: 0, endMs: 100 }), ...emoji.push({ text: 'hi', startMs: 150, endMs: 250 }), ...emoji.finish(300)];
  t.same(all.map((c) => c.char), ['👋', ' ', 'h', 'i']);
});

t.test('output_format rules', async (t) => {
  t.same(parseElevenLabsFormat(undefined), { format: 'mp3', sampleRateHz: 44100, mp3BitrateKbps: 128 });
  t.same(parseElevenLabsFormat('mp3_44100_32'), { format: 'mp3', sampleRateHz: 44100, mp3BitrateKbps: 64 });
  t.same(parseElevenLabsFormat('mp3_32000_96'), { format: 'mp3', sampleRateHz: 32000, mp3BitrateKbps: 128 });
  t.same(parseElevenLabsFormat('mp3_44100_192'), { format: 'mp3', sampleRateHz: 44100, mp3BitrateKbps: 192 });
  t.same(parseElevenLabsFormat('opus_48000_128'), { format: 'opus', sampleRateHz: 48000 });
  t.same(parseElevenLabsFormat('pcm_16000'), { format: 'pcm', sampleRateHz: 16000 });
  t.same(parseElevenLabsFormat('wav_8000'), { format: 'wav', sampleRateHz: 8000 });
  // The rate is the native rule's business: parsed here, refused there as provider_error.
  t.same(parseElevenLabsFormat('pcm_22050'), { format: 'pcm', sampleRateHz: 22050 });
  for (const bad of ['ulaw_8000', 'alaw_8000', 'aac_44100', 'mp3_44100_320', 'pcm', 'wav_16000_64']) {
    t.match(thrown(() => parseElevenLabsFormat(bad)), { status: 'invalid_request', httpStatus: 400 }, bad);
  }
});

t.test('model ids', async (t) => {
  t.equal(speechModelFor(undefined), 's2.1-pro');
  t.equal(speechModelFor('eleven_multilingual_v2'), 's2.1-pro');
  t.equal(speechModelFor('eleven_monolingual_v1'), 's2.1-pro');
  t.equal(speechModelFor('service/s2-pro'), 's2-pro');
  t.equal(speechModelFor('service/s1'), 's1');
  for (const bad of ['undefined', 'null', '', 'service/transcribe-1', 'tts-1', 'eleven_']) t.match(thrown(() => speechModelFor(bad)), { status: 'model_not_found', httpStatus: 400 }, bad);
});

t.test('truthy options', async (t) => {
  for (const v of ['false', 'False', '0', 'off', '', '[]']) t.equal(truthy(v), false, v);
  for (const v of ['true', 'True', '1', 'on', 'all', 'https://x']) t.equal(truthy(v), true, v);
  t.equal(truthy(undefined), false);
  t.equal(truthy(['false', 'pii']), true, 'any repeated value');
});

t.test('native errors map to the family envelope', async (t) => {
  const e = toElevenLabsError(new ServiceError('bad_request', 'Reference not found'));
  t.same([e.status, e.body], [400, { detail: { status: 'provider_error', message: 'Reference not found' } }]);
  t.same(toElevenLabsError(new ServiceError('payment_required', 'Out of credit')).body, { detail: { status: 'provider_error', message: 'Out of credit' } });
  t.equal(toElevenLabsError(new ServiceError('payload_too_large', 'big')).status, 413);
  t.same(toElevenLabsError(new ServiceError('rate_limited', 'slow down')).body, { detail: { status: 'rate_limit_error', message: 'slow down' } });
  const up = toElevenLabsError(new ServiceError('upstream', 'backend failed'));
  t.same([up.status, up.body.detail, up.headers['x-should-retry']], [502, { status: 'upstream_error', message: 'backend failed' }, 'false']);
  const internal = toElevenLabsError(new Error('secret cause'));
  t.same(internal.body, { detail: { status: 'provider_error', message: 'Internal server error' } }, 'the cause never reaches the client');
});
