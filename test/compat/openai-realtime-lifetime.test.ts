// docs/api/compat.md "Limits", connection lifetime 3600 s: a realtime session past its lifetime sends an
// `error` event `session_expired` and closes normally. The lifetime is shortened here; the
// session is driven through its socket interface (no speech is needed for this rule).
import t from 'tap';
import { createLogger } from '../../src/log.ts';
import { REALTIME_LIMITS, RealtimeSession, type RealtimeSocket } from '../../src/compat/openai/realtime.ts';
import { defaultConfig } from '../../src/compat/openai/realtime-config.ts';

t.test('the connection lifetime is 3600 s; past it: session_expired, then close 1000', async (t) => {
  t.equal(REALTIME_LIMITS.lifetimeMs, 3600 * 1000, '3600 s');
  const sent: any[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => {
    const socket: RealtimeSocket = { send: (text) => sent.push(JSON.parse(text)), bufferedAmount: () => 0, end: (code, reason) => resolve({ code, reason }) };
    const session = new RealtimeSession({ tts: {} as never, asr: {} as never, log: createLogger({ level: 'silent' }) }, socket, {
      teamId: 'team_x', requestId: 'r', config: defaultConfig('realtime', 'gpt-realtime', 'service/transcribe-1'), speechModel: 's2.1-pro',
      nativeHeaders: {}, resolveTranscriptionModel: (m) => m, lifetimeMs: 50,
    });
    t.ok(session.id.startsWith('sess_'));
  });
  const keep = setInterval(() => {}, 1000); // the session's timer is unref'd: a server keeps the loop alive, the test does here
  const end = await closed;
  clearInterval(keep);
  t.same(end, { code: 1000, reason: 'session expired' }, 'closed normally');
  t.same(sent.map((e) => e.type), ['session.created', 'error']);
  t.match(sent[0].session, { expires_at: Number });
  t.match(sent[1].error, { code: 'session_expired', type: 'invalid_request_error' });
});
