import t from 'tap';
import { TokenVerifier } from 'livekit-server-sdk';
import { mintParticipantToken, roomName } from '../../src/transport/livekit.ts';

const cfg = { apiKey: 'APIparley', apiSecret: 'a-secret-that-is-long-enough-for-hs256-0123456789' };

t.test('the participant token is limited to the session room and lives until expires_at', async (t) => {
  const now = Date.now();
  const session = { id: 'sess_0123456789abcdef01234567', expires_at: new Date(now + 60_000), end_user_id: 'user-7' };
  const jwt = await mintParticipantToken(cfg, session, now);
  const claims = await new TokenVerifier(cfg.apiKey, cfg.apiSecret).verify(jwt);
  t.equal(claims.sub, `caller-${session.id}`);
  t.equal(claims.name, 'user-7');
  t.match(claims.video, { room: roomName(session.id), roomJoin: true, canPublish: true, canSubscribe: true, canPublishData: true });
  t.notOk(claims.video?.roomAdmin);
  t.notOk(claims.video?.roomCreate);
  t.notOk(claims.video?.roomList);
  const exp = (claims as { exp?: number }).exp!;
  t.ok(Math.abs(exp * 1000 - session.expires_at.getTime()) <= 1500, 'expires with the session token');
  t.same(JSON.parse(claims.metadata!), { session_id: session.id });
});

t.test('a token signed with another secret does not verify', async (t) => {
  const jwt = await mintParticipantToken(cfg, { id: 'sess_x', expires_at: new Date(Date.now() + 60_000) });
  await t.rejects(new TokenVerifier(cfg.apiKey, 'another-secret-that-is-long-enough-0123456789').verify(jwt));
});
