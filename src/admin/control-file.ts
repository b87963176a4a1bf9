/**
 * The control file: while a server runs on the embedded store it writes
 * `<PARLEY_DATA_DIR>/server.json` (`{pid, url, token}`, readable by its owner only), so the
 * `parley` CLI reaches the running server instead of opening the store's folder beside it
 * (the server never sees writes to a PGlite folder made by another process, and two
 * processes writing one folder put it at risk). A second server on the same folder refuses to
 * start. The file goes at shutdown; one left by a crash names a dead pid and is ignored.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';

export interface ControlFile {
  pid: number;
  /** Where the CLI reaches the server's admin routes (loopback). */
  url: string;
  /** The bearer token of the admin routes (32 random bytes, base64url). */
  token: string;
}

export const controlPath = (dataDir: string): string => join(resolve(dataDir), 'server.json');

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** The control file of a live server on this folder, if one runs. */
export function readControlFile(dataDir: string): ControlFile | undefined {
  const path = controlPath(dataDir);
  if (!existsSync(path)) return undefined;
  try {
    const c = JSON.parse(readFileSync(path, 'utf8')) as ControlFile;
    return Number.isInteger(c.pid) && c.pid !== process.pid && alive(c.pid) && typeof c.url === 'string' && typeof c.token === 'string' ? c : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Claims the folder for this server: throws when a live server holds it, else writes the file.
 * Returns the token and a function that removes the file (only if it is still ours).
 */
export function claimDataDir(dataDir: string, url: string): { token: string; release(): void } {
  const held = readControlFile(dataDir);
  if (held) {
    throw new Error(`another Parley server (pid ${held.pid}, ${held.url}) is running on the data folder ${resolve(dataDir)}: stop it, or give this one its own PARLEY_DATA_DIR`);
  }
  mkdirSync(resolve(dataDir), { recursive: true });
  const token = randomBytes(32).toString('base64url');
  const path = controlPath(dataDir);
  writeFileSync(path, JSON.stringify({ pid: process.pid, url, token } satisfies ControlFile), { mode: 0o600 });
  return {
    token,
    release: () => {
      try {
        const c = JSON.parse(readFileSync(path, 'utf8')) as ControlFile;
        if (c.pid === process.pid) rmSync(path, { force: true });
      } catch {
        // already gone
      }
    },
  };
}
