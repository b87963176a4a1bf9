/**
 * The carrier interface: where phone numbers come from and where calls go through. The
 * platform talks to every carrier through this interface only; `sandbox` (embedded, simulated)
 * implements it here, a LiveKit SIP carrier is the documented next step (README.md of this
 * folder).
 */

/** The neutral provider values of the API (docs/decisions.md "Phone numbers: providers"). */
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
  /** Rents the number. Throws CarrierRefused when the carrier declines. Returns the carrier's handle. */
  purchase(phoneNumber: string, signal?: AbortSignal): Promise<{ carrierRef: string | null }>;
  /** Gives the number back. Releasing a number the carrier no longer holds succeeds. Throws CarrierRefused. */
  release(phoneNumber: string, carrierRef: string | null, signal?: AbortSignal): Promise<void>;
  /**
   * Calls (inbound, outbound, transfers) arrive with the session runtime (issue 9, "Calls");
   * a carrier without them leaves this undefined.
   */
  readonly calls?: CallControl;
}

/** What call handling will need from a carrier; no carrier implements it yet. */
export interface CallControl {
  /** Dials `to` from `from`; resolves with the carrier's call id once the carrier accepted the dial. */
  placeCall(req: { from: string; to: string; sessionId: string }, signal?: AbortSignal): Promise<{ callId: string }>;
  /** Registers the handler for calls reaching any number this carrier holds. */
  onInboundCall(handler: (call: { callId: string; from: string; to: string }) => void): void;
  /** Hands a live call over to `destination` (cold) or bridges it after a briefing (warm). */
  transfer(req: { callId: string; destination: string; mode: 'cold' | 'warm' }, signal?: AbortSignal): Promise<void>;
  hangUp(callId: string): Promise<void>;
}
