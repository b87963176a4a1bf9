import pino from 'pino';

/**
 * The platform logger: JSON lines on stdout. Messages are static; request data goes into
 * fields, and anything sensitive (transcripts, prompts, tool payloads, keys) only into a
 * field named `pii`, which is redacted unless `PARLEY_LOG_PII=true` (for a developer's own
 * machine; never in production).
 */
export type Logger = pino.Logger;

export function createLogger(opts: { level?: string; pii?: boolean; destination?: pino.DestinationStream } = {}): Logger {
  return pino(
    {
      level: opts.level ?? process.env.LOG_LEVEL ?? 'info',
      base: { service: 'parley' },
      redact: (opts.pii ?? process.env.PARLEY_LOG_PII === 'true') ? [] : { paths: ['pii', '*.pii'], censor: '[pii]' },
      timestamp: pino.stdTimeFunctions.isoTime,
    },
    opts.destination,
  );
}
