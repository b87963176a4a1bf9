/**
 * Node liveness on one store (the embedded one here): sessions recorded as held by a node that
 * stopped beating are ended `failed` / `node_lost` as of its last beat; a node starting with the
 * id of one that died ends what that one left; a node whose own beats are not yet steady judges
 * no other node (after an outage of the database every node needs time to beat again).
 */
import t from 'tap';
import { NodeReaper } from '../../src/sessions/node-reaper.ts';
import { createLogger } from '../../src/log.ts';
import { beat } from '../../src/sessions/store-nodes.ts';
import { markSessionActive } from '../../src/sessions/store.ts';
import { startTestServer } from '../helpers/server.ts';
import { createSession, sleep } from '../e2e/session-helpers.ts';
import { agentWith } from '../e2e/session-helpers.ts';

const app = await startTestServer({ embedded: true, config: { nodeStaleMs: 600_000 } /* its own reaper stays out of the way */ });
t.teardown(() => app.close());
const log = createLogger({ level: 'silent' });

async function activeSessionOf(node: string): Promise<string> {
  const agent = await agentWith(app, { prompt: { first_message_mode: 'off' } });
  const s = await createSession(app, agent);
  t.ok(await markSessionActive(app.db.sql, s.session_id, node));
  return s.session_id;
}
const record = async (id: string) => (await app.req('GET', `/v1/agent/sessions/${id}`)).body;

t.test('a node that stopped beating: its sessions are ended node_lost, once the judging node beats steadily', async (t) => {
  await beat(app.db.sql, 'ghost');
  const id = await activeSessionOf('ghost');
  const judge = new NodeReaper({ sql: app.db.sql, nodeId: 'judge', log, staleMs: 300, sweepMs: 60_000, beatMs: 50 });
  await judge.start();
  t.teardown(() => judge.close({ forget: true }));
  t.equal(await judge.sweep(), 0, 'its own beats began just now: it judges nobody yet');
  t.equal((await record(id)).status, 'active');
  await sleep(400);
  t.equal(await judge.sweep(), 1, 'a stale period later, the ghost\'s session is ended');
  const r = await record(id);
  t.match(r, { status: 'failed', ended_reason: 'node_lost' });
  const [{ seen_at }] = await app.db.sql<{ seen_at: Date }[]>`select seen_at from nodes where id = 'ghost'`;
  t.equal(Date.parse(r.ended_at), seen_at.getTime(), 'ended as of the lost node\'s last beat');
  t.equal(await judge.sweep(), 0, 'a session is ended once');
});

t.test('a node starting with the id of one that died ends what that one left', async (t) => {
  const id = await activeSessionOf('node-x');
  const reaper = new NodeReaper({ sql: app.db.sql, nodeId: 'node-x', log, staleMs: 60_000, sweepMs: 60_000, beatMs: 60_000 });
  await reaper.start();
  t.teardown(() => reaper.close({ forget: true }));
  t.match(await record(id), { status: 'failed', ended_reason: 'node_lost' });
});
