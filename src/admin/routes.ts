/**
 * /admin/v1: the `parley` CLI's way into a running server on the embedded store (control-file.ts).
 * Not part of the public API (no OpenAPI entry): callers must be on this machine (loopback) and
 * present the control file's token, which only the server's owner can read.
 */
import { timingSafeEqual } from 'node:crypto';
import ipaddr from 'ipaddr.js';
import { z } from 'zod';
import { ServiceError, notFound } from '../errors.ts';
import type { HttpApp } from '../http/app.ts';
import type { Ctx, Handler, RouteSpec } from '../http/router.ts';
import { parse } from '../validation.ts';
import type { TeamAdmin } from './service.ts';

const teamCreate = z.strictObject({ name: z.string().min(1).max(200), beta: z.boolean().optional(), credit: z.number().finite().optional() });
const keyCreate = z.strictObject({ name: z.string().min(1).max(200).optional(), expires_at: z.iso.datetime({ offset: true }).optional() });
const keyRevoke = z.strictObject({ key: z.string().min(1).max(200) });
const creditGrant = z.strictObject({ amount: z.number().finite() });
const betaSet = z.strictObject({ enabled: z.boolean() });

const micros = (amount: number): bigint => BigInt(Math.round(amount * 1_000_000));

/** A caller on this machine: loopback, or the address the server itself listens on. */
function isLocal(ip: string, host: string): boolean {
  try {
    const a = ipaddr.process(ip);
    return a.range() === 'loopback' || (ipaddr.isValid(host) && a.toString() === ipaddr.process(host).toString());
  } catch {
    return false;
  }
}

export function mountAdminRoutes(http: HttpApp, admin: TeamAdmin, o: { token: string; host: string }): void {
  const { token, host } = o;
  const expected = Buffer.from(`Bearer ${token}`);
  const guard = (handler: Handler): Handler => (ctx: Ctx) => {
    const given = Buffer.from(ctx.headers['authorization'] ?? '');
    if (!isLocal(ctx.ip, host) || given.length !== expected.length || !timingSafeEqual(given, expected)) {
      throw new ServiceError('unauthenticated', 'Invalid admin token');
    }
    return handler(ctx);
  };
  const route = (spec: Omit<RouteSpec, 'auth'>) => http.route({ ...spec, auth: 'none', handler: guard(spec.handler) });

  route({
    method: 'POST', path: '/admin/v1/teams', body: 'json',
    handler: async (ctx) => {
      const b = parse(teamCreate, ctx.body);
      const r = await admin.createTeam({ name: b.name, beta: !!b.beta, creditMicros: b.credit ? micros(b.credit) : 0n });
      return { status: 201, body: { team_id: r.teamId, key: r.key } };
    },
  });
  route({
    method: 'POST', path: '/admin/v1/teams/{team_id}/keys', body: 'json', bodyOptional: true,
    handler: async (ctx) => {
      const b = parse(keyCreate, ctx.body ?? {});
      const r = await admin.createKey({ teamId: ctx.params.team_id!, name: b.name, expiresAt: b.expires_at ? new Date(b.expires_at) : null });
      if (!r) throw notFound('Team');
      return { status: 201, body: { key_id: r.keyId, key: r.key } };
    },
  });
  route({
    method: 'POST', path: '/admin/v1/keys/revoke', body: 'json',
    handler: async (ctx) => ({ status: 200, body: { revoked: await admin.revokeKey(parse(keyRevoke, ctx.body).key) } }),
  });
  route({
    method: 'POST', path: '/admin/v1/teams/{team_id}/credit', body: 'json',
    handler: async (ctx) => {
      const balance = await admin.grantCredit({ teamId: ctx.params.team_id!, amountMicros: micros(parse(creditGrant, ctx.body).amount) });
      if (balance === undefined) throw notFound('Team');
      return { status: 200, body: { credit_micros: balance.toString() } };
    },
  });
  route({
    method: 'PUT', path: '/admin/v1/teams/{team_id}/beta', body: 'json',
    handler: async (ctx) => {
      if (!(await admin.setBeta({ teamId: ctx.params.team_id!, enabled: parse(betaSet, ctx.body).enabled }))) throw notFound('Team');
      return { status: 204 };
    },
  });
}
