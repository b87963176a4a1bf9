/** The speech detector's settings (docs/providers.md "The speech detector"). */
export const VAD = {
  /** Silero probability at which speech may start. */
  startThreshold: 0.5,
  /** Below this, a frame counts as silence once speech is on. */
  endThreshold: 0.35,
  /** Frames (32 ms) above the start threshold before speech counts as started: a click is not speech. */
  minSpeechFrames: 2,
  /** Silence after the last voiced frame that ends the speech. */
  minSilenceMs: 400,
  /**
   * Silero's probability rises and falls about one frame (32 ms) after the voice does: the
   * reported start and end are moved that much earlier (measured on espeak speech with known
   * silences, test/native/vad.test.ts).
   */
  lagMs: 32,
} as const;
