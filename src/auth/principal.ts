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
