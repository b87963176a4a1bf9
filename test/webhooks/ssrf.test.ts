import t from 'tap';
import { startTestServer } from '../helpers/server.ts';
import { allowWrites, endedSession, startReceiver, waitForLog } from './helpers.ts';

t.test('a loopback endpoint is refused when the platform does not allow-list it', async (t) => {
  const rec = await startReceiver();
  // The URL was accepted when written (allowed then); this platform's allow-list is empty.
  allowWrites(t, `127.0.0.1:${rec.port}`);
  const app = await startTestServer({ config: { outboundAllow: [] } });
  t.teardown(async () => {
    await app.close();
    await rec.close();
  });
  const { sessionId } = await endedSession(app, [{ url: `${rec.url}/hook`, secret: 'x' }]);
  const log = await waitForLog(app, sessionId, (d) => d.length === 2 && d.every((x) => x.status === 'failed'));
  for (const d of log) {
    t.match(d, { status: 'failed', attempts: 1, last_status_code: null, next_attempt_at: null });
    t.match(d.last_error, /blocked/);
  }
  t.equal(rec.requests.length, 0, 'nothing reached the receiver');
});
