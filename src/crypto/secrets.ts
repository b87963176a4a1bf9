import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { closeSync, linkSync, mkdirSync, openSync, readFileSync, unlinkSync, writeSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Secrets at rest (webhook signing secrets, tool credential headers, custom LLM keys).
 *
 * `seal` encrypts with AES-256-GCM under a random 12-byte IV and returns
 * `v1.<iv>.<tag>.<ciphertext>` (each part base64url), so a database dump shows no plaintext.
 * `open` reverses it and throws on any tampering or on a different master key.
 * `fingerprint` is an HMAC-SHA256 of the plaintext under a key derived from the master key:
 * stable across re-sealing (the IV is random, the fingerprint is not), different when the
 * secret changes, and useless for recovering the secret without the master key. Content
 * hashes use the fingerprint, never the ciphertext.
 *
 * The encryption key and the fingerprint key are both derived from the master key with HKDF
 * under distinct labels, so neither is the master key itself.
 */
export interface SecretBox {
  seal(plain: string): string;
  open(sealed: string): string;
  fingerprint(plain: string): string;
}

const VERSION = 'v1';
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_BYTES = 32;
const AAD = Buffer.from('parley-secret-v1');

function derive(master: Buffer, label: string): Buffer {
  return Buffer.from(hkdfSync('sha256', master, Buffer.alloc(0), Buffer.from(label), KEY_BYTES));
}

export function createSecretBox(key: Buffer): SecretBox {
  if (!Buffer.isBuffer(key) || key.length !== KEY_BYTES) throw new Error('Secret master key must be 32 bytes');
  const encKey = derive(key, 'parley/seal/v1');
  const fpKey = derive(key, 'parley/fingerprint/v1');
  return {
    seal(plain) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', encKey, iv, { authTagLength: TAG_BYTES });
      cipher.setAAD(AAD);
      const ct = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final()]);
      const tag = cipher.getAuthTag();
      return [VERSION, iv.toString('base64url'), tag.toString('base64url'), ct.toString('base64url')].join('.');
    },
    open(sealed) {
      const parts = typeof sealed === 'string' ? sealed.split('.') : [];
      if (parts.length !== 4 || parts[0] !== VERSION) throw new Error('Sealed secret has an unknown format');
      const iv = Buffer.from(parts[1], 'base64url');
      const tag = Buffer.from(parts[2], 'base64url');
      const ct = Buffer.from(parts[3], 'base64url');
      if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new Error('Sealed secret has an unknown format');
      const decipher = createDecipheriv('aes-256-gcm', encKey, iv, { authTagLength: TAG_BYTES });
      decipher.setAAD(AAD);
      decipher.setAuthTag(tag);
      try {
        return Buffer.concat([decipher.update(ct), decipher.final()]).toString('utf8');
      } catch (cause) {
        throw new Error('Sealed secret failed authentication', { cause });
      }
    },
    fingerprint(plain) {
      return createHmac('sha256', fpKey).update(plain, 'utf8').digest('hex');
    },
  };
}

/** Parses `PARLEY_SECRET_KEY`: 64 hex characters, or base64 (standard or url-safe) of 32 bytes. */
export function parseMasterKey(text: string): Buffer {
  const s = text.trim();
  if (/^[0-9a-fA-F]{64}$/.test(s)) return Buffer.from(s, 'hex');
  if (/^[A-Za-z0-9+/_-]{43}=?$/.test(s)) {
    const buf = Buffer.from(s, s.includes('-') || s.includes('_') ? 'base64url' : 'base64');
    if (buf.length === KEY_BYTES) return buf;
  }
  throw new Error('PARLEY_SECRET_KEY must be 64 hex characters or the base64 of 32 bytes');
}

export interface LoadMasterKeyOptions {
  /** The value of `PARLEY_SECRET_KEY`, if set. Wins over everything else. */
  envKey?: string;
  /** The embedded store's data folder; `memory` means the ephemeral store (random key per process). */
  dataDir?: string;
}

/**
 * Resolves the master key once at start-up: `envKey` if given (invalid → throws), else a
 * random key for the ephemeral store (`dataDir` `memory`), else `<dataDir>/secret.key`, created
 * with mode 0600 on first use. Throws when neither a key nor a data folder is given: silently
 * inventing a key would make every stored secret unreadable after a restart.
 */
export function loadMasterKey(opts: LoadMasterKeyOptions = {}): Buffer {
  if (opts.envKey !== undefined && opts.envKey !== '') return parseMasterKey(opts.envKey);
  if (opts.dataDir === 'memory') return randomBytes(KEY_BYTES);
  if (!opts.dataDir) throw new Error('Set PARLEY_SECRET_KEY or give a data folder for the secret key');
  const file = join(opts.dataDir, 'secret.key');
  mkdirSync(opts.dataDir, { recursive: true });
  try {
    return readKeyFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  // Write a temporary file, then hard-link it into place: the link is atomic and fails if
  // another process won the race, in which case we read the winner's complete key.
  const key = randomBytes(KEY_BYTES);
  const tmp = `${file}.${process.pid}.${randomBytes(6).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, key.toString('hex') + '\n');
  } finally {
    closeSync(fd);
  }
  try {
    linkSync(tmp, file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return readKeyFile(file);
    throw err;
  } finally {
    unlinkSync(tmp);
  }
  return key;
}

function readKeyFile(file: string): Buffer {
  const text = readFileSync(file, 'utf8');
  try {
    return parseMasterKey(text);
  } catch {
    throw new Error(`Secret key file ${file} is not a valid key`);
  }
}
