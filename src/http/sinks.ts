import type { StreamSink } from '../sink.ts';
import type { Reply } from './reply.ts';

/**
 * A `StreamSink` over an HTTP reply, with backpressure: `audio` streams the bytes as the body
 * (Content-Type from the service), `sse` frames each event as Server-Sent Events
 * (`event: <name>\ndata: <json>\n\n`, text/event-stream, unbuffered by proxies). `open`
 * holds the head back for the first bytes, which the service writes right after it: one send.
 */
export function replySink(reply: Reply, mode: 'audio' | 'sse'): StreamSink {
  const write = (data: Uint8Array | string): Promise<void> | undefined => {
    const w = reply.write(data);
    return reply.backpressured ? w : undefined;
  };
  return {
    get started() {
      return reply.started;
    },
    get aborted() {
      return reply.aborted;
    },
    open(contentType) {
      if (reply.started) return;
      reply.begin(200, { 'Content-Type': mode === 'sse' ? 'text/event-stream' : contentType, 'Cache-Control': 'no-store', ...(mode === 'sse' ? { 'X-Accel-Buffering': 'no' } : {}) }, true);
    },
    // An empty piece (an encoder buffering) still sends the head, as it would have without the wait.
    bytes: (chunk) => {
      if (chunk.length > 0) return write(chunk);
      reply.flush();
      return undefined;
    },
    event: (name, data) => write(`event: ${name}\ndata: ${JSON.stringify(data)}\n\n`),
    close: () => reply.end(),
  };
}
