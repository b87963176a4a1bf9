/**
 * Process entry of the platform: `node --import=tsx src/server.ts` is `parley serve`.
 * The composition lives in `platform.ts` so tests can start it in-process on port 0.
 */
import './cli.ts';
