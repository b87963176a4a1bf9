/**
 * Which node holds each live session, in the shared state: `session-node:<id>` →
 * `{"node": "<node id>", "url": "<the node's websocket connect URL>", "resume": "<sha256 of the resume secret, hex>"}`.
 *
 * A node claims a session when it starts it and releases it when it ends. Entries live
 * `REGISTRY_TTL_MS` and the holder refreshes them every `REGISTRY_REFRESH_MS`, so a node that
 * dies without releasing leaves entries that vanish within the TTL (about the reconnect grace
 * period: a session of a dead node cannot be resumed anyway). Another node uses `lookup` to
 * send a reconnecting client to the owner (D-SESS-5).
 */
import type { SharedState } from './types.ts';

export const REGISTRY_TTL_MS = 30_000;
export const REGISTRY_REFRESH_MS = 10_000;

export interface SessionOwner {
  /** The node id (`SessionRuntime.nodeId`). */
  node: string;
  /** Where clients of this node connect: `ws(s)://host[:port]/v1/agent/sessions/connect`. */
  url: string;
  /** sha256 (hex) of the session's resume secret: a non-owner can refuse a wrong secret itself. */
  resume: string;
}

export const registryKey = (sessionId: string) => `session-node:${sessionId}`;

export interface SessionRegistryOptions {
  nodeId: string;
  /** This node's websocket connect URL, as clients elsewhere can reach it. */
  url: string;
  ttlMs?: number;
  refreshMs?: number;
  /** Background refresh failures (Redis down): logged, retried on the next tick. */
  onError?(err: unknown): void;
}

export class SessionRegistry {
  private readonly held = new Map<string, string>();
  private timer: NodeJS.Timeout | null = null;
  private readonly ttlMs: number;

  constructor(
    private readonly state: SharedState,
    readonly o: SessionRegistryOptions,
  ) {
    this.ttlMs = o.ttlMs ?? REGISTRY_TTL_MS;
  }

  /** Starts the refresh timer (unref'd: it never keeps the process alive). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.refresh(), this.o.refreshMs ?? REGISTRY_REFRESH_MS);
    this.timer.unref();
  }

  /** Records this node as the holder of `sessionId`. */
  async claim(sessionId: string, resumeHash: string): Promise<void> {
    const value = JSON.stringify({ node: this.o.nodeId, url: this.o.url, resume: resumeHash } satisfies SessionOwner);
    this.held.set(sessionId, value);
    await this.state.set(registryKey(sessionId), value, this.ttlMs);
  }

  /** Forgets `sessionId` (it ended here). */
  async release(sessionId: string): Promise<void> {
    if (!this.held.delete(sessionId)) return;
    await this.state.del(registryKey(sessionId));
  }

  /** The node holding `sessionId`, or null when no node does (ended, never started, node gone). */
  async lookup(sessionId: string): Promise<SessionOwner | null> {
    const raw = await this.state.get(registryKey(sessionId));
    if (!raw) return null;
    try {
      const v = JSON.parse(raw) as SessionOwner;
      return typeof v.node === 'string' && typeof v.url === 'string' && typeof v.resume === 'string' ? v : null;
    } catch {
      return null;
    }
  }

  /** Extends the TTL of every entry this node holds. */
  async refresh(): Promise<void> {
    const writes = [...this.held].map(([id, value]) => this.state.set(registryKey(id), value, this.ttlMs));
    const failed = (await Promise.allSettled(writes)).find((r) => r.status === 'rejected');
    if (failed) this.o.onError?.((failed as PromiseRejectedResult).reason);
  }

  /** How many sessions this node holds. */
  get size(): number {
    return this.held.size;
  }

  /** Stops refreshing and removes this node's entries (a clean shutdown). */
  async close(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    const ids = [...this.held.keys()];
    this.held.clear();
    await Promise.allSettled(ids.map((id) => this.state.del(registryKey(id))));
  }
}
