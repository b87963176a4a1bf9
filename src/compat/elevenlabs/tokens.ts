/**
 * Family C single-use tokens: `POST /compat/elevenlabs/v1/single-use-token/{token_type}`
 * issues a token a frontend may use once, within 15 minutes, instead of the API key, as the
 * vendor protocol does (`tokens.singleUse.create` in @elevenlabs/elevenlabs-js; the realtime
 * transcription client then sends `?token=` and no key header).
 *
 * Token types and where they are accepted (`?token=` query parameter):
 * - `realtime_scribe`: `wss …/v1/speech-to-text/realtime`;
 * - `tts_websocket`: `wss …/v1/text-to-speech/{voice_id}/stream-input` and `multi-stream-input`;
 * - `batch_scribe`: `POST …/v1/speech-to-text`.
 *
 * A token carries the caller of the key that created it, and dies with that key: used after
 * the key was revoked or expired, it is refused. It lives in the shared state (all
 * nodes see it) under a hash of its value, and using it deletes it (`take`): of concurrent
 * uses exactly one wins. A token of one type is not accepted where another type is needed.
 * A token given together with a key wins, as with the vendor (the official client sends no
 * key then); an unknown, used, expired or wrong-type token → 401 `unauthorized`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { Authenticate, Principal } from '../../auth/principal.ts';
import { parse } from '../../validation.ts';
import type { SharedState } from '../../state/index.ts';
import { authenticateKey, ElevenLabsError } from './common.ts';

/** How long a token may wait for its use (the vendor's 15 minutes). */
export const SINGLE_USE_TOKEN_TTL_MS = 15 * 60 * 1000;

export const SINGLE_USE_TOKEN_TYPES = ['realtime_scribe', 'batch_scribe', 'tts_websocket'] as const;
export type SingleUseTokenType = (typeof SINGLE_USE_TOKEN_TYPES)[number];

const pathSchema = z.strictObject({ token_type: z.enum(SINGLE_USE_TOKEN_TYPES) });

/** The state key of a token: its type and a hash, so a dump of the state holds no usable token. */
const stateKey = (type: SingleUseTokenType, token: string) => `compat:elevenlabs:token:${type}:${createHash('sha256').update(token).digest('base64url')}`;

/** Issues a token of the type named in the path (unknown type → 422 in the vendor field-list shape). */
export async function issueSingleUseToken(state: SharedState, params: Record<string, string | undefined>, principal: Principal): Promise<{ token: string }> {
  const { token_type } = parse(pathSchema, { token_type: params.token_type }, 'path');
  const token = `sutkn_${randomBytes(24).toString('base64url')}`;
  const caller: Principal = { teamId: principal.teamId, keyId: principal.keyId, betaAccess: principal.betaAccess };
  await state.setIfAbsent(stateKey(token_type, token), JSON.stringify(caller), SINGLE_USE_TOKEN_TTL_MS);
  return { token };
}

/** Whether a team's API key (by id) can still be used: tokens die with the key that issued them. */
export type KeyIsLive = (teamId: string, keyId: string) => Promise<boolean>;

/**
 * Uses up a token of `type`; its caller, or 401 `unauthorized`. With `keyIsLive`, a token
 * whose issuing key has since been revoked or has expired is refused too (and used up).
 */
export async function redeemSingleUseToken(state: SharedState, type: SingleUseTokenType, token: string, keyIsLive?: KeyIsLive): Promise<Principal> {
  const value = token ? await state.take(stateKey(type, token)) : null;
  if (value === null) throw new ElevenLabsError('unauthorized', `Invalid single-use token: unknown, already used, expired, or not a ${type} token`);
  const caller = JSON.parse(value) as Principal;
  if (keyIsLive && caller.keyId && !(await keyIsLive(caller.teamId, caller.keyId))) {
    throw new ElevenLabsError('unauthorized', 'Invalid single-use token: the API key that issued it was revoked or has expired');
  }
  return caller;
}

/**
 * The caller of a request that may authenticate with a single-use token: `?token=` when the
 * query has one (used up here), else the key headers (`authenticateKey`).
 */
export function authenticateKeyOrToken(
  r: { headers: Record<string, string>; query: URLSearchParams },
  type: SingleUseTokenType,
  deps: { authenticate: Authenticate; state: SharedState; keyIsLive?: KeyIsLive },
): Promise<Principal> {
  const token = r.query.get('token');
  if (token !== null) return redeemSingleUseToken(deps.state, type, token, deps.keyIsLive);
  return authenticateKey(r.headers, deps.authenticate);
}
