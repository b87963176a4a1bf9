/**
 * The SDK's `websocket` transport (docs/websocket-transport.md): JSON text frames for events,
 * binary frames for 16 kHz PCM audio both ways; reconnects with the resume secret after a
 * drop and follows `session.moved` to the node that holds the session.
 */
import { conversationOf, createCore, startMicrophone } from './core.ts';
import { ClientError, type Conversation, type SessionResponse, type StartOptions, type WebSocketFactory, type WebSocketLike } from './types.ts';

/** `session.moved` redirects followed in one resume attempt. */
const MAX_MOVES = 2;

async function defaultWebSocket(): Promise<WebSocketFactory> {
  const g = (globalThis as { WebSocket?: WebSocketFactory }).WebSocket;
  if (g) return g;
  const mod = 'ws'; // a variable: bundlers for browsers must not try to include it
  try {
    const ws = (await import(mod)) as { default?: WebSocketFactory; WebSocket?: WebSocketFactory };
    return (ws.WebSocket ?? ws.default)!;
  } catch (err) {
    throw new ClientError('connection_failed', 'No WebSocket here: pass options.WebSocket, or install the ws package (Node 20)', { cause: err });
  }
}

/** Joins a `websocket` session (see `start`). */
export async function startWebsocket(session: SessionResponse, options: StartOptions): Promise<Conversation> {
  if (typeof session.websocket_url !== 'string' || typeof session.token !== 'string') throw new ClientError('connection_failed', 'The session response has no websocket_url or token');
  const WS = options.WebSocket ?? (await defaultWebSocket());
  const core = createCore(options);
  let socket: WebSocketLike | null = null;
  let resume = '';
  let sessionId = session.session_id;
  let hangingUp = false;

  const onMessage = (data: unknown) => {
    if (typeof data !== 'string') {
      const buf = data instanceof ArrayBuffer ? data : ArrayBuffer.isView(data) ? (data as Uint8Array).slice().buffer : null;
      if (!buf) return;
      core.audio(new Int16Array(buf, 0, buf.byteLength >> 1));
      return;
    }
    let m: unknown;
    try {
      m = JSON.parse(data);
    } catch {
      return;
    }
    if (m && typeof m === 'object' && !Array.isArray(m)) core.handle(m as Record<string, unknown>);
  };

  /** Opens one socket; resolves on `session.started`, rejects if it closes first. */
  const open = (url: string) =>
    new Promise<void>((resolve, reject) => {
      const ws = new WS(url);
      ws.binaryType = 'arraybuffer';
      let started = false;
      let movedTo: string | null = null;
      ws.onmessage = (ev) => {
        if (!started && typeof ev.data === 'string') {
          try {
            const m = JSON.parse(ev.data);
            if (m.topic === 'session' && m.type === 'session.moved' && typeof m.url === 'string') {
              movedTo = m.url;
              return;
            }
            if (m.topic === 'session' && m.type === 'session.started') {
              started = true;
              resume = m.resume;
              sessionId = m.sessionId;
              socket = ws;
              resolve();
              return;
            }
          } catch {
            // not JSON: fall through
          }
        }
        onMessage(ev.data);
      };
      ws.onerror = () => {};
      ws.onclose = (ev) => {
        if (!started) {
          if (ev.code === 4307 && movedTo) return reject(Object.assign(new ClientError('connection_failed', 'The session is live on another node'), { closeCode: ev.code, movedTo }));
          reject(ev.code === 4401 ? new ClientError('unauthorized', ev.reason || 'Unauthorized') : Object.assign(new ClientError('connection_failed', ev.reason || `Connection closed (${ev.code})`), { closeCode: ev.code }));
          return;
        }
        if (socket === ws) socket = null;
        void onClosed(ev.code);
      };
    });

  /** Where resumes go: the creation response's URL, or the node a `session.moved` named. */
  let resumeBase = session.websocket_url;
  const withResume = (base: string) => `${base}${base.includes('?') ? '&' : '?'}session_id=${encodeURIComponent(sessionId)}&resume=${encodeURIComponent(resume)}`;
  /**
   * One resume: a node that does not hold the session answers `session.moved` and close 4307
   * with the owner's URL; the SDK follows it at once (at most `MAX_MOVES` hops) and keeps
   * resuming there.
   */
  const resumeAt = async (base: string): Promise<void> => {
    for (let hop = 0; ; hop++) {
      try {
        await open(withResume(base));
        resumeBase = base;
        return;
      } catch (err) {
        const to = (err as { movedTo?: string }).movedTo;
        if (!to || hop >= MAX_MOVES) throw err;
        base = to;
      }
    }
  };

  const onClosed = async (code: number) => {
    if (core.finished) return;
    if (hangingUp) return core.finish('user_hangup');
    if (code === 1000 || options.reconnect === false) return core.finish(code === 1000 ? 'ended' : 'connection_lost');
    const max = options.maxReconnectAttempts ?? 5;
    for (let attempt = 1; attempt <= max && !core.finished; attempt++) {
      core.emit('reconnecting', { attempt });
      await new Promise((r) => setTimeout(r, Math.min(4000, 250 * 2 ** (attempt - 1))));
      try {
        await resumeAt(resumeBase);
        core.emit('reconnected', {});
        return;
      } catch (err) {
        const c = (err as { closeCode?: number }).closeCode;
        if (err instanceof ClientError && (err.code === 'unauthorized' || c === 4404)) break;
      }
    }
    core.finish('connection_lost');
  };

  const base = session.websocket_url;
  await open(`${base}${base.includes('?') ? '&' : '?'}token=${encodeURIComponent(session.token)}`);

  const send = (m: Record<string, unknown>) => {
    if (!socket || core.finished) throw new ClientError('not_connected', 'The conversation is not connected');
    socket.send(JSON.stringify({ topic: 'client-event', ...m }));
  };

  const convo = conversationOf(core, {
    sessionId: () => sessionId,
    send,
    sendAudio(pcm) {
      socket?.send(new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength));
    },
    async hangup() {
      hangingUp = true;
      try {
        send({ type: 'user.hangup' });
      } catch {
        core.finish('user_hangup');
      }
      return core.ended;
    },
  }, options);
  await startMicrophone(core, convo, options);
  return convo;
}
