import { CarrierRefused, type AvailableNumber, type Carrier, type NumberSearch } from './carrier.ts';
import { SandboxCalls } from './sandbox-calls.ts';

/**
 * Area codes of the sandbox inventory. Every sandbox number is `+1 <area> 555 01xx`, the
 * range reserved for fiction in North America, so no real phone ever rings.
 */
const AREAS: { area: string; country: 'US' | 'CA'; region: string; locality: string }[] = [
  { area: '415', country: 'US', region: 'CA', locality: 'San Francisco' },
  { area: '212', country: 'US', region: 'NY', locality: 'New York' },
  { area: '512', country: 'US', region: 'TX', locality: 'Austin' },
  { area: '206', country: 'US', region: 'WA', locality: 'Seattle' },
  { area: '416', country: 'CA', region: 'ON', locality: 'Toronto' },
  { area: '604', country: 'CA', region: 'BC', locality: 'Vancouver' },
];
/** Numbers per area code: `…55501 00` to `…55501 49`. */
const PER_AREA = 50;

export type SandboxOperation = 'purchase' | 'release' | 'dial' | 'transfer';

/**
 * The embedded simulated carrier. Deterministic inventory (above), an in-process record of
 * the numbers it holds, and switches that make the next purchase or release fail, so every
 * state of a phone number can be reached in tests and demos. State lives in this process:
 * for one node, tests and development, not for production telephony.
 */
export class SandboxCarrier implements Carrier {
  readonly provider = 'sandbox' as const;
  private readonly held = new Map<string, string>();
  private readonly failures: Record<SandboxOperation, string[]> = { purchase: [], release: [], dial: [], transfer: [] };
  private seq = 0;
  /** Calls: phones are WebSocket clients of `/v1/telephony/sandbox/calls` (docs/telephony.md, "The sandbox phones"). */
  readonly calls = new SandboxCalls((n) => this.held.has(n), this.failures);

  /** The next `times` calls of `op` fail with `detail` (queued after failures already set). */
  failNext(op: SandboxOperation, detail = 'simulated carrier failure', times = 1): void {
    for (let i = 0; i < times; i++) this.failures[op].push(detail);
  }

  /** Numbers this carrier currently rents out. */
  holds(phoneNumber: string): boolean {
    return this.held.has(phoneNumber);
  }

  /** Whether a number belongs to the sandbox inventory. */
  static inInventory(phoneNumber: string): boolean {
    const m = /^\+1(\d{3})55501(\d{2})$/.exec(phoneNumber);
    return !!m && AREAS.some((a) => a.area === m[1]) && Number(m[2]) < PER_AREA;
  }

  offers(phoneNumber: string): boolean {
    return SandboxCarrier.inInventory(phoneNumber);
  }

  async search(q: NumberSearch): Promise<AvailableNumber[]> {
    const out: AvailableNumber[] = [];
    for (const a of AREAS) {
      if (a.country !== q.countryCode || (q.areaCode !== undefined && a.area !== q.areaCode)) continue;
      for (let i = 0; i < PER_AREA && out.length < q.limit; i++) {
        const phoneNumber = `+1${a.area}55501${String(i).padStart(2, '0')}`;
        if (this.held.has(phoneNumber)) continue;
        out.push({ phoneNumber, countryCode: a.country, region: a.region, locality: a.locality, numberType: 'local' });
      }
    }
    return out;
  }

  async purchase(phoneNumber: string): Promise<{ carrierRef: string }> {
    const forced = this.failures.purchase.shift();
    if (forced !== undefined) throw new CarrierRefused(forced);
    if (!SandboxCarrier.inInventory(phoneNumber)) throw new CarrierRefused('number is not in the sandbox inventory');
    if (this.held.has(phoneNumber)) throw new CarrierRefused('number is already rented');
    const ref = `sbx_${++this.seq}`;
    this.held.set(phoneNumber, ref);
    return { carrierRef: ref };
  }

  async release(phoneNumber: string): Promise<void> {
    const forced = this.failures.release.shift();
    if (forced !== undefined) throw new CarrierRefused(forced);
    this.held.delete(phoneNumber);
  }
}
