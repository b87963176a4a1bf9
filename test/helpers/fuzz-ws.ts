/**
 * Random frames on every WebSocket endpoint (docs/reliability.md, "WebSockets"): random
 * binary and text, invalid JSON, valid JSON of the wrong shape, oversized messages. Each
 * socket must end with a documented close code (or stay open and be closed by us); 1011
 * (internal error) or an abrupt 1006 after valid frames counts as a failure.
 */
import fc from 'fast-check';
import { pack } from 'msgpackr';
import WebSocket from 'ws';
import type { TestServer } from './server.ts';

export interface WsEndpoint {
  name: string;
  /** The documented message limit in bytes. */
  limit: number;
  url: () => Promise<string>;
  headers: Record<string, string>;
}

/** Every WebSocket endpoint of the platform, with what it takes to open it. */
export async function wsEndpoints(app: TestServer): Promise<WsEndpoint[]> {
  const ws = app.url.replace(/^http/, 'ws');
  const agent = (await app.req('POST', '/v1/agent/agents', { name: 'sockets' })).body;
  await app.req('POST', `/v1/agent/agents/${agent.agent_id}/publish`);
  const MiB = 1024 * 1024;
  return [
    { name: 'tts live', limit: 32 * MiB, url: async () => `${ws}/v1/tts/live`, headers: app.auth },
    { name: 'openai realtime', limit: 32 * MiB, url: async () => `${ws}/compat/v1/realtime?model=gpt-realtime`, headers: app.auth },
    { name: 'elevenlabs stream-input', limit: 32 * MiB, url: async () => `${ws}/compat/elevenlabs/v1/text-to-speech/default/stream-input`, headers: { 'xi-api-key': app.key } },
    { name: 'elevenlabs multi-stream-input', limit: 32 * MiB, url: async () => `${ws}/compat/elevenlabs/v1/text-to-speech/default/multi-stream-input`, headers: { 'xi-api-key': app.key } },
    { name: 'elevenlabs realtime stt', limit: 32 * MiB, url: async () => `${ws}/compat/elevenlabs/v1/speech-to-text/realtime`, headers: { 'xi-api-key': app.key } },
    { name: 'sandbox phone', limit: 64 * 1024, url: async () => `${ws}/v1/telephony/sandbox/calls?line=%2B15550100`, headers: app.auth },
    {
      name: 'agent session',
      limit: 64 * 1024,
      url: async () => {
        const s = (await app.req('POST', '/v1/agent/sessions', { agent_id: agent.agent_id })).body;
        return `${s.websocket_url}?token=${s.token}`;
      },
      headers: {},
    },
  ];
}

type Frame = { data: Buffer | string; binary: boolean };

const frame: fc.Arbitrary<Frame> = fc.oneof(
  fc.uint8Array({ maxLength: 512 }).map((b) => ({ data: Buffer.from(b), binary: true })),
  fc.string({ maxLength: 200 }).map((s) => ({ data: s, binary: false })),
  fc.constantFrom('{', '{"type":', 'null', '[]', '1', '"x"', '{"__proto__":{"x":1}}', '{"type":"session.update","session":' + '['.repeat(5000) + ']'.repeat(5000) + '}').map((s) => ({ data: s, binary: false })),
  fc.jsonValue({ maxDepth: 4 }).map((v) => ({ data: JSON.stringify(v), binary: false })),
  fc
    .record({ type: fc.constantFrom('start', 'text', 'flush', 'stop', 'session.update', 'input_audio_buffer.append', 'response.create', 'user_message', 'audio', 'close_socket', 'keep_alive', 'input_audio_chunk'), event: fc.constantFrom('start', 'text', 'flush', 'stop'), text: fc.oneof(fc.string(), fc.constant('\ud800'), fc.constant('a\u0000')), request: fc.jsonValue({ maxDepth: 2 }) }, { requiredKeys: [] })
    .chain((o) => fc.boolean().map((mp) => (mp ? { data: Buffer.from(pack(o)), binary: true } : { data: JSON.stringify(o), binary: false }))),
);

/** Codes a socket may end with; anything else is a failure. */
const DOCUMENTED = new Set([1000, 1001, 1005, 1007, 1008, 1009, 3000, 3003, 3008, 4000, 4001, 4003, 4004, 4008, 4009, 4029, 4400, 4401, 4403, 4404, 4408, 4409, 4429]);

export async function fuzzSockets(app: TestServer, o: { seed: number; count: number }): Promise<{ sockets: number; frames: number; closeCodes: Record<string, number>; failures: { endpoint: string; code: number; reason: string }[] }> {
  const endpoints = await wsEndpoints(app);
  // Upgrade URLs broken too: bad percent-encoding in the voice id and in query parameters.
  const mangle = fc.option(fc.constantFrom('%00', 'a%00b', '%zz', '%', '%ED%A0%80', 'x'.repeat(3000)), { freq: 3 });
  const runs = fc.sample(fc.tuple(fc.constantFrom(...endpoints.keys()), fc.array(frame, { minLength: 1, maxLength: 8 }), mangle), { seed: o.seed, numRuns: o.count });
  const out = { sockets: 0, frames: 0, closeCodes: {} as Record<string, number>, failures: [] as { endpoint: string; code: number; reason: string }[] };
  for (const [i, frames, bad] of runs) {
    const e = endpoints[i]!;
    let url = await e.url();
    if (bad !== null) url = url.replace('/default/', `/${bad}/`) + `${url.includes('?') ? '&' : '?'}model_id=${bad}&language_code=${bad}&voice=${bad}&resume=${bad}`;
    const result = await new Promise<{ code: number; reason: string } | { http: number }>((resolve) => {
      const sock = new WebSocket(url, { headers: e.headers });
      let closedByUs = false;
      sock.on('error', () => {});
      sock.on('message', (d, binary) => {
        if (!binary && /"code":\s*500|"type":\s*"server_error"|Internal server error/i.test(d.toString())) out.failures.push({ endpoint: e.name, code: 500, reason: `error frame: ${d.toString().slice(0, 200)}` });
      });
      sock.on('unexpected-response', (_q, res) => {
        res.resume();
        resolve({ http: res.statusCode ?? 0 });
      });
      sock.on('close', (code, reason) => resolve(closedByUs ? { code: 0, reason: 'open' } : { code, reason: reason.toString() }));
      sock.on('open', async () => {
        for (const f of frames) {
          if (sock.readyState !== WebSocket.OPEN) break;
          sock.send(f.data, { binary: f.binary });
          out.frames++;
        }
        await new Promise((r) => setTimeout(r, 150));
        if (sock.readyState === WebSocket.OPEN) {
          closedByUs = true;
          sock.close(1000);
        }
      });
    });
    out.sockets++;
    if ('http' in result) {
      const k = `http ${result.http}`;
      out.closeCodes[k] = (out.closeCodes[k] ?? 0) + 1;
      if (result.http >= 500 && result.http !== 503) out.failures.push({ endpoint: e.name, code: result.http, reason: 'upgrade refused with a 5xx' });
      continue;
    }
    const k = String(result.code);
    out.closeCodes[k] = (out.closeCodes[k] ?? 0) + 1;
    if (result.code !== 0 && !DOCUMENTED.has(result.code)) out.failures.push({ endpoint: e.name, code: result.code, reason: result.reason });
  }
  return out;
}
