/** `start()`: joins a session by its `transport`, never falling back to another one. */
import { startLivekit } from './livekit.ts';
import { ClientError, type Conversation, type SessionResponse, type StartOptions } from './types.ts';
import { startWebsocket } from './websocket.ts';

/**
 * Joins the conversation described by `session` (the creation response, unmodified).
 * Resolves once connected (and the microphone, if given, started); rejects with
 * `ClientError`: `unsupported_transport` for a transport this SDK does not speak (never a
 * fallback), `unauthorized` for a used or expired token, `audio_unavailable` when the
 * microphone cannot start (the conversation is then hung up), `connection_failed` otherwise.
 */
export async function start(session: SessionResponse, options: StartOptions = {}): Promise<Conversation> {
  if (!session || typeof session !== 'object') throw new ClientError('unsupported_transport', 'Unsupported transport: undefined');
  if (session.transport === 'livekit') return startLivekit(session, options);
  if (session.transport === 'websocket') return startWebsocket(session, options);
  throw new ClientError('unsupported_transport', `Unsupported transport: ${String(session.transport)}`);
}
