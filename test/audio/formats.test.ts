import t from 'tap';
import { ServiceError } from '../../src/errors.ts';
import { checkFormat, contentTypeFor, defaultSampleRateHz, parseOutputFormat, snapMp3Bitrate } from '../../src/audio/index.ts';

t.test('allowed sample rates per format', async (t) => {
  for (const r of [8000, 16000, 24000, 32000, 44100, 48000]) {
    t.doesNotThrow(() => checkFormat('wav', r), `wav ${r}`);
    t.doesNotThrow(() => checkFormat('pcm', r), `pcm ${r}`);
  }
  for (const r of [32000, 44100]) t.doesNotThrow(() => checkFormat('mp3', r, 128), `mp3 ${r}`);
  t.doesNotThrow(() => checkFormat('opus', 48000));
});

t.test('refused sample rates are a 400 naming rate and format', async (t) => {
  const cases: [Parameters<typeof checkFormat>[0], number, string][] = [
    ['wav', 22050, 'audio/wav'],
    ['pcm', 22050, 'audio/pcm'],
    ['pcm', 11025, 'audio/pcm'],
    ['mp3', 22050, 'audio/mpeg'],
    ['mp3', 24000, 'audio/mpeg'],
    ['mp3', 48000, 'audio/mpeg'],
    ['mp3', 16000, 'audio/mpeg'],
    ['opus', 44100, 'audio/opus'],
    ['opus', 24000, 'audio/opus'],
  ];
  for (const [format, rate, mime] of cases) {
    try {
      checkFormat(format, rate);
      t.fail(`${format} ${rate} accepted`);
    } catch (err) {
      t.ok(err instanceof ServiceError, 'ServiceError');
      t.equal((err as ServiceError).code, 'bad_request');
      t.equal((err as ServiceError).status, 400);
      t.match((err as Error).message, new RegExp(`^Invalid sample rate ${rate} for format ${mime.replace('/', '\\/')}`));
    }
  }
});

t.test('native mp3 bitrate must be a tier', async (t) => {
  for (const b of [64, 128, 192]) t.doesNotThrow(() => checkFormat('mp3', 44100, b));
  for (const b of [32, 96, 256, 320]) t.throws(() => checkFormat('mp3', 44100, b), { code: 'bad_request' });
});

t.test('compat mp3 bitrate snaps up to a tier; above 192 is refused', async (t) => {
  t.equal(snapMp3Bitrate(32), 64);
  t.equal(snapMp3Bitrate(64), 64);
  t.equal(snapMp3Bitrate(96), 128);
  t.equal(snapMp3Bitrate(128), 128);
  t.equal(snapMp3Bitrate(160), 192);
  t.equal(snapMp3Bitrate(192), 192);
  t.throws(() => snapMp3Bitrate(193), { code: 'bad_request' });
  t.throws(() => snapMp3Bitrate(320), { code: 'bad_request' });
  t.throws(() => snapMp3Bitrate(0), { code: 'bad_request' });
  t.throws(() => snapMp3Bitrate(Number.NaN), { code: 'bad_request' });
});

t.test('content types and defaults', async (t) => {
  t.equal(contentTypeFor('mp3', 44100), 'audio/mpeg');
  t.equal(contentTypeFor('wav', 16000), 'audio/wav');
  t.equal(contentTypeFor('pcm', 24000), 'audio/pcm;rate=24000');
  t.equal(contentTypeFor('opus', 48000), 'audio/ogg;codecs=opus');
  t.equal(defaultSampleRateHz('mp3'), 44100);
  t.equal(defaultSampleRateHz('pcm'), 44100);
  t.equal(defaultSampleRateHz('opus'), 48000);
});

t.test('family-C output_format: parse, then check rate, then snap bitrate', async (t) => {
  t.same(parseOutputFormat('mp3_44100_128'), { format: 'mp3', sampleRateHz: 44100, bitrateKbps: 128 });
  t.same(parseOutputFormat('pcm_16000'), { format: 'pcm', sampleRateHz: 16000 });
  t.same(parseOutputFormat('opus_48000_64'), { format: 'opus', sampleRateHz: 48000, bitrateKbps: 64 });
  t.same(parseOutputFormat('wav_24000'), { format: 'wav', sampleRateHz: 24000 });
  for (const bad of ['ulaw_8000', 'alaw_8000', 'mp3', 'pcm_16000_16', 'flac_44100', 'mp3_44100_128_x', '', 'MP3_44100_128']) {
    t.throws(() => parseOutputFormat(bad), { code: 'bad_request' }, bad);
  }
  // Parsed but refused by the rate rules (the 22.05 kHz family, mp3 at 24 kHz).
  for (const refused of ['mp3_22050_32', 'pcm_22050', 'mp3_24000_48']) {
    const p = parseOutputFormat(refused);
    t.throws(() => checkFormat(p.format, p.sampleRateHz), { code: 'bad_request' }, refused);
  }
  const p = parseOutputFormat('mp3_44100_96');
  t.equal(snapMp3Bitrate(p.bitrateKbps!), 128);
  t.throws(() => snapMp3Bitrate(parseOutputFormat('mp3_44100_320').bitrateKbps!), { code: 'bad_request' });
});
