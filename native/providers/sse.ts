// Server-sent events from a streamed response body: `data:` lines joined per event, the
// `event:` name when given. Comments and other fields are skipped.

export interface SseEvent {
  event: string;
  data: string;
}

/**
 * Splits a byte stream into server-sent events, in batches: the events each piece of the body
 * completed, as soon as it came (a batch is never empty). A consumer that answers once per
 * batch (the chat engine: one text delta for the tokens that arrived together) does less
 * work per event without waiting for anything that has not arrived.
 */
export async function* readSseBatches(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent[]> {
  const decoder = new TextDecoder();
  let buf = '';
  let event = '';
  let data: string[] = [];
  const take = (line: string, out: SseEvent[]) => {
    if (line === '') {
      if (data.length) out.push({ event, data: data.length === 1 ? data[0]! : data.join('\n') });
      event = '';
      data = [];
      return;
    }
    if (line.charCodeAt(0) === 58 /* : */) return;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? '' : line.charCodeAt(i + 1) === 32 /* space */ ? line.slice(i + 2) : line.slice(i + 1);
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
  };
  for await (const chunk of body) {
    buf += decoder.decode(chunk, { stream: true });
    const out: SseEvent[] = [];
    let at = 0;
    // The next \n and \r at or after `at` (-1: none left; each searched for again only once passed).
    let lf = -2;
    let cr = -2;
    for (;;) {
      // The next line end: \n, \r\n or a lone \r.
      if (lf !== -1 && lf < at) lf = buf.indexOf('\n', at);
      if (cr !== -1 && cr < at) cr = buf.indexOf('\r', at);
      const nl = cr < 0 ? lf : lf < 0 ? cr : Math.min(cr, lf);
      if (nl < 0) break;
      if (nl === cr && nl === buf.length - 1) break; // a CRLF split across chunks
      take(buf.slice(at, nl), out);
      at = nl + (nl === cr && buf.charCodeAt(nl + 1) === 10 ? 2 : 1);
    }
    if (at) buf = buf.slice(at);
    if (out.length) yield out;
  }
  buf += decoder.decode();
  const out: SseEvent[] = [];
  if (buf) take(buf, out);
  take('', out);
  if (out.length) yield out;
}

/** Splits a byte stream into server-sent events as they complete. */
export async function* readSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  for await (const batch of readSseBatches(body)) yield* batch;
}
