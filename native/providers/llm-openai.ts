// The `openai` chat engine: `POST {base}/chat/completions` with `stream: true`, read as
// server-sent events (OpenAI, Ollama, vLLM, llama.cpp's server, Groq, …).
//
// - Messages, tools and tool calls in the OpenAI shape; text deltas as they come (the tokens of
//   one piece of the response, which arrived together, as one delta); tool calls assembled from
//   their pieces and sent whole; finish reasons and token usage
//   (`stream_options.include_usage`; estimated as characters / 4 when the server sends none).
// - Structured output: `response_format: {type: "json_schema"}`. A server that refuses it
//   (HTTP 400/422 naming response_format or json_schema) is asked again by instruction, and
//   the answer validated against the schema with one retry; the engine remembers the refusal.
// - Cancelling the call aborts the HTTP request at once.
import * as grpc from '@grpc/grpc-js';
import { Role, type GenerateRequest, type Message } from '../../src/gen/inference/v1/inference_pb.ts';
import { StatusError } from '../status.ts';
import { providerRequest, readJson, type CallScope, type Provider } from './http.ts';
import { schemaViolation } from './json-schema.ts';
import { readSseBatches } from './sse.ts';

export type ChatEvent =
  | { type: 'text'; text: string }
  | { type: 'tool_call'; id: string; name: string; argumentsJson: string }
  | { type: 'finish'; reason: 'stop' | 'tool_calls' | 'length'; inputTokens: number; outputTokens: number };

/** A chat engine behind Generate. */
export interface ChatEngine {
  readonly provider: Provider;
  generate(req: GenerateRequest, scope: CallScope): AsyncGenerator<ChatEvent>;
  /** A cheap call that tells whether the provider answers (`GET {base}/models`). */
  probe(scope: CallScope): Promise<void>;
}

type OpenAiMessage = Record<string, unknown>;

function toOpenAi(m: Message): OpenAiMessage {
  switch (m.role) {
    case Role.SYSTEM:
      return { role: 'system', content: m.content };
    case Role.ASSISTANT: {
      const out: OpenAiMessage = { role: 'assistant', content: m.content || (m.toolCalls.length ? null : '') };
      if (m.toolCalls.length) out.tool_calls = m.toolCalls.map((c) => ({ id: c.id, type: 'function', function: { name: c.name, arguments: c.argumentsJson || '{}' } }));
      return out;
    }
    case Role.TOOL:
      return { role: 'tool', tool_call_id: m.toolCallId, content: m.content };
    default:
      return { role: 'user', content: m.content };
  }
}

function toolChoice(choice: string): unknown {
  if (!choice || choice === 'auto') return 'auto';
  if (choice === 'none' || choice === 'required') return choice;
  return { type: 'function', function: { name: choice } };
}

const estimate = (s: string) => Math.ceil(s.length / 4);
const REFUSES_SCHEMA = /response_format|json_schema|json schema|structured/i;

