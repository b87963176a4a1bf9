import type uws from 'uWebSockets.js';

const STATUS_TEXT: Record<number, string> = {
  200: '200 OK', 201: '201 Created', 204: '204 No Content', 304: '304 Not Modified', 400: '400 Bad Request', 401: '401 Unauthorized',
  402: '402 Payment Required', 403: '403 Forbidden', 404: '404 Not Found', 405: '405 Method Not Allowed',
  408: '408 Request Timeout', 409: '409 Conflict', 413: '413 Payload Too Large', 415: '415 Unsupported Media Type', 422: '422 Unprocessable Entity',
  429: '429 Too Many Requests', 500: '500 Internal Server Error', 502: '502 Bad Gateway', 503: '503 Service Unavailable',
  504: '504 Gateway Timeout',
};

const statusLine = (s: number) => STATUS_TEXT[s] ?? String(s);

/** CORS headers of every response, name then value. */
const BASE_HEADERS = ['Access-Control-Allow-Origin', '*', 'Access-Control-Expose-Headers', 'X-Request-Id, Retry-After, X-Generation-Id'];

/**
 * The response side of one request. uWebSockets.js rules it keeps: nothing is written after
 * the client aborted; every write made outside the request callback is corked; a streamed
 * body respects backpressure (write() keeps what it could not send, and we wait for
 * onWritable before producing more), so a slow client slows its producer instead of
 * growing the heap.
 */
export class Reply {
  aborted = false;
  /** Set once the status line went out. */
  started = false;
  ended = false;
  status = 0;
  bytes = 0;
  /** Close the connection after the response (a request whose body is still arriving). */
  closeConnection = false;
  private waiters: (() => void)[] = [];
  /** Made on first use of `signal`: most requests never ask for it. */
  private controller?: AbortController;
  /** Headers a route added for whatever response it ends with (`addBaseHeader`), name then value. */
  private extraHeaders?: string[];

  /**
   * `requestId` goes out as `X-Request-Id` with whatever response this request ends with,
   * beside `BASE_HEADERS` (CORS).
   */
  constructor(private readonly res: uws.HttpResponse, private readonly requestId: string) {}

  /** A streamed response's status and headers not written yet (`begin` with `withFirstWrite`). */
  private pendingHead?: { status: number; headers: Record<string, string> };

  /** Headers added to whatever response this request ends with (`X-Generation-Id`). */
  addBaseHeader(name: string, value: string): void {
    (this.extraHeaders ??= []).push(name, value);
  }

  /** Aborted when the client goes away (the HTTP layer calls `abort` from uWS's onAborted). */
  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.aborted) this.controller.abort();
    }
    return this.controller.signal;
  }

  /** The client went away: nothing more is written, and waiting writers wake (bound: uWS's onAborted calls it). */
  readonly abort = (): void => {
    if (this.aborted) return;
    this.aborted = true;
    this.controller?.abort();
    this.wake();
  };

  private writeHead(status: number, headers: Record<string, string> | undefined, contentType?: string): void {
    const res = this.res;
    res.writeStatus(statusLine(status));
    res.writeHeader('X-Request-Id', this.requestId);
    for (let i = 0; i < BASE_HEADERS.length; i += 2) res.writeHeader(BASE_HEADERS[i]!, BASE_HEADERS[i + 1]!);
    const extra = this.extraHeaders;
    if (extra) for (let i = 0; i < extra.length; i += 2) res.writeHeader(extra[i]!, extra[i + 1]!);
    if (contentType !== undefined && !(headers && 'Content-Type' in headers)) res.writeHeader('Content-Type', contentType);
    if (headers) for (const k in headers) res.writeHeader(k, headers[k]!);
  }

  /** A complete response in one go. */
  send(status: number, body: string | Uint8Array | null, headers?: Record<string, string>, contentType?: string): void {
    if (this.aborted || this.ended) return;
    this.ended = true;
    this.started = true;
    this.status = status;
    this.res.cork(() => {
      this.writeHead(status, headers, contentType);
      if (body === null) {
        this.res.endWithoutBody(0, this.closeConnection);
      } else {
        this.bytes += typeof body === 'string' ? Buffer.byteLength(body) : body.byteLength;
        this.res.end(body, this.closeConnection);
      }
    });
  }

  json(status: number, value: unknown, headers?: Record<string, string>): void {
    this.send(status, JSON.stringify(value), headers, 'application/json');
  }

  /**
   * Starts a streamed (chunked) response. `withFirstWrite`: the status line and headers go
   * out with the first `write` (or `end`, `flush`, `destroy`) in one send, not in a send of
   * their own: the client reads head and first bytes in one wakeup (bench/README.md, "tts.ts:
   * time to first audio"). `started` is set now either way.
   */
  begin(status: number, headers: Record<string, string>, withFirstWrite = false): void {
    if (this.aborted || this.started) return;
    this.started = true;
    this.status = status;
    if (withFirstWrite) this.pendingHead = { status, headers };
    else this.res.cork(() => this.writeHead(status, headers));
  }

  /** Writes a head held back by `begin(…, true)`; inside a cork. */
  private writePendingHead(): void {
    const h = this.pendingHead;
    if (!h) return;
    this.pendingHead = undefined;
    this.writeHead(h.status, h.headers);
  }

  /** Sends a head held back by `begin(…, true)` now, with no body bytes. */
  flush(): void {
    if (!this.pendingHead || this.aborted || this.ended) return;
    this.res.cork(() => this.writePendingHead());
  }

  /**
   * Writes one chunk of a streamed body. Resolves when the socket can take more: callers
   * `await` it before producing the next chunk. Resolves immediately (and writes nothing)
   * once the client is gone; check `aborted`.
   */
  async write(chunk: Uint8Array | string): Promise<void> {
    if (this.aborted || this.ended) return;
    let ok = true;
    this.bytes += typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk.byteLength;
    this.res.cork(() => {
      this.writePendingHead();
      ok = this.res.write(chunk);
    });
    if (ok) return;
    await new Promise<void>((resolve) => {
      this.waiters.push(resolve);
      this.res.onWritable(() => {
        this.wake();
        return true;
      });
    });
  }

  /** True while the socket holds unsent bytes (a test hook for backpressure). */
  get backpressured(): boolean {
    return this.waiters.length > 0;
  }

  end(chunk?: Uint8Array | string): void {
    if (this.aborted || this.ended) return;
    this.ended = true;
    this.res.cork(() => {
      this.writePendingHead();
      if (chunk !== undefined) this.res.end(chunk);
      else this.res.end();
    });
  }

  /** Ends a streamed response abruptly (the client sees a truncated transfer, never a clean 200). */
  destroy(): void {
    if (this.aborted || this.ended) return;
    this.flush(); // as before `withFirstWrite`: the client saw a 200, then a truncated body
    this.ended = true;
    this.res.close();
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}
