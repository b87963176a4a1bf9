// Raw `ws` clients for the family C WebSocket tests: open a socket (or read the HTTP refusal
// of its upgrade), send JSON messages, wait for frames, read the close code.
import WebSocket from 'ws';

export interface Frames {
  ws: WebSocket;
  frames: any[];
  /** Resolves with the close code and reason. */
  closed: Promise<{ code: number; reason: string }>;
  send(message: unknown): void;
  /** Resolves once a frame satisfies `pred` (checking frames already received too). */
  until(pred: (f: any, all: any[]) => boolean, timeoutMs?: number): Promise<any>;
}

export type Handshake = { status: number; body: any } | { socket: Frames };

/** Opens a socket at `url` (ws://…); an upgrade the server refuses resolves with its HTTP status and JSON body. */
export function connect(url: string, headers: Record<string, string> = {}): Promise<Handshake> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    const frames: any[] = [];
    const waiters: { pred: (f: any, all: any[]) => boolean; resolve: (f: any) => void }[] = [];
    const closed = new Promise<{ code: number; reason: string }>((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
    ws.on('message', (data) => {
      const f = JSON.parse(data.toString());
      frames.push(f);
      for (const w of [...waiters]) {
        if (w.pred(f, frames)) {
          waiters.splice(waiters.indexOf(w), 1);
          w.resolve(f);
        }
      }
    });
    ws.on('unexpected-response', (_req, res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => {
        let parsed: unknown = body;
        try {
          parsed = JSON.parse(body);
        } catch {
          // not JSON
        }
        resolve({ status: res.statusCode ?? 0, body: parsed });
        ws.terminate();
      });
    });
    ws.on('error', (err) => reject(err));
    ws.on('open', () =>
      resolve({
        socket: {
          ws,
          frames,
          closed,
          send: (m) => ws.send(typeof m === 'string' ? m : JSON.stringify(m)),
          until: (pred, timeoutMs = 20_000) =>
            new Promise((res, rej) => {
              const hit = frames.find((f) => pred(f, frames));
              if (hit) return res(hit);
              const timer = setTimeout(() => rej(new Error(`no matching frame within ${timeoutMs} ms; got ${JSON.stringify(frames).slice(0, 500)}`)), timeoutMs);
              waiters.push({ pred, resolve: (f) => (clearTimeout(timer), res(f)) });
              void closed.then(() => {
                const i = waiters.findIndex((w) => w.pred === pred);
                if (i >= 0) {
                  waiters.splice(i, 1);
                  clearTimeout(timer);
                  rej(new Error(`socket closed before a matching frame; got ${JSON.stringify(frames).slice(0, 500)}`));
                }
              });
            }),
        },
      }),
    );
  });
}

/** Opens a socket that must be accepted. */
export async function open(url: string, headers: Record<string, string> = {}): Promise<Frames> {
  const h = await connect(url, headers);
  if (!('socket' in h)) throw new Error(`upgrade refused: ${h.status} ${JSON.stringify(h.body)}`);
  return h.socket;
}

/** Audio bytes of all audio frames, in order. */
export const audioOf = (frames: any[]) => Buffer.concat(frames.filter((f) => typeof f.audio === 'string').map((f) => Buffer.from(f.audio, 'base64')));

/** Characters and times over all frames that carry an alignment. */
export function alignmentOf(frames: any[]): { chars: string[]; starts: number[]; durations: number[] } {
  const out = { chars: [] as string[], starts: [] as number[], durations: [] as number[] };
  for (const f of frames) {
    if (!f.alignment) continue;
    out.chars.push(...f.alignment.chars);
    out.starts.push(...f.alignment.charStartTimesMs);
    out.durations.push(...f.alignment.charDurationsMs);
  }
  return out;
}
