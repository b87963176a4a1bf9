/**
 * The `parley` CLI's side of the admin routes: the same `TeamAdmin` as the store, over HTTP to
 * the server named by the control file. While that server is still starting (503), it waits.
 */
import type { ControlFile } from './control-file.ts';
import type { TeamAdmin } from './service.ts';

const START_WAIT_MS = 60_000;

export function httpAdmin(control: ControlFile): TeamAdmin {
  const call = async (method: string, path: string, body?: unknown): Promise<{ status: number; body: any }> => {
    const deadline = Date.now() + START_WAIT_MS;
    for (;;) {
      let res: Response;
      try {
        res = await fetch(control.url + path, {
          method,
          headers: { Authorization: `Bearer ${control.token}`, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
          body: body === undefined ? undefined : JSON.stringify(body),
        });
      } catch (err) {
        throw new Error(`the Parley server (pid ${control.pid}) holding the data folder does not answer at ${control.url}: ${(err as Error).message}`);
      }
      const text = await res.text();
      if (res.status === 503 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 250)); // still starting
        continue;
      }
      const parsed = text ? JSON.parse(text) : undefined;
      if (res.status >= 400 && res.status !== 404) {
        throw new Error(`the running server refused: ${res.status} ${parsed?.message ?? JSON.stringify(parsed)}`);
      }
      return { status: res.status, body: parsed };
    }
  };
  return {
    async createTeam({ name, beta, creditMicros }) {
      const r = await call('POST', '/admin/v1/teams', { name, beta, credit: Number(creditMicros) / 1_000_000 });
      return { teamId: r.body.team_id, key: r.body.key };
    },
    async createKey({ teamId, name, expiresAt }) {
      const r = await call('POST', `/admin/v1/teams/${encodeURIComponent(teamId)}/keys`, { name, expires_at: expiresAt?.toISOString() });
      return r.status === 404 ? undefined : { keyId: r.body.key_id, key: r.body.key };
    },
    async revokeKey(idOrPrefix) {
      return (await call('POST', '/admin/v1/keys/revoke', { key: idOrPrefix })).body.revoked;
    },
    async grantCredit({ teamId, amountMicros }) {
      const r = await call('POST', `/admin/v1/teams/${encodeURIComponent(teamId)}/credit`, { amount: Number(amountMicros) / 1_000_000 });
      return r.status === 404 ? undefined : BigInt(r.body.credit_micros);
    },
    async setBeta({ teamId, enabled }) {
      return (await call('PUT', `/admin/v1/teams/${encodeURIComponent(teamId)}/beta`, { enabled })).status !== 404;
    },
  };
}
