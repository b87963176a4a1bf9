/**
 * Audio for the platform: decode uploads, resample, encode (WAV, PCM, MP3, Ogg Opus) and
 * frame. PCM is mono 16-bit little-endian `Int16Array` throughout.
 */
export {
  ALLOWED_SAMPLE_RATES,
  ENCODER_SAMPLE_RATES,
  MP3_BITRATE_TIERS,
  OPUS_BITRATE_AUTO,
  OUTPUT_FORMATS,
  checkFormat,
  contentTypeFor,
  defaultSampleRateHz,
  formatMime,
  parseOutputFormat,
  snapMp3Bitrate,
  type ParsedOutputFormat,
  type Mp3BitrateTier,
  type OutputFormat,
} from './formats.ts';
export { createEncoder, type AudioEncoder, type EncoderOptions } from './encoder.ts';
export { createResampler, resampleAll, type Resampler } from './resampler.ts';
export { decodeAudio, sniffFormat, type DecodedAudio, type SniffedFormat } from './decode.ts';
export {
  createFramer,
  createPcmByteReader,
  float32ToInt16,
  frameSamples,
  frames,
  int16ToFloat32,
  int16ToPcmBytes,
  pcmBytesToInt16,
} from './pcm.ts';
export { loadMp3Module, mp3BitrateFor } from './mp3.ts';
export { WAV_HEADER_BYTES, STREAMING_DATA_SIZE, STREAMING_RIFF_SIZE, parseWav, wavHeader, type WavInfo } from './wav.ts';
export { oggCrc, parseOggPages, type OggPage } from './ogg.ts';
export { OPUS_FRAME_SAMPLES, OPUS_RATE_HZ } from './opus.ts';
