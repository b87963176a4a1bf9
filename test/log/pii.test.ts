// "Nothing sensitive reaches logs outside `pii` fields", and `pii` fields are redacted unless
// PARLEY_LOG_PII=true.
import t from 'tap';
import { Writable } from 'node:stream';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/log.ts';

function capture(env: string | undefined) {
  // As the platform does: the environment read once into the configuration, the logger built from it.
  const config = loadConfig(env === undefined ? {} : { PARLEY_LOG_PII: env });
  let out = '';
  const destination = new Writable({ write(chunk, _e, cb) { out += chunk; cb(); } });
  const log = createLogger({ level: 'info', pii: config.logPii, destination });
  log.info({ sessionId: 'sess_1', pii: { transcript: 'my card is 4242' } }, 'turn taken');
  log.info({ tool: { pii: 'secret body' } }, 'tool called');
  return () => out;
}

t.test('pii fields are redacted by default, at the top level and one level down', async (t) => {
  const out = capture(undefined);
  await new Promise((r) => setImmediate(r));
  t.notMatch(out(), /4242|secret body/);
  t.match(out(), /"pii":"\[pii\]"/);
  t.match(out(), /"sessionId":"sess_1"/, 'other fields stay');
});

t.test('PARLEY_LOG_PII=true logs pii fields in the clear', async (t) => {
  const out = capture('true');
  await new Promise((r) => setImmediate(r));
  t.match(out(), /my card is 4242/);
  t.match(out(), /secret body/);
});
