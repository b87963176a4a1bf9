/**
 * Where a service streams a response body: audio bytes, or named events (an event stream).
 * The transport adapts its own object to it (the HTTP layer: `replySink` in
 * src/http/sinks.ts, which writes the headers and the Server-Sent Events framing), so a
 * service never sees the HTTP reply.
 */
export interface StreamSink {
  /** The first byte left: a failure can no longer become a status code. */
  readonly started: boolean;
  /** The receiver went away. */
  readonly aborted: boolean;
  /** Starts the body, once (later calls do nothing); `contentType` of the audio (an event stream has its own). */
  open(contentType: string): void;
  /** Audio bytes; a promise when the receiver is behind: await it before producing more. */
  bytes(chunk: Uint8Array): Promise<void> | undefined;
  /** One event of an event stream; a promise when the receiver is behind. */
  event(name: string, data: unknown): Promise<void> | undefined;
  /** Ends the body. */
  close(): void;
}
