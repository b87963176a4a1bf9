import t from 'tap';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createSecretBox, loadMasterKey, parseMasterKey } from '../../src/crypto/secrets.ts';

const key = randomBytes(32);
const box = createSecretBox(key);

t.test('seal and open round-trip, in the compact versioned format', async (t) => {
  for (const plain of ['', 'whsec_abc', 'ünïcødé ✓ 🎙', 'x'.repeat(4096)]) {
    const sealed = box.seal(plain);
    t.match(sealed, /^v1\.[A-Za-z0-9_-]{16}\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]*$/);
    t.equal(box.open(sealed), plain);
  }
});

t.test('the sealed form does not contain the plaintext and differs on every seal (random IV)', async (t) => {
  const plain = 'sk-live-THE-SECRET-VALUE';
  const a = box.seal(plain);
  const b = box.seal(plain);
  t.not(a, b);
  t.notOk(a.includes(plain));
  t.notOk(Buffer.from(a.split('.')[3], 'base64url').toString('latin1').includes('THE-SECRET'));
});

t.test('tampering with any part throws', async (t) => {
  const sealed = box.seal('hello world');
  const parts = sealed.split('.');
  const flip = (s: string) => {
    const buf = Buffer.from(s, 'base64url');
    buf[0] ^= 1;
    return buf.toString('base64url');
  };
  for (const i of [1, 2, 3]) {
    const copy = [...parts];
    copy[i] = flip(copy[i]);
    t.throws(() => box.open(copy.join('.')), `part ${i} flipped`);
  }
  t.throws(() => box.open('v2.' + parts.slice(1).join('.')), 'unknown version');
  t.throws(() => box.open('garbage'), 'garbage');
  t.throws(() => box.open(parts.slice(0, 3).join('.')), 'truncated');
});

t.test('another master key cannot open it', async (t) => {
  const other = createSecretBox(randomBytes(32));
  t.throws(() => other.open(box.seal('secret')));
});

t.test('fingerprint: stable for a value, different for another value and under another key, not the plaintext', async (t) => {
  t.equal(box.fingerprint('s1'), box.fingerprint('s1'));
  t.not(box.fingerprint('s1'), box.fingerprint('s2'));
  t.not(box.fingerprint('s1'), createSecretBox(randomBytes(32)).fingerprint('s1'));
  t.match(box.fingerprint('s1'), /^[0-9a-f]{64}$/);
  t.equal(createSecretBox(Buffer.from(key)).fingerprint('s1'), box.fingerprint('s1'), 'same master key, same fingerprint');
});

t.test('the master key must be 32 bytes', async (t) => {
  t.throws(() => createSecretBox(randomBytes(16)));
  t.throws(() => createSecretBox(randomBytes(33)));
});

t.test('PARLEY_SECRET_KEY: 64 hex characters or base64 of 32 bytes', async (t) => {
  const raw = randomBytes(32);
  t.same(parseMasterKey(raw.toString('hex')), raw);
  t.same(parseMasterKey(raw.toString('hex').toUpperCase()), raw);
  t.same(parseMasterKey(raw.toString('base64')), raw);
  t.same(parseMasterKey(raw.toString('base64url')), raw);
  t.same(parseMasterKey(` ${raw.toString('hex')}\n`), raw, 'surrounding whitespace is ignored');
  t.throws(() => parseMasterKey(raw.toString('hex').slice(2)), 'too short hex');
  t.throws(() => parseMasterKey(randomBytes(16).toString('base64')), 'base64 of 16 bytes');
  t.throws(() => parseMasterKey('not a key'));
});

t.test('loadMasterKey', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'parley-key-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));

  const env = randomBytes(32);
  t.same(loadMasterKey({ envKey: env.toString('hex'), dataDir: dir }), env, 'the environment wins');
  t.throws(() => statSync(join(dir, 'secret.key')), 'and no key file is created');
  t.throws(() => loadMasterKey({ envKey: 'bad', dataDir: dir }), 'an invalid environment key is an error, not a fallback');

  const a = loadMasterKey({ dataDir: 'memory' });
  const b = loadMasterKey({ dataDir: 'memory' });
  t.equal(a.length, 32);
  t.not(a.toString('hex'), b.toString('hex'), 'ephemeral store: a random key');

  const sub = join(dir, 'data');
  const first = loadMasterKey({ dataDir: sub });
  const file = join(sub, 'secret.key');
  t.equal(statSync(file).mode & 0o777, 0o600, 'created with mode 0600');
  t.same(loadMasterKey({ dataDir: sub }), first, 'read back on the next start');
  t.same(parseMasterKey(readFileSync(file, 'utf8')), first);

  writeFileSync(join(dir, 'secret.key'), 'nonsense');
  t.throws(() => loadMasterKey({ dataDir: dir }), 'a corrupt key file is an error');
  t.throws(() => loadMasterKey({}), 'no key and no data folder');
});
