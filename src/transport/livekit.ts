/**
 * The `livekit` transport, token side: a room per session and a participant token per
 * session, minted with livekit-server-sdk. The grant is limited to that one room (join,
 * publish the microphone, subscribe to the agent, publish data on the wire protocol's
 * topics) and the token lives until the session's `expires_at`: the client must join
 * before then, like with every transport.
 *
 * The agent participant (joining the room, audio, data topics, `lk.agent.state`) is
 * `livekit-agent.ts`.
 */
import { AccessToken, RoomServiceClient } from 'livekit-server-sdk';

export interface LivekitConfig {
  url: string;
  apiKey: string;
  apiSecret: string;
}

/** The room a session's participants meet in. */
export function roomName(sessionId: string): string {
  return `parley-${sessionId}`;
}

/** The caller's participant identity in the session's room. */
export function callerIdentity(sessionId: string): string {
  return `caller-${sessionId}`;
}

/**
 * A participant token for the caller of `session`, valid until its `expires_at`
 * (at least one second), for its room only.
 */
export async function mintParticipantToken(
  cfg: Pick<LivekitConfig, 'apiKey' | 'apiSecret'>,
  session: { id: string; expires_at: Date; end_user_id?: string | null },
  now = Date.now(),
): Promise<string> {
  const ttlSeconds = Math.max(1, Math.ceil((session.expires_at.getTime() - now) / 1000));
  const at = new AccessToken(cfg.apiKey, cfg.apiSecret, {
    identity: callerIdentity(session.id),
    name: session.end_user_id ?? undefined,
    ttl: ttlSeconds,
    metadata: JSON.stringify({ session_id: session.id }),
  });
  at.addGrant({
    room: roomName(session.id),
    roomJoin: true,
    canPublish: true,
    canSubscribe: true,
    canPublishData: true,
    canUpdateOwnMetadata: false,
    roomCreate: false,
    roomList: false,
    roomAdmin: false,
    roomRecord: false,
  });
  return at.toJwt();
}

/** The session API's `mintTransportToken` for LiveKit: the room token and the server URL. */
export function livekitMinter(cfg: LivekitConfig) {
  return async (session: { id: string; expires_at: Date; end_user_id?: string | null }, _sessionToken: string) => ({
    token: await mintParticipantToken(cfg, session),
    url: cfg.url,
  });
}

/** How long session creation waits for the media server to create a room (`LIVEKIT_ROOM_TIMEOUT_MS`). */
export const ROOM_CREATE_TIMEOUT_MS = 3_000;

/**
 * The session API's `ensureRoom` for LiveKit: creates the session's room with the server API
 * (idempotent on the server), so creation learns that the media server answers before it
 * charges anything; rejects on a refused connection, an error answer or after `timeoutMs`.
 * The room closes by itself if nobody joins before the token expires (`emptyTimeout`), and
 * 30 s after the last participant left (`departureTimeout`, the reconnect window).
 */
export function livekitRoomEnsurer(cfg: LivekitConfig, o: { timeoutMs?: number } = {}) {
  const timeoutMs = o.timeoutMs ?? ROOM_CREATE_TIMEOUT_MS;
  // requestTimeout is in seconds; failover applies to LiveKit Cloud only and would retry here.
  const rooms = new RoomServiceClient(cfg.url, cfg.apiKey, cfg.apiSecret, { requestTimeout: Math.max(1, Math.ceil(timeoutMs / 1000)), failover: false });
  return async (session: { id: string; expires_at: Date; max_duration_seconds: number }, now = Date.now()): Promise<void> => {
    const emptyTimeout = Math.max(1, Math.ceil((session.expires_at.getTime() - now) / 1000));
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`LiveKit did not answer within ${timeoutMs} ms`)), timeoutMs);
    });
    try {
      await Promise.race([rooms.createRoom({ name: roomName(session.id), emptyTimeout, departureTimeout: 30 }), deadline]);
    } finally {
      clearTimeout(timer);
    }
  };
}
