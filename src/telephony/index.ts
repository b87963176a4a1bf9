import { ServiceError } from '../errors.ts';
import type { Carrier, Provider } from './carrier.ts';

export * from './carrier.ts';
export { SandboxCarrier, type SandboxOperation } from './sandbox.ts';

/** The carriers this platform has, by provider value, and the one searches use by default. */
export class Carriers {
  private readonly byProvider = new Map<Provider, Carrier>();
  constructor(carriers: Carrier[], readonly defaultProvider: Provider = carriers[0]?.provider ?? 'sandbox') {
    for (const c of carriers) this.byProvider.set(c.provider, c);
  }

  /** The carrier for a provider value; 400 when this platform has none configured for it. */
  get(provider: Provider): Carrier {
    const c = this.byProvider.get(provider);
    if (!c) throw new ServiceError('bad_request', `Phone number provider is not configured: ${provider}`);
    return c;
  }

  providers(): Provider[] {
    return [...this.byProvider.keys()];
  }
}
