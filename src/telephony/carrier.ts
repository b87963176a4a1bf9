/**
 * The carrier interface: where phone numbers come from and where calls go through. The
 * platform talks to every carrier through this interface only: `sandbox` (embedded, simulated,
 * `sandbox.ts`) and `livekit-sip` (`managed`, `livekit-sip.ts`). docs/telephony.md.
 */

/** The neutral provider values of the API (D-PHONE-1). */
export const PROVIDERS = ['sandbox', 'managed', 'sip'] as const;
export type Provider = (typeof PROVIDERS)[number];

export interface NumberSearch {
  countryCode: 'US' | 'CA';
  /** Three digits, or undefined for any area. */
  areaCode?: string;
  numberType: 'local';
  /** At most this many results. */
  limit: number;
}

export interface AvailableNumber {
  /** E.164 */
  phoneNumber: string;
  countryCode: 'US' | 'CA';
  /** State or province and city, free-form. */
  region: string;
  locality: string;
  numberType: 'local';
}

/**
 * The carrier declined or failed an operation. `detail` is safe to show to the caller (it
 * becomes `<provider> refused the request: <detail>`); the cause stays for the log.
 */
export class CarrierRefused extends Error {
  constructor(readonly detail: string, options?: ErrorOptions) {
    super(detail, options);
    this.name = 'CarrierRefused';
  }
}

export interface Carrier {
  readonly provider: Provider;
  /** Numbers the carrier offers now. Not a reservation. */
  search(q: NumberSearch, signal?: AbortSignal): Promise<AvailableNumber[]>;
  /**
   * Whether the carrier could ever rent this number (its inventory), known without asking it;
   * a carrier without a fixed inventory leaves this undefined. A number it does not offer is
   * the client's mistake (`400`), not a carrier failure.
   */
  offers?(phoneNumber: string): boolean;
  /** Rents the number. Throws CarrierRefused when the carrier declines. Returns the carrier's handle. */
  purchase(phoneNumber: string, signal?: AbortSignal): Promise<{ carrierRef: string | null }>;
  /** Gives the number back. Releasing a number the carrier no longer holds succeeds. Throws CarrierRefused. */
  release(phoneNumber: string, carrierRef: string | null, signal?: AbortSignal): Promise<void>;
  /** Calls through this carrier's numbers; a carrier without call handling leaves this undefined. */
  readonly calls?: CallControl;
}

/** Telephone audio: 8 kHz mono signed 16-bit PCM. The session runtime resamples to 16 kHz. */
export const CALL_SAMPLE_RATE_HZ = 8_000;

/**
 * The audio of one call leg, as the platform hears and speaks it. Samples are mono 16-bit PCM
 * at `sampleRateHz`. A carrier whose media flows elsewhere (a LiveKit room, where an agent
 * participant joins) gives no media.
 */
export interface CallMedia {
  readonly sampleRateHz: number;
  /** Plays `pcm` to the far end. The caller paces it in real time. */
  send(pcm: Int16Array): void;
  /** The far end's audio, as it arrives (one receiver; a later call replaces it). */
  onAudio(receiver: ((pcm: Int16Array) => void) | null): void;
  /** Keypad digits the far end pressed. */
  onDtmf(receiver: ((digits: string) => void) | null): void;
}

/** Why a call leg ended, as the carrier reports it. */
export type LegEnd =
  | 'remote_hangup' // the far end hung up
  | 'local_hangup' // we hung up (`hangUp`)
  | 'transferred' // handed off (cold transfer) or bridged to another leg (warm merge): we left
  | 'failed';

/** One live call leg between the platform and a phone. */
export interface CallLeg {
  readonly callId: string;
  /** E.164 of the calling party (the caller on inbound legs, our number on outbound ones). */
  readonly from: string;
  readonly to: string;
  readonly direction: 'inbound' | 'outbound';
  readonly media: CallMedia | null;
  /** When `media` is null: the LiveKit room the call's media is in, and the phone's participant there. */
  readonly mediaRoom?: { name: string; identity: string };
  /** Resolves once, when the leg ends. */
  readonly ended: Promise<LegEnd>;
}

/** A call ringing one of the carrier's numbers: the platform answers or refuses it. */
export interface InboundCall extends CallLeg {
  /** Connects the caller; media flows from now on. */
  answer(): void;
  /** Refuses the call: `busy` (unbound number, no capacity) or `unavailable` (anything else). */
  reject(reason: 'busy' | 'unavailable'): void;
}

/**
 * A call the platform handed off (cold transfer, warm merge): the caller and the human talk
 * without us. Transfer minutes are billed from the handoff to `ended` (docs/api/phone.md).
 */
export interface Handoff {
  /** Resolves when that call ends (either party hangs up); null when the carrier cannot tell. */
  readonly ended: Promise<void> | null;
}

/** How a dial ended: answered (with the live leg), or not. */
export type DialOutcome =
  | { status: 'answered'; leg: CallLeg; answeredBy: 'human' | 'voicemail' | 'unknown' }
  | { status: 'busy' | 'no_answer' | 'failed'; detail?: string };

export interface DialRequest {
  /** Our number shown as caller ID (E.164). */
  from: string;
  to: string;
  /** How long the far end may ring before the dial gives up (`no_answer`). */
  ringTimeoutMs: number;
  /** The session this leg belongs to (carriers with rooms name the room after it). */
  sessionId: string;
  /** A consult leg of a warm transfer (private to the agent and the human), not a new call. */
  consultFor?: string;
  /**
   * The team placing the call. A carrier that simulates the outside world (the sandbox) keeps
   * one world per team, so another team's phones never ring; real carriers ignore it.
   */
  teamId?: string;
}

/**
 * Call control: receive calls, place calls, transfer them, hang up. Every method throws
 * `CarrierRefused` when the carrier declines; the detail is safe to show.
 */
export interface CallControl {
  /** Registers the handler of calls reaching any number this carrier holds (one handler). */
  onInboundCall(handler: (call: InboundCall) => void): void;
  /**
   * Dials `to` from `from` and resolves when the far end answers, declines (`busy`) or rings
   * out (`no_answer`). Aborting the signal cancels the dial (`failed`). CarrierRefused when
   * the carrier does not accept the dial at all.
   */
  dial(req: DialRequest, signal?: AbortSignal): Promise<DialOutcome>;
  /** Puts the far end on hold (it hears music; its audio no longer reaches us) or takes it off. */
  hold(callId: string, on: boolean): Promise<void>;
  /**
   * Cold transfer: hands the leg over to `destination` (showing `from`). Resolves once the
   * destination took the call; the leg then ends with `transferred`. CarrierRefused when the
   * handoff is refused (busy, no answer, carrier refusal): the leg stays ours.
   */
  transfer(req: { callId: string; destination: string; from: string; ringTimeoutMs: number; teamId?: string }, signal?: AbortSignal): Promise<Handoff>;
  /** Warm merge: joins two of our legs to each other and leaves both (each ends `transferred`). */
  bridge(callId: string, otherCallId: string): Promise<Handoff>;
  /** Ends the leg (idempotent; an ended leg is not an error). */
  hangUp(callId: string): Promise<void>;
}
