// Provider WebSockets (realtime transcription, ElevenLabs stream-input): the key in a header,
// the handshake bounded by the first-byte deadline and tried once more when refused, the
// provider's HTTP answer to the handshake mapped like any other (errors.ts), JSON text frames
// in and out. Closing the socket is the only way a stream ends: the call's cancellation closes
// it at once.
import * as grpc from '@grpc/grpc-js';
import WebSocket from 'ws';
import { StatusError } from '../status.ts';
import { FirstByteTimeout, fromNetworkError, fromProviderStatus } from './errors.ts';
import { firstByteBudget, type CallScope, type Provider } from './http.ts';
import { Pipe } from './speech.ts';

export interface ProviderSocket {
  /** Sends one JSON message (dropped once the socket is closing). */
  send(message: unknown): void;
  /** Every JSON message received, in order; ends when the socket closes (with the mapped status if unexpected). */
  messages: Pipe<Record<string, any>>;
  /** Closes the socket (normal closure). */
  close(): void;
  readonly open: boolean;
}

const RETRY_PAUSE_MS = 100;

export async function openSocket(p: Provider, url: string, scope: CallScope): Promise<ProviderSocket> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await connectOnce(p, url, scope);
    } catch (err) {
      if (scope.signal.aborted) throw scope.signal.reason;
      const retryable = err instanceof StatusError && err.code === grpc.status.UNAVAILABLE;
      if (attempt > 0 || !retryable || firstByteBudget(p, scope) <= RETRY_PAUSE_MS) throw err;
      await new Promise((r) => setTimeout(r, RETRY_PAUSE_MS));
    }
  }
}

function connectOnce(p: Provider, url: string, scope: CallScope): Promise<ProviderSocket> {
  return new Promise<ProviderSocket>((resolve, reject) => {
    if (scope.signal.aborted) return reject(scope.signal.reason);
    const ws = new WebSocket(url, { headers: p.auth(), perMessageDeflate: false });
    const messages = new Pipe<Record<string, any>>();
    let settled = false;
    let closing = false;
    const timer = setTimeout(() => fail(fromNetworkError(p.what, new FirstByteTimeout(p.what))), firstByteBudget(p, scope));
    const onAbort = () => {
      closing = true;
      ws.terminate();
      messages.end(scope.signal.reason);
      if (!settled) {
        settled = true;
        clearTimeout(timer);
        reject(scope.signal.reason);
      }
    };
    scope.signal.addEventListener('abort', onAbort, { once: true });
    const fail = (err: unknown) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      scope.signal.removeEventListener('abort', onAbort);
      closing = true;
      ws.terminate();
      reject(err);
    };
    ws.on('unexpected-response', (_req, res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('end', () => {
        const headers = { get: (n: string) => (res.headers[n.toLowerCase()] as string | undefined) ?? null };
        fail(fromProviderStatus(p.what, res.statusCode ?? 502, Buffer.concat(parts).toString('utf8'), headers));
      });
      res.on('error', () => fail(fromNetworkError(p.what, new Error('handshake answer cut'))));
    });
    ws.on('error', (err) => {
      if (!settled) fail(fromNetworkError(p.what, err));
    });
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      try {
        const m = JSON.parse(data.toString('utf8'));
        if (m && typeof m === 'object') messages.push(m);
      } catch {
        // not JSON: no provider protocol we speak sends such frames
      }
    });
    ws.on('close', (code, reason) => {
      scope.signal.removeEventListener('abort', onAbort);
      if (closing || code === 1000) messages.end();
      else messages.end(new StatusError(grpc.status.UNAVAILABLE, `${p.what} closed the socket (${code}${reason.length ? ` ${reason.toString('utf8').slice(0, 120)}` : ''})`));
    });
    ws.on('open', () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({
        send: (m) => {
          if (!closing && ws.readyState === WebSocket.OPEN) ws.send(JSON.stringify(m));
        },
        messages,
        close: () => {
          if (closing) return;
          closing = true;
          ws.close(1000);
          // A server that does not answer the close frame still lets go of the socket.
          setTimeout(() => ws.terminate(), 2000).unref();
        },
        get open() {
          return !closing && ws.readyState === WebSocket.OPEN;
        },
      });
    });
  });
}
