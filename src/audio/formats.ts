import { ServiceError } from '../errors.ts';

/** Output formats of the speech API. PCM everywhere is mono, 16-bit, little-endian. */
export type OutputFormat = 'mp3' | 'wav' | 'pcm' | 'opus';

export const OUTPUT_FORMATS: readonly OutputFormat[] = ['mp3', 'wav', 'pcm', 'opus'];

/**
 * Sample rates the public API accepts per format (docs/api/speech.md, docs/api/compat.md). 22.05 kHz is refused
 * everywhere; 48 kHz PCM/WAV is accepted because the family-C clients offer `pcm_48000`.
 */
export const ALLOWED_SAMPLE_RATES: Readonly<Record<OutputFormat, readonly number[]>> = {
  wav: [8000, 16000, 24000, 32000, 44100, 48000],
  pcm: [8000, 16000, 24000, 32000, 44100, 48000],
  mp3: [32000, 44100],
  opus: [48000],
};

/**
 * Rates the encoders can produce, a superset of the public rules for internal callers
 * (telephony, previews). LAME runs MPEG-1 at 32/44.1/48 kHz, MPEG-2 at 16/24 kHz and
 * MPEG-2.5 at 8 kHz; Ogg Opus is always 48 kHz here.
 */
export const ENCODER_SAMPLE_RATES: Readonly<Record<OutputFormat, readonly number[]>> = {
  wav: [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000],
  pcm: [8000, 11025, 12000, 16000, 22050, 24000, 32000, 44100, 48000],
  mp3: [8000, 16000, 24000, 32000, 44100, 48000],
  opus: [48000],
};

/** Default output rate when a request gives none: 44.1 kHz, Opus 48 kHz. */
export function defaultSampleRateHz(format: OutputFormat): number {
  return format === 'opus' ? 48000 : 44100;
}

/** The MP3 bitrate tiers of the public API, in kbit/s. */
export const MP3_BITRATE_TIERS = [64, 128, 192] as const;
export type Mp3BitrateTier = (typeof MP3_BITRATE_TIERS)[number];

/** `-1000` is libopus' OPUS_AUTO: the encoder picks the bitrate. */
export const OPUS_BITRATE_AUTO = -1000;

/** MIME type named in validation messages (no parameters). */
export function formatMime(format: OutputFormat): string {
  switch (format) {
    case 'mp3':
      return 'audio/mpeg';
    case 'wav':
      return 'audio/wav';
    case 'pcm':
      return 'audio/pcm';
    case 'opus':
      return 'audio/opus';
  }
}

/**
 * The Content-Type of a response body in `format` (D-TTS-2): `audio/mpeg`,
 * `audio/wav`, `audio/pcm;rate=N` (s16le mono), `audio/ogg;codecs=opus`.
 */
export function contentTypeFor(format: OutputFormat, sampleRateHz: number): string {
  switch (format) {
    case 'mp3':
      return 'audio/mpeg';
    case 'wav':
      return 'audio/wav';
    case 'pcm':
      return `audio/pcm;rate=${sampleRateHz}`;
    case 'opus':
      return 'audio/ogg;codecs=opus';
  }
}

/**
 * Validates a public format request. Throws `ServiceError('bad_request')` (400) with
 * "Invalid sample rate <r> for format <mime>…" for a rate the format does not allow, and
 * for an MP3 bitrate that is not exactly a tier (native API: a non-tier value → 400).
 */
export function checkFormat(format: OutputFormat, sampleRateHz: number, mp3BitrateKbps?: number): void {
  const allowed = ALLOWED_SAMPLE_RATES[format];
  if (!allowed) throw new ServiceError('bad_request', `Invalid format ${String(format)}. Supported: ${OUTPUT_FORMATS.join(', ')}`);
  if (!allowed.includes(sampleRateHz)) {
    throw new ServiceError(
      'bad_request',
      `Invalid sample rate ${sampleRateHz} for format ${formatMime(format)}. Supported: ${allowed.join(', ')}`,
    );
  }
  if (format === 'mp3' && mp3BitrateKbps !== undefined && !(MP3_BITRATE_TIERS as readonly number[]).includes(mp3BitrateKbps)) {
    throw new ServiceError('bad_request', `Invalid mp3 bitrate ${mp3BitrateKbps}. Supported: ${MP3_BITRATE_TIERS.join(', ')}`);
  }
}

/**
 * Compat layer: snaps a requested MP3 bitrate (kbit/s) up to the next tier (32 → 64,
 * 96 → 128, 160 → 192). Above 192, or not a positive number → `bad_request`.
 */
export function snapMp3Bitrate(kbps: number): Mp3BitrateTier {
  if (Number.isFinite(kbps) && kbps > 0) {
    for (const tier of MP3_BITRATE_TIERS) if (kbps <= tier) return tier;
  }
  throw new ServiceError('bad_request', `Invalid mp3 bitrate ${kbps}. Supported: up to ${MP3_BITRATE_TIERS[MP3_BITRATE_TIERS.length - 1]}`);
}

/** A family-C style `output_format` (e.g. `mp3_44100_128`, `pcm_16000`), parsed but not yet checked. */
export interface ParsedOutputFormat {
  format: OutputFormat;
  sampleRateHz: number;
  /** The bitrate segment in kbit/s, when present (MP3 snaps it up; Opus ignores it). */
  bitrateKbps?: number;
}

/**
 * Parses `<codec>_<rate>[_<kbps>]` for the families mp3, pcm, opus and wav (an extension).
 * Unknown or unparsable values, and `ulaw_*`/`alaw_*`, throw `ServiceError('bad_request')`
 * ("never accepted"); whether the rate is allowed is left to `checkFormat`, because the
 * compat layer reports the two differently (family C: `invalid_request` versus a refused
 * rate, which on the live socket fails after the upgrade).
 */
export function parseOutputFormat(value: string): ParsedOutputFormat {
  const m = /^(mp3|pcm|opus|wav)_(\d{4,6})(?:_(\d{1,3}))?$/.exec(value);
  if (!m || (m[3] !== undefined && (m[1] === 'pcm' || m[1] === 'wav'))) {
    throw new ServiceError('bad_request', `Unsupported output_format ${JSON.stringify(value)}. Use mp3_<rate>_<kbps>, pcm_<rate>, opus_48000[_<kbps>] or wav_<rate>`);
  }
  const parsed: ParsedOutputFormat = { format: m[1] as OutputFormat, sampleRateHz: Number(m[2]) };
  if (m[3] !== undefined) parsed.bitrateKbps = Number(m[3]);
  return parsed;
}
