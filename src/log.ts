import pino from 'pino';

/**
 * The platform logger: JSON lines on stdout. Messages are static; request data goes into
 * fields, and anything sensitive (transcripts, prompts, tool payloads, keys) only into a
 * field named `pii`, which is redacted unless `pii` is set (`PARLEY_LOG_PII=true`, read by
 * src/config.ts: a developer's own machine; never in production). Level `info` by default.
 */
export type Logger = pino.Logger;

export function createLogger(opts: { level?: string; pii?: boolean; destination?: pino.DestinationStream } = {}): Logger {
  return pino(
    {
      level: opts.level ?? 'info',
      base: { service: 'parley' },
      redact: opts.pii ? [] : { paths: ['pii', '*.pii'], censor: '[pii]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination,
  );
}
