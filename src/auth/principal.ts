import { ServiceError } from '../errors.ts';

/** Who is calling: the team of a valid API key. */
export interface Principal {
  teamId: string;
  keyId: string;
  betaAccess: boolean;
}

/**
 * Checks a credential (a bearer token, a key, a single-use token) and says whose it is;
 * `messages` are the error texts for an invalid and an expired one (the speech API says
 * `Invalid Token`). The composition root builds it from `KeyVerifier`.
 */
export type Authenticate = (
  authorization: string,
  messages: { invalid: string; expired: string },
) => Promise<Principal>;

/** The agent platform is in private beta: a team without beta access gets 403. */
export function requireBeta(p: Principal): void {
  if (!p.betaAccess) throw new ServiceError('forbidden', 'Agent platform is in private beta. Apply for access to enable agents for your team.');
}

/** The errors for a bad credential: the platform's, and the speech API's (`Invalid Token`, docs/api/auth-errors.md). */
export const AUTH_MESSAGES = { invalid: 'Invalid token', expired: 'Token expired' };
export const SPEECH_AUTH_MESSAGES = { invalid: 'Invalid Token', expired: 'Token expired' };
