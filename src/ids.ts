import { randomBytes } from 'node:crypto';

/** Resource ids: a short type prefix and 24 random hex characters (96 bits). */
export function newId(prefix: string): string {
  return `${prefix}_${randomBytes(12).toString('hex')}`;
}
