// Server-sent events from a streamed response body: `data:` lines joined per event, the
// `event:` name when given. Comments and other fields are skipped.

export interface SseEvent {
  event: string;
  data: string;
}

/** Splits a byte stream into server-sent events as they complete. */
export async function* readSse(body: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  let buf = '';
  let event = '';
  let data: string[] = [];
  const take = (line: string): SseEvent | null => {
    if (line === '') {
      const out = data.length ? { event, data: data.join('\n') } : null;
      event = '';
      data = [];
      return out;
    }
    if (line.startsWith(':')) return null;
    const i = line.indexOf(':');
    const field = i < 0 ? line : line.slice(0, i);
    const value = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
    if (field === 'data') data.push(value);
    else if (field === 'event') event = value;
    return null;
  };
  for await (const chunk of body) {
    buf += decoder.decode(chunk, { stream: true });
    let nl: number;
    while ((nl = buf.search(/\r\n|\n|\r/)) >= 0) {
      if (buf[nl] === '\r' && nl === buf.length - 1) break; // a CRLF split across chunks
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + (buf[nl] === '\r' && buf[nl + 1] === '\n' ? 2 : 1));
      const e = take(line);
      if (e) yield e;
    }
  }
  buf += decoder.decode();
  if (buf) take(buf);
  const last = take('');
  if (last) yield last;
}