export function createOpenAiChat(p: Provider): ChatEngine {
  const base = p.settings.baseUrl;
  /** Set once the server refused `response_format: json_schema`. */
  let noJsonSchema = false;

  const post = (body: Record<string, unknown>, scope: CallScope) =>
    providerRequest(p, `${base}/chat/completions`, { headers: { 'Content-Type': 'application/json', Accept: body.stream ? 'text/event-stream' : 'application/json' }, body: JSON.stringify({ model: p.settings.model, ...body }) }, scope);

  async function* plain(req: GenerateRequest, scope: CallScope): AsyncGenerator<ChatEvent> {
    const body: Record<string, unknown> = { messages: req.messages.map(toOpenAi), stream: true, stream_options: { include_usage: true } };
    if (req.tools.length && req.toolChoice !== 'none') {
      body.tools = req.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parametersJsonSchema ? JSON.parse(t.parametersJsonSchema) : { type: 'object', properties: {} } } }));
      body.tool_choice = toolChoice(req.toolChoice);
    }
    if (req.temperature !== undefined) body.temperature = req.temperature;
    if (req.maxTokens) body.max_tokens = req.maxTokens;
    const res = await post(body, scope);
    let text = '';
    let reason: string | null = null;
    let usage: { prompt_tokens?: number; completion_tokens?: number } | null = null;
    const calls = new Map<number, { id: string; name: string; args: string }>();
    try {
      // One text event per piece of the response: the deltas that arrived together go out as one
      // (the first text is not held back for anything not yet arrived).
      read: for await (const batch of readSseBatches(res.body)) {
        let piece = '';
        for (const ev of batch) {
          if (ev.data === '[DONE]') {
            if (piece) yield { type: 'text', text: piece };
            break read;
          }
          let chunk: Record<string, any>;
          try {
            chunk = JSON.parse(ev.data);
          } catch {
            continue;
          }
          if (chunk.error) {
            if (piece) yield { type: 'text', text: piece };
            throw new StatusError(grpc.status.UNAVAILABLE, `${p.what} failed mid-stream: ${String(chunk.error.message ?? 'error').slice(0, 200)}`);
          }
          if (chunk.usage) usage = chunk.usage;
          const choice = chunk.choices?.[0];
          if (!choice) continue;
          const delta = choice.delta ?? {};
          if (typeof delta.content === 'string' && delta.content) {
            text += delta.content;
            piece += delta.content;
          }
          for (const tc of delta.tool_calls ?? []) {
            const i = typeof tc.index === 'number' ? tc.index : calls.size;
            const c = calls.get(i) ?? { id: '', name: '', args: '' };
            if (tc.id) c.id = tc.id;
            if (tc.function?.name) c.name += tc.function.name;
            if (tc.function?.arguments) c.args += typeof tc.function.arguments === 'string' ? tc.function.arguments : JSON.stringify(tc.function.arguments);
            calls.set(i, c);
          }
          if (choice.finish_reason) reason = choice.finish_reason;
        }
        if (piece) yield { type: 'text', text: piece };
      }
    } finally {
      res.close();
    }
    const earlier = req.messages.reduce((n, m) => n + m.toolCalls.length, 0);
    let k = 0;
    for (const [, c] of [...calls].sort(([a], [b]) => a - b)) {
      k++;
      yield { type: 'tool_call', id: c.id || `call_${earlier + k}`, name: c.name, argumentsJson: c.args || '{}' };
    }
    const finish = calls.size ? 'tool_calls' : reason === 'length' ? 'length' : 'stop';
    const input = usage?.prompt_tokens ?? estimate(JSON.stringify(body.messages) + JSON.stringify(body.tools ?? ''));
    const output = usage?.completion_tokens ?? Math.max(1, estimate(text + [...calls.values()].map((c) => c.name + c.args).join('')));
    yield { type: 'finish', reason: finish, inputTokens: input, outputTokens: output };
  }

  /** One non-streamed completion: its text and usage. */
  async function complete(body: Record<string, unknown>, scope: CallScope): Promise<{ text: string; input: number; output: number; reason: string }> {
    const res = await post({ ...body, stream: false }, scope);
    const j = (await readJson(res)) as Record<string, any>;
    const choice = j.choices?.[0];
    const text = typeof choice?.message?.content === 'string' ? choice.message.content : '';
    return { text, input: j.usage?.prompt_tokens ?? estimate(JSON.stringify(body.messages)), output: j.usage?.completion_tokens ?? Math.max(1, estimate(text)), reason: choice?.finish_reason ?? 'stop' };
  }

  async function* structured(req: GenerateRequest, scope: CallScope): AsyncGenerator<ChatEvent> {
    const schema = JSON.parse(req.structured!.jsonSchema);
    const messages = req.messages.map(toOpenAi);
    const common: Record<string, unknown> = {};
    if (req.temperature !== undefined) common.temperature = req.temperature;
    if (req.maxTokens) common.max_tokens = req.maxTokens;
    let r: Awaited<ReturnType<typeof complete>> | null = null;
    if (!noJsonSchema) {
      try {
        r = await complete({ ...common, messages, response_format: { type: 'json_schema', json_schema: { name: req.structured!.name || 'output', schema } } }, scope);
      } catch (err) {
        if (!(err instanceof StatusError && err.code === grpc.status.INVALID_ARGUMENT && REFUSES_SCHEMA.test(err.details))) throw err;
        noJsonSchema = true;
      }
    }
    let input = r?.input ?? 0;
    let output = r?.output ?? 0;
    let problem = r ? check(r.text, schema) : 'json_schema refused';
    if (problem !== null) {
      // By instruction (the server refused json_schema, or ignored it): the schema in a system
      // message, the answer checked, one retry naming what was wrong.
      const ask = [{ role: 'system', content: `Answer with one JSON document and nothing else (no prose, no code fence). It must match this JSON Schema:\n${JSON.stringify(schema)}` }, ...messages];
      r = await complete({ ...common, messages: ask }, scope);
      input += r.input;
      output += r.output;
      problem = check(r.text, schema);
      if (problem !== null) {
        r = await complete({ ...common, messages: [...ask, { role: 'assistant', content: r.text }, { role: 'user', content: `That is not valid: ${problem}. Answer again with only the corrected JSON document.` }] }, scope);
        input += r.input;
        output += r.output;
        problem = check(r.text, schema);
      }
    }
    if (problem !== null) throw new StatusError(grpc.status.UNAVAILABLE, `${p.what} gave no JSON matching the schema (${problem})`);
    const doc = JSON.stringify(JSON.parse(stripFence(r!.text)));
    yield { type: 'text', text: doc };
    yield { type: 'finish', reason: r!.reason === 'length' ? 'length' : 'stop', inputTokens: input, outputTokens: output };
  }

  return {
    provider: p,
    generate: (req, scope) => (req.structured ? structured(req, scope) : plain(req, scope)),
    async probe(scope) {
      const res = await providerRequest(p, `${base}/models`, { method: 'GET' }, scope);
      res.close();
    },
  };
}

/** Models often wrap JSON in a code fence even when told not to. */
function stripFence(text: string): string {
  const m = /^\s*```(?:json)?\s*([\s\S]*?)\s*```\s*$/i.exec(text);
  return m ? m[1]! : text.trim();
}

/** Why `text` is not a JSON document matching `schema`, or null. */
function check(text: string, schema: unknown): string | null {
  let v: unknown;
  try {
    v = JSON.parse(stripFence(text));
  } catch {
    return 'the reply is not JSON';
  }
  return schemaViolation(v, schema);
}
