// Shared by the scale tests: a raw websocket caller of /v1/agent/sessions/connect.
import WebSocket from 'ws';
import { sleep } from '../e2e/session-helpers.ts';

/** A raw websocket caller: its messages, how its socket closed, and a way to wait for a message. */
export function caller(url: string) {
  const ws = new WebSocket(url);
  const messages: any[] = [];
  ws.on('message', (d, bin) => { if (!bin) messages.push(JSON.parse(d.toString())); });
  ws.on('error', () => {});
  const closed = new Promise<{ code: number; reason: string }>((r) => ws.on('close', (code, reason) => r({ code, reason: reason.toString() })));
  const waitFor = async (pred: (m: any) => boolean) => {
    for (let i = 0; i < 500; i++) {
      const m = messages.find(pred);
      if (m) return m;
      await sleep(20);
    }
    return undefined;
  };
  const say = (text: string) => ws.send(JSON.stringify({ type: 'user.message', text, audio: false }));
  return { ws, messages, closed, waitFor, say };
}
