// The synthesis sockets' handshake: a keyless one settles at once, so mountJsonSocket upgrades it
// inside uWS's own callback, corked (a deferred, uncorked upgrade cost ~4 times the CPU under an
// idle crowd: docs/reliability.md, "Slow clients", second pass); a key is checked first.
import t from 'tap';
import { acceptTtsSocket, type TtsSocketDeps } from '../../src/compat/elevenlabs/ws-stream-input.ts';
import { createLogger } from '../../src/log.ts';

const principal = { teamId: 'team_1' } as never;
let checked = 0;
const deps = {
  authenticate: async () => {
    checked++;
    return principal;
  },
  log: createLogger({ level: 'silent' }),
} as unknown as TtsSocketDeps;
const request = (headers: Record<string, string>, query = '') => ({ headers, query: new URLSearchParams(query), params: ['default'], requestId: 'req_1' });

t.test('keyless: the state at once, not a promise, and no credential checked', async (t) => {
  const got = acceptTtsSocket(request({}), deps);
  t.notOk(got instanceof Promise, 'settled in the upgrade callback');
  t.equal((got as { principal?: unknown }).principal, undefined);
  t.equal((got as { voiceId: string }).voiceId, 'default');
  t.equal(checked, 0);
});

t.test('a key in the handshake: checked first (a promise), its principal on the state', async (t) => {
  const got = acceptTtsSocket(request({ 'xi-api-key': 'pk_x' }), deps);
  t.ok(got instanceof Promise);
  t.equal((await got).principal, principal);
  t.equal(checked, 1);
});

t.test('a refused handshake throws at once (the route answers it as an HTTP error)', async (t) => {
  t.throws(() => acceptTtsSocket(request({}, 'inactivity_timeout=999'), deps), /inactivity_timeout/);
});
