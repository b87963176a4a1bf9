import type { z } from 'zod';
import type { Logger } from '../log.ts';
import type { Principal } from '../auth/principal.ts';
import type { PageRequest } from '../store/paginate.ts';
import type { Form } from './body.ts';
import type { Reply } from './reply.ts';

export type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';

export type { Principal } from '../auth/principal.ts';

export type BodyKind = 'none' | 'json' | 'json-or-msgpack' | 'multipart' | 'any';

/**
 * What a route takes, declared once: the HTTP layer parses each part before the handler runs
 * (a failure is the 422 list at `path`, `query` or `body`) and the OpenAPI document is built
 * from the same schemas. In order: `page` (the pagination parameters, `pageRequest`), `query`
 * (the schema's own keys, first value of each), `params`, then `body` (an absent optional
 * body is `{}`).
 */
export interface RouteInput {
  body?: z.ZodType;
  query?: z.ZodObject;
  params?: z.ZodObject;
  /** The route is paginated, by creation time or by number (`pageRequest`). */
  page?: 'created' | 'number';
}

type Parsed<S> = S extends z.ZodType ? z.output<S> : undefined;

/** The parsed, typed input of a route (`ctx.input`). */
export interface Input<I extends RouteInput = RouteInput> {
  body: Parsed<I['body']>;
  query: Parsed<I['query']>;
  params: Parsed<I['params']>;
  page: I['page'] extends string ? PageRequest : undefined;
}

export interface RouteSpec<I extends RouteInput = RouteInput> {
  method: Method;
  /** Path with `{param}` segments, as in the OpenAPI document. */
  path: string;
  /** `required` (Bearer key), `optional` (no header = anonymous; a present header must be valid), `none`. */
  auth: 'required' | 'optional' | 'none';
  body?: BodyKind;
  /** The body may be absent (then `ctx.body` is undefined). */
  bodyOptional?: boolean;
  bodyLimit?: number;
  /** Beta access required (403, `requireBeta`), checked after the body is read and before `input` is parsed. */
  beta?: boolean;
  /** Error message for a bad key (the speech API says `Invalid Token`). */
  authMessages?: { invalid: string; expired: string };
  /** Parsed before the handler runs; also the request side of the OpenAPI document. */
  input?: I;
  /** For the OpenAPI document (`body` and `query` only for routes that read their input themselves). */
  doc?: {
    summary: string;
    tags?: string[];
    body?: z.ZodType;
    query?: z.ZodType;
    responses?: Record<number, { description: string; schema?: z.ZodType; contentType?: string }>;
  };
  handler(ctx: Ctx<I>): Promise<Result | void> | Result | void;
}

export interface Ctx<I extends RouteInput = RouteInput> {
  method: Method;
  path: string;
  route: string;
  params: Record<string, string>;
  query: URLSearchParams;
  /** Lower-cased request headers. */
  headers: Record<string, string>;
  body: unknown;
  /** The raw body bytes, when there was a body. */
  rawBody?: Buffer;
  /**
   * A `multipart` route's form: its text fields and files (repeated names collect into
   * arrays), parsed once, on first use (a malformed body → 400 then).
   */
  form(): Form;
  principal?: Principal;
  /** The declared input, parsed (`RouteSpec.input`). */
  input: Input<I>;
  requestId: string;
  ip: string;
  signal: AbortSignal;
  log: Logger;
  reply: Reply;
}

/** A handler returns a JSON result, or streams through `ctx.reply` and returns nothing. */
export interface Result {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

/** The caller of a route with `auth: 'required'` (always set there). */
export const who = (ctx: Ctx): Principal => ctx.principal!;

export type Handler<I extends RouteInput = RouteInput> = RouteSpec<I>['handler'];

interface Node {
  statics: Map<string, Node>;
  param?: { name: string; node: Node };
  routes: Map<Method, RouteSpec>;
}

const NONE: Method[] = [];

const newNode = (): Node => ({ statics: new Map(), routes: new Map() });

/** A segment-trie router: static segments win over parameters; 404 vs 405 from the same walk. */
export class Router {
  private root = newNode();
  readonly specs: RouteSpec[] = [];

  add(spec: RouteSpec): void {
    let node = this.root;
    for (const seg of split(spec.path)) {
      const m = /^\{(\w+)\}$/.exec(seg);
      if (m) {
        if (!node.param) node.param = { name: m[1]!, node: newNode() };
        else if (node.param.name !== m[1]) throw new Error(`conflicting parameter names at ${spec.path}`);
        node = node.param.node;
      } else {
        let next = node.statics.get(seg);
        if (!next) node.statics.set(seg, (next = newNode()));
        node = next;
      }
    }
    if (node.routes.has(spec.method)) throw new Error(`duplicate route ${spec.method} ${spec.path}`);
    node.routes.set(spec.method, spec);
    this.specs.push(spec);
  }

  /** Finds the route; `allowed` lists the methods of the path when the method does not match (else empty). */
  match(method: string, path: string): { spec?: RouteSpec; params: Record<string, string>; allowed: Method[] } {
    const params: Record<string, string> = {};
    const node = walk(this.root, split(path), 0, params);
    if (!node) return { params, allowed: [] };
    const spec = node.routes.get(method as Method) ?? (method === 'HEAD' ? node.routes.get('GET') : undefined);
    return { spec, params, allowed: spec ? NONE : [...node.routes.keys()] };
  }
}

function split(path: string): string[] {
  return path.split('/').filter((s) => s.length > 0);
}

function walk(node: Node, segs: string[], i: number, params: Record<string, string>): Node | undefined {
  if (i === segs.length) return node.routes.size ? node : undefined;
  const seg = segs[i]!;
  const s = node.statics.get(seg);
  if (s) {
    const found = walk(s, segs, i + 1, params);
    if (found) return found;
  }
  if (node.param) {
    let value: string;
    try {
      value = decodeURIComponent(seg);
    } catch {
      return undefined;
    }
    const found = walk(node.param.node, segs, i + 1, params);
    if (found) {
      params[node.param.name] = value;
      return found;
    }
  }
  return undefined;
}
