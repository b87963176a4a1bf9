import { ServiceError } from '../errors.ts';
import { contentTypeFor, ENCODER_SAMPLE_RATES, formatMime, OPUS_BITRATE_AUTO, type OutputFormat } from './formats.ts';
import { Mp3Stream } from './mp3.ts';
import { OggOpusStream } from './opus.ts';
import { int16ToPcmBytes } from './pcm.ts';
import { createResampler, type Resampler } from './resampler.ts';
import { wavHeader } from './wav.ts';

export interface EncoderOptions {
  format: OutputFormat;
  /** Rate of the output. */
  sampleRateHz: number;
  /** Rate of the PCM given to `push`; resampled to `sampleRateHz` when different. */
  inputSampleRateHz: number;
  /** MP3 constant bitrate in kbit/s (default 128). Clamped to what the rate's MPEG version allows. */
  mp3BitrateKbps?: number;
  /** Opus bitrate in bit/s; -1000 (default) is automatic. */
  opusBitrate?: number;
  /** Ogg stream serial for Opus; random when omitted (fix it for reproducible bytes). */
  oggSerial?: number;
}

/**
 * A streaming encoder. `push` takes mono s16 PCM at `inputSampleRateHz` and returns the
 * bytes ready now (possibly none); `end` flushes and returns the rest. Returned chunks are
 * memory the caller may keep; the input array may be reused as soon as `push` returns,
 * unless the caller passes `owned` (it gives the array away: WAV and PCM then send it
 * without a copy).
 * Headers (WAV, Ogg Opus) come out of the first `push` (or `end`, if nothing was pushed).
 */
export interface AudioEncoder {
  readonly contentType: string;
  readonly format: OutputFormat;
  readonly sampleRateHz: number;
  push(pcm: Int16Array, owned?: boolean): Uint8Array[];
  end(): Uint8Array[];
}

interface Sink {
  push(pcm: Int16Array, owned: boolean): Uint8Array[];
  end(): Uint8Array[];
}

/**
 * Creates an encoder. Asynchronous because MP3 instantiates LAME's WASM (the compiled
 * module is cached; other formats resolve at once). Throws `ServiceError('bad_request')`
 * for a rate the encoder cannot produce; the public rules are `checkFormat`'s job.
 */
export async function createEncoder(opts: EncoderOptions): Promise<AudioEncoder> {
  const { format, sampleRateHz, inputSampleRateHz } = opts;
  const rates = ENCODER_SAMPLE_RATES[format];
  if (!rates) throw new ServiceError('bad_request', `Invalid format ${String(format)}`);
  if (!rates.includes(sampleRateHz)) {
    throw new ServiceError('bad_request', `Invalid sample rate ${sampleRateHz} for format ${formatMime(format)}. Supported: ${rates.join(', ')}`);
  }
  if (!Number.isInteger(inputSampleRateHz) || inputSampleRateHz <= 0 || inputSampleRateHz > 384000) {
    throw new ServiceError('bad_request', `Invalid input sample rate ${inputSampleRateHz}`);
  }
  const opusBitrate = opts.opusBitrate ?? OPUS_BITRATE_AUTO;
  if (format === 'opus' && opusBitrate !== OPUS_BITRATE_AUTO && !(opusBitrate >= 6000 && opusBitrate <= 510000)) {
    throw new ServiceError('bad_request', `Invalid opus bitrate ${opusBitrate}. Use -1000 (auto) or 6000–510000`);
  }

  let sink: Sink;
  switch (format) {
    case 'pcm':
      sink = {
        push: (pcm, owned) => (pcm.length ? [int16ToPcmBytes(owned ? pcm : pcm.slice())] : []),
        end: () => [],
      };
      break;
    case 'wav': {
      let headerSent = false;
      const header = (): Uint8Array[] => {
        if (headerSent) return [];
        headerSent = true;
        return [wavHeader(sampleRateHz)];
      };
      sink = {
        push: (pcm, owned) => {
          const out = header();
          if (pcm.length) out.push(int16ToPcmBytes(owned ? pcm : pcm.slice()));
          return out;
        },
        end: header,
      };
      break;
    }
    case 'mp3': {
      const mp3 = await Mp3Stream.create(sampleRateHz, opts.mp3BitrateKbps ?? 128);
      sink = { push: (pcm) => mp3.push(pcm), end: () => mp3.end() };
      break;
    }
    case 'opus': {
      const ogg = new OggOpusStream({ inputSampleRateHz, bitrate: opusBitrate, serial: opts.oggSerial });
      sink = { push: (pcm) => ogg.push(pcm), end: () => ogg.end() };
      break;
    }
  }

  const resampler: Resampler | null = inputSampleRateHz === sampleRateHz ? null : createResampler(inputSampleRateHz, sampleRateHz);
  let ended = false;
  return {
    contentType: contentTypeFor(format, sampleRateHz),
    format,
    sampleRateHz,
    push(pcm, owned = false) {
      if (ended) throw new Error('encoder ended');
      return resampler ? sink.push(resampler.push(pcm), true) : sink.push(pcm, owned);
    },
    end() {
      if (ended) return [];
      ended = true;
      if (!resampler) return sink.end();
      const tail = sink.push(resampler.end(), true);
      return tail.concat(sink.end());
    },
  };
}
