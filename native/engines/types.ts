/** Text with its time span, in milliseconds from the start of the piece it belongs to. */
export interface Timed {
  text: string;
  startMs: number;
  endMs: number;
}

/** One synthesized piece of speech; timings are relative to the piece's first sample. */
export interface SpeechPiece {
  pcm: Int16Array;
  sampleRateHz: number;
  words: Timed[];
  chars: Timed[];
}

export interface SpeechOptions {
  /** BCP-47 language (primary subtag is what matters); '' = engine default. */
  language: string;
  /** Rate multiplier, 0.5 to 2. */
  speed: number;
  /** Wanted sample rate; 0 = the engine's own. */
  sampleRateHz: number;
  /** Voice id from `voices`, or '' for the default. */
  voice: string;
}

/** A speech engine. `synthesize` does the CPU work of one text segment. */
export interface SpeechEngine {
  readonly name: string;
  readonly defaultSampleRateHz: number;
  readonly languages: string[];
  readonly voices: { id: string; name: string; languages: string[] }[];
  /** Sample rates it produces natively (others are resampled by the caller), [] = any. */
  readonly sampleRatesHz: number[];
  /** Its word and character timings are estimates (the contract's `Alignment.estimated`). */
  readonly estimatedAlignment?: boolean;
  synthesize(text: string, opts: SpeechOptions, signal: AbortSignal): Promise<SpeechPiece>;
  /** Voice ids beyond `voices` it speaks with (designed voices, whose ids carry their settings). */
  acceptsVoice?(id: string): boolean;
  /** Voice design (DesignVoice); engines without it cannot vary their voice. */
  design?(req: DesignRequest, signal: AbortSignal): Promise<DesignedVoice[]>;
  /** Optional start-up work (loading models, spawning workers) done before the server says it is ready. */
  warm?(): Promise<void>;
  health(): { ok: boolean; detail: string };
  close(): Promise<void>;
}

/** A voice design request as an engine sees it (DesignVoice, validated). */
export interface DesignRequest {
  description: string;
  /** What the previews say ('' : the engine picks). */
  text: string;
  /** BCP-47; '' = the engine's default. */
  language: string;
  /** Candidates wanted, 1 to 4. */
  count: number;
  /** Rate multiplier on top of the description, (0, 3]. */
  speed: number;
  /** Same seed, same candidates; undefined: new ones each time. */
  seed?: number;
  /** Wanted sample rate of the previews; 0 = the engine's own. */
  sampleRateHz: number;
}

/** One designed voice: an id the engine's synthesis takes as its voice, and a preview. */
export interface DesignedVoice {
  voiceId: string;
  pcm: Int16Array;
  sampleRateHz: number;
  text: string;
  language: string;
  summary: string;
}
