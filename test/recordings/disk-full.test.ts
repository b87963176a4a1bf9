// Disk full for recordings (docs/reliability.md, docs/api/recordings.md): a real ENOSPC from a
// small tmpfs mounted as PARLEY_RECORDINGS_DIR and filled mid-call. The call goes on without
// its recording: the caller keeps hearing the agent and the transcript keeps growing, the
// session ends normally, its record and its recording say `disk_full`, the partial files are
// gone, one warning is logged; once space is back, the next call is recorded again.
import { existsSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { encodeText } from '../../native/engines/synthetic/modem.ts';
import { createLogger } from '../../src/log.ts';
import { openApiValidator } from '../helpers/openapi.ts';
import { startTestServer } from '../helpers/server.ts';
import { agentWith, connect, RATE, sessionRecord, type Caller } from '../e2e/session-helpers.ts';
import { fillDisk, smallDisk } from '../fixtures/small-disk.ts';

const OPENER = 'Welcome to the recorded line.';

/** The caller says `words` (sent at once, then 900 ms of silence); resolves when the agent answered. */
async function turn(caller: Caller, words: string): Promise<void> {
  const answers = caller.finals('agent').length;
  const speech = encodeText(words, { sampleRateHz: RATE }).pcm;
  const all = new Int16Array(speech.length + (900 * RATE) / 1000);
  all.set(speech);
  for (let i = 0; i < all.length; i += RATE / 10) caller.convo.sendAudio(all.subarray(i, Math.min(all.length, i + RATE / 10)));
  await caller.waitFor(() => caller.finals('user').includes(words), 15_000, `the caller's words "${words}"`);
  await caller.waitFor(() => caller.finals('agent').length === answers + 1, 15_000, 'the answer');
  await caller.waitFor(() => caller.convo.state === 'idle' || caller.convo.state === 'listening', 10_000, 'idle again');
}

const disk = smallDisk(2); // room for a few calls' tracks
if (typeof disk === 'string') {
  t.plan(0, disk);
} else {
  t.teardown(() => disk.unmount());

  t.test('the disk fills mid-call: the call goes on, the recording fails with disk_full', async (t) => {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger({ level: 'warn', destination: { write: (s: string) => void lines.push(JSON.parse(s)) } });
    const app = await startTestServer({ backend: 'synthetic', backendOptions: { pacing: 'realtime' }, log, config: { recordings: { dir: disk.dir, ephemeral: false, s3: null } } });
    t.teardown(() => app.close());
    const agent = await agentWith(app, { prompt: { first_message_mode: 'fixed', first_message: OPENER }, conversation: { eagerness: 'eager', record_audio: true } });
    const oas = openApiValidator((await app.req('GET', '/openapi.json')).body);

    const r = await app.req('POST', '/v1/agent/sessions', { agent_id: agent });
    t.equal(r.status, 200);
    const sessionId = r.body.session_id as string;
    const caller = await connect(r.body);
    await caller.waitFor(() => caller.finals('agent').length === 1, 15_000, 'the opener');
    await caller.waitFor(() => caller.convo.state === 'idle', 10_000, 'idle');
    await turn(caller, 'my name is Ada');
    const before = await app.req('GET', `/v1/agent/sessions/${sessionId}/recording`);
    t.match(before.body, { status: 'processing', error_code: null }, 'recording while there is room');

    // The disk fills. The caller's next words (3.5 s: more than a write chunk) meet ENOSPC.
    fillDisk(join(disk.dir, 'filler'));
    await turn(caller, 'the disk is full now but I keep talking');
    let mid: any;
    for (let i = 0; i < 200; i++) {
      mid = (await app.req('GET', `/v1/agent/sessions/${sessionId}/recording`)).body;
      if (mid.status !== 'processing') break;
      await new Promise((res) => setTimeout(res, 50));
    }
    t.match(mid, { status: 'failed', error: 'recording_failed', error_code: 'disk_full', error_message: /disk.*full/i }, 'the recording stopped during the call, saying why');
    t.same(oas.check('GET', '/v1/agent/sessions/{session_id}/recording', 200, mid), [], 'matches the OpenAPI document');
    t.same(mid.tracks.map((x: any) => [x.role, x.status, x.url, x.error_code]), [['agent', 'failed', null, 'disk_full'], ['user', 'failed', null, 'disk_full']], 'both tracks stopped, no URL');
    const during = await app.req('GET', `/v1/agent/sessions/${sessionId}`);
    t.equal(during.body.status, 'active', 'the session is still live');
    t.match(during.body.recording, { status: 'failed', error_code: 'disk_full', error_message: /disk.*full/i }, 'the session record says why');

    // The call goes on: the caller is heard, transcribed and answered; then hangs up normally.
    await turn(caller, 'still here');
    t.same(caller.finals('user'), ['my name is Ada', 'the disk is full now but I keep talking', 'still here'], 'every caller turn transcribed');
    t.equal(caller.finals('agent').length, 4, 'the agent answered every turn, after the disk filled too');
    await caller.convo.hangup();
    const rec = await sessionRecord(app, sessionId);
    t.match(rec, { status: 'completed', ended_reason: 'user_hangup' }, 'the session ended normally');
    t.match(rec.recording, { status: 'failed', error_code: 'disk_full' });
    t.same(oas.check('GET', '/v1/agent/sessions/{session_id}', 200, rec), [], 'the record matches the OpenAPI document');
    const said = rec.items.filter((i: any) => i.type === 'message' && i.role === 'user').map((i: any) => i.content);
    t.same(said, ['my name is Ada', 'the disk is full now but I keep talking', 'still here'], 'the transcript is whole');
    t.equal(rec.items.filter((i: any) => i.type === 'message' && i.role === 'assistant').length, 4);

    const after = await app.req('GET', `/v1/agent/sessions/${sessionId}/recording`);
    t.equal(after.status, 200);
    t.match(after.body, { status: 'failed', error_code: 'disk_full' }, 'the recording still says why after the call');
    t.notOk(existsSync(join(disk.dir, sessionId)) && readdirSync(join(disk.dir, sessionId)).length > 0, 'the partial tracks were removed (their space freed)');

    const warnings = lines.filter((l) => l.sessionId === sessionId && (l.level as number) >= 40);
    t.equal(warnings.length, 1, 'one warning for the stopped recording');
    t.match(warnings[0], { level: 40, error_code: 'disk_full', errno: 'ENOSPC', msg: /^Recording stopped: the recordings disk is full/ });
    t.notOk(JSON.stringify(lines).includes(app.key), 'no secret in the log');

    // Space is back: the next call is recorded again.
    rmSync(join(disk.dir, 'filler'));
    const r2 = await app.req('POST', '/v1/agent/sessions', { agent_id: agent });
    const c2 = await connect(r2.body);
    await c2.waitFor(() => c2.finals('agent').length === 1, 15_000, 'the opener');
    await c2.waitFor(() => c2.convo.state === 'idle', 10_000, 'idle');
    await turn(c2, 'my name is Ada');
    await c2.convo.hangup();
    let ok: any;
    for (let i = 0; i < 200; i++) {
      ok = (await app.req('GET', `/v1/agent/sessions/${r2.body.session_id}/recording`)).body;
      if (ok.status !== 'processing') break;
      await new Promise((res) => setTimeout(res, 50));
    }
    t.match(ok, { status: 'complete', error_code: null }, 'recorded once there is room');
    t.match((await sessionRecord(app, r2.body.session_id)).recording, { status: 'complete', error_code: null });
  });
}
