import { realClock } from '../../actors/clock.ts';
import { nodeAt } from '../config.ts';
import { defineModule } from '../modules.ts';
import { SessionRegistry } from '../state/session-registry.ts';
import { serveRelay } from '../transport/relay.ts';
import { CONNECT_PATH, deliverText, greet, mountWebsocketTransport, type WebsocketTransport } from '../transport/websocket.ts';
import { resolveVoice } from '../voices/service.ts';
import { mountSessionRoutes } from './routes.ts';
import { SessionRuntime } from './runtime.ts';
import { SessionService } from './service.ts';

/**
 * Sessions: the runtime (the supervisor of every session actor on this node), the websocket
 * transport at /v1/agent/sessions/connect, the agent in LiveKit rooms when LiveKit is
 * configured, and /v1/agent/sessions. The session registry says which node holds a live
 * session (PARLEY_NODE_ID, PARLEY_NODE_URL): a resume reaching another node is sent there
 * (close 4307 with the URL). At close the runtime drains its sessions, then the agent leaves
 * its rooms. The LiveKit modules (livekit-server-sdk, ~0.25 s to import) load only when LiveKit
 * is configured.
 */
export const sessionsModule = defineModule({
  name: 'sessions',
  needs: ['http', 'config', 'log', 'sql', 'state', 'box', 'inference', 'metrics', 'recordings', 'port', 'worker', 'agentCache'],
  async start({ http, config, log, sql, state, box, inference, metrics, recordings, port, worker, agentCache }, onClose) {
    const base = nodeAt(config.node, config.host, port);
    // Each worker of a node is a node of the registry, at the node's one public URL (D-SCALE-2).
    const nodeIdOf = (i: number) => `${base.id}/w${i}`;
    const node = worker ? { id: nodeIdOf(worker.index), url: base.url } : base;
    worker?.siblings.nameNodes(nodeIdOf);
    const sessionRegistry = new SessionRegistry(state, { nodeId: node.id, url: `${node.url}${CONNECT_PATH}`, onError: (err) => log.warn({ err }, 'session registry refresh failed') });
    const runtime = new SessionRuntime({
      recordings, sql, state, inference, log, clock: realClock, maxSessions: config.maxSessions, maxInferenceBacklogMs: config.maxInferenceBacklogMs, sharedCapacity: worker?.capacity, registry: metrics.registry,
      resolveVoice: (teamId, id) => resolveVoice(sql, teamId, id), box, outboundAllow: config.outboundAllow, nodeId: node.id, sessionRegistry, nodeStaleMs: config.nodeStaleMs,
    });
    await runtime.start();
    const lk = config.livekit ? { agent: await import('../transport/livekit-agent.ts'), rooms: await import('../transport/livekit.ts') } : undefined;
    const livekitAgents = config.livekit && lk ? new lk.agent.LivekitAgents({ config: config.livekit, runtime, log }) : undefined;
    if (livekitAgents) onClose(() => livekitAgents.close());
    // Closers run in reverse: the runtime drains (its clients get `session.ended`, then close
    // 1000 `shutdown`), then this worker waits for its sockets relayed to a sibling's sessions,
    // which those sessions' drains close the same way.
    let transport: WebsocketTransport | undefined;
    onClose(() => transport?.relaysClosed(config.drainTimeoutMs));
    onClose(() => runtime.close(config.drainTimeoutMs));
    if (worker) worker.siblings.serveRelays((sessionId, secret, p) => serveRelay(runtime, p, sessionId, secret, { log, greet, deliverText }));
    const siblings = worker && {
      relayTo: (owner: string, sessionId: string, secret: string) => {
        const i = worker.siblings.workerOf(owner);
        if (i === undefined) return undefined;
        metrics.relays.inc();
        return worker.siblings.relay(i, sessionId, secret);
      },
    };
    transport = mountWebsocketTransport(http, runtime, log, siblings);
    const sessions = new SessionService({
      sql,
      recordingSummary: (id) => recordings.summary(id),
      state,
      box,
      agentCache,
      pricePerMinuteMicros: config.sessionPricePerMinuteMicros,
      publicRatePerAgent: config.publicRatePerAgent,
      publicRatePerIp: config.publicRatePerIp,
      hasCapacity: () => runtime.hasCapacity(),
      overloaded: () => runtime.overloaded(),
      mintTransportToken: config.livekit && lk && livekitAgents ? lk.agent.livekitSessionMinter(config.livekit, livekitAgents) : undefined,
      livekitUrl: config.livekit?.url,
      // LiveKit: the room is created before anything is charged; no answer → 502 (LIVEKIT_ROOM_TIMEOUT_MS).
      ensureRoom: config.livekit && lk ? lk.rooms.livekitRoomEnsurer(config.livekit, { timeoutMs: config.livekitRoomTimeoutMs }) : undefined,
    });
    mountSessionRoutes(http, sessions);
    return { runtime, livekitAgents, sessions };
  },
});
