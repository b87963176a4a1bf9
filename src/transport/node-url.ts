/**
 * This node's identity for the session registry: its id (`PARLEY_NODE_ID`) and the base URL
 * clients elsewhere reach it at (`PARLEY_NODE_URL`, e.g. `wss://node-3.voice.example.com`).
 * A resume that lands on another node is sent to `<node url>/v1/agent/sessions/connect`.
 */
import os from 'node:os';

export function nodeIdentity(env: NodeJS.ProcessEnv, host: string, port: number): { id: string; url: string } {
  const id = env.PARLEY_NODE_ID || `${os.hostname()}:${process.pid}:${port}`;
  let url = env.PARLEY_NODE_URL?.replace(/\/+$/, '').replace(/^http(s?):/, 'ws$1:');
  if (!url) {
    // Default: the listening address; a wildcard address is replaced by the host name.
    const h = host === '0.0.0.0' || host === '::' || host === '' ? os.hostname() : host;
    url = `ws://${h.includes(':') ? `[${h}]` : h}:${port}`;
  }
  return { id, url };
}
