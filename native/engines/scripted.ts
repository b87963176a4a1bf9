// The scripted chat model: deterministic replies, tool calls and structured outputs
// derived from the conversation by the rules below (also in docs/inference.md).
//
// Plain mode, looking at the last message:
// 1. A tool result (role tool) is last: reply `<tool name> returned: <content>`.
// 2. A user turn is last and tools are declared (tool_choice not "none"): the first tool
//    whose name the turn mentions (case-insensitive; `_` and `-` may be written as
//    spaces) is called. Its arguments come from the turn: for each parameter `p` of the
//    tool's schema, `p is V`, `p: V` or `p = V` (same spelling freedom for `p`); V is a
//    quoted string, or runs to the next comma, semicolon, " and " or sentence end.
//    V is converted to the parameter's type (number, integer, boolean; enum values match
//    case-insensitively). If a required parameter has no value, no call is made and the
//    reply is `To use <tool> I need <p1>, <p2>.` tool_choice "required" or a tool name
//    forces a call of that (or the first) tool with whatever arguments were found.
// 3. A user turn containing `say "<text>"` (or say: <text>) is answered with exactly <text>.
// 3b. The system message carries knowledge passages (each between a `<passage>` line and a
//    `</passage>` line) and the user turn shares a word (letters or digits, 3 or more, any
//    case) with one of their sentences: the reply is the sentence sharing the most distinct
//    words with the turn (ties: the earlier passage, then the earlier sentence).
// 4. No user turn yet: `Hello! How can I help you?`
// 5. Otherwise: `You said: <last user turn>`.
// Text is streamed word by word (each delta is a word with its following space).
// Usage counts tokens as ceil(characters / 4) over input and output.
//
// Structured mode fills the given JSON schema from the conversation (user and assistant
// turns), walking it recursively with the name of the nearest property as the key:
// - string property named like "summary": `<n> user turns. The user said: <the user turns joined by " / ">`
//   (cut to 500 characters); named like "rationale" or "reason": a sentence naming the
//   key and whether the conversation mentioned it.
// - other strings / numbers / integers / booleans / enums: the value found by the same
//   `key is V` patterns as tool arguments in the conversation (enums: also an enum value
//   that appears in a turn mentioning the key); booleans also accept yes/no; none found:
//   null when the schema allows null, else "unknown" for enums that have it, else the
//   first enum value, "" , 0 or false.
// - object: every property filled; array: `minItems` items (0 when not set).
import type { Message, Tool } from '../../src/gen/inference/v1/inference_pb.ts';
import { Role } from '../../src/gen/inference/v1/inference_pb.ts';
import { SENTENCE_END_AHEAD, splitSentences } from '../sentences.ts';

export interface ScriptedEvent {
  textDelta?: string;
  toolCall?: { id: string; name: string; argumentsJson: string };
}

export interface ScriptedResult {
  events: ScriptedEvent[];
  finish: 'stop' | 'tool_calls' | 'length';
  inputTokens: number;
  outputTokens: number;
}

type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  enum?: unknown[];
  items?: Schema;
  minItems?: number;
  anyOf?: Schema[];
  oneOf?: Schema[];
  nullable?: boolean;
};

const tokens = (s: string) => Math.ceil(s.length / 4);

function keyPattern(key: string): string {
  return key
    .split(/[_\-\s]+/)
    .filter(Boolean)
    .map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('[_\\-\\s]+');
}

/** The raw value the text gives for `key` (`key is V`, `key: V`, `key = V`), or null. */
export function findValue(text: string, key: string): string | null {
  const re = new RegExp(`(?:^|[^\\p{L}\\p{N}_])${keyPattern(key)}\\s*(?:is|was|=|:)\\s*(?:"([^"]*)"|'([^']*)'|(.+?))(?=\\s*(?:,|;|\\band\\b|${SENTENCE_END_AHEAD}|$))`, 'iu');
  const m = re.exec(text);
  if (!m) return null;
  return (m[1] ?? m[2] ?? m[3] ?? '').trim();
}

function mentions(text: string, key: string): boolean {
  return new RegExp(`(?:^|[^\\p{L}\\p{N}_])${keyPattern(key)}(?:$|[^\\p{L}\\p{N}_])`, 'iu').test(text);
}

function types(s: Schema): string[] {
  const t = s.type ? (Array.isArray(s.type) ? s.type : [s.type]) : [];
  for (const alt of [...(s.anyOf ?? []), ...(s.oneOf ?? [])]) t.push(...types(alt));
  if (s.nullable) t.push('null');
  if (t.length === 0 && s.properties) t.push('object');
  if (t.length === 0 && s.enum) t.push('string');
  return t;
}

function convert(raw: string, s: Schema): unknown {
  const t = types(s);
  if (s.enum) {
    const hit = s.enum.find((e) => String(e).toLowerCase() === raw.toLowerCase());
    return hit === undefined ? undefined : hit;
  }
  if (t.includes('integer') || t.includes('number')) {
    const n = Number(raw.replace(/[^0-9.+-eE]/g, ''));
    if (!Number.isFinite(n) || raw.trim() === '') return undefined;
    return t.includes('integer') && !t.includes('number') ? Math.round(n) : n;
  }
  if (t.includes('boolean')) {
    if (/^(true|yes|y|on|1)$/i.test(raw)) return true;
    if (/^(false|no|n|off|0)$/i.test(raw)) return false;
    return undefined;
  }
  return raw;
}

function parseSchema(json: string): Schema {
  try {
    const s = JSON.parse(json || '{}');
    return s && typeof s === 'object' ? (s as Schema) : {};
  } catch {
    return {};
  }
}

function userTurns(messages: Message[]): string[] {
  return messages.filter((m) => m.role === Role.USER).map((m) => m.content);
}

function toolArguments(turn: string, schema: Schema): { args: Record<string, unknown>; missing: string[] } {
  const args: Record<string, unknown> = {};
  const missing: string[] = [];
  for (const [name, prop] of Object.entries(schema.properties ?? {})) {
    const raw = findValue(turn, name);
    const v = raw === null ? undefined : convert(raw, prop);
    if (v !== undefined) args[name] = v;
    else if (schema.required?.includes(name)) missing.push(name);
  }
  return { args, missing };
}

function words(text: string): string[] {
  return text.match(/\S+\s*/gu) ?? [];
}

function fill(schema: Schema, key: string, convo: string[], users: string[]): unknown {
  const t = types(schema);
  if (t.includes('object') && schema.properties) {
    const out: Record<string, unknown> = {};
    for (const [name, prop] of Object.entries(schema.properties)) {
      const generic = /^(value|result|rationale|reason|name|type)$/i.test(name);
      out[name] = fill(prop, generic ? (name.match(/^(name|rationale|reason)$/i) ? `${key}\u0000${name}` : key) : name, convo, users);
    }
    return out;
  }
  if (t.includes('array')) {
    const n = schema.minItems ?? 0;
    return Array.from({ length: n }, () => fill(schema.items ?? {}, key, convo, users));
  }
  const [base, role] = key.split('\u0000');
  if (role && /^name$/i.test(role)) return base;
  if (t.includes('string') && !schema.enum) {
    if (/summary/i.test(base) && !role) {
      const s = `${users.length} user turns. The user said: ${users.join(' / ')}`;
      return s.length > 500 ? s.slice(0, 500) : s;
    }
    if (role) {
      const seen = convo.some((c) => mentions(c, base));
      return seen ? `The conversation mentions ${base}.` : `The conversation does not mention ${base}.`;
    }
  }
  for (const turn of convo) {
    const raw = findValue(turn, base);
    if (raw !== null) {
      const v = convert(raw, schema);
      if (v !== undefined) return v;
    }
  }
  if (schema.enum) {
    for (const turn of convo) {
      if (!mentions(turn, base)) continue;
      const hit = schema.enum.find((e) => mentions(turn, String(e)));
      if (hit !== undefined) return hit;
    }
  }
  if (t.includes('null')) return null;
  if (schema.enum) return schema.enum.includes('unknown') ? 'unknown' : schema.enum[0];
  if (t.includes('integer') || t.includes('number')) return 0;
  if (t.includes('boolean')) return false;
  return '';
}

const wordSet = (text: string) => new Set((text.toLowerCase().match(/[\p{L}\p{N}]{3,}/gu) ?? []));

/** Rule 3b: the passage sentence that shares the most words with the turn, or null. */
function fromPassages(messages: Message[], turn: string): string | null {
  const system = messages.filter((m) => m.role === Role.SYSTEM).map((m) => m.content).join('\n');
  const asked = wordSet(turn);
  let best: string | null = null;
  let bestScore = 0;
  for (const m of system.matchAll(/^<passage>\n([\s\S]*?)\n<\/passage>$/gm)) {
    for (const sentence of splitSentences(m[1]!)) {
      const s = sentence.trim();
      if (!s) continue;
      let score = 0;
      for (const w of wordSet(s)) if (asked.has(w)) score++;
      if (score > bestScore) {
        best = s;
        bestScore = score;
      }
    }
  }
  return best;
}

/** Runs the scripted model over a conversation. */
export function runScripted(req: { messages: Message[]; tools: Tool[]; toolChoice: string; structuredSchema?: string; maxTokens: number }): ScriptedResult {
  const inputTokens = req.messages.reduce((n, m) => n + tokens(m.content), 0) + req.tools.reduce((n, t) => n + tokens(t.parametersJsonSchema), 0);
  const reply = (text: string): ScriptedResult => {
    let out = words(text);
    let finish: ScriptedResult['finish'] = 'stop';
    if (req.maxTokens > 0) {
      const kept: string[] = [];
      let n = 0;
      for (const w of out) {
        if (n + tokens(w) > req.maxTokens) { finish = 'length'; break; }
        n += tokens(w);
        kept.push(w);
      }
      out = kept;
    }
    return { events: out.map((w) => ({ textDelta: w })), finish, inputTokens, outputTokens: tokens(out.join('')) };
  };

  if (req.structuredSchema !== undefined) {
    const convo = req.messages.filter((m) => m.role === Role.USER || m.role === Role.ASSISTANT).map((m) => m.content);
    const users = userTurns(req.messages);
    const schema = parseSchema(req.structuredSchema);
    const doc = JSON.stringify(fill(schema, 'root', convo, users));
    return { events: [{ textDelta: doc }], finish: 'stop', inputTokens, outputTokens: tokens(doc) };
  }

  const last = req.messages[req.messages.length - 1];
  if (last?.role === Role.TOOL) return reply(`${last.name || 'tool'} returned: ${last.content}`);
  const turn = last?.role === Role.USER ? last.content : '';
  const choice = req.toolChoice || 'auto';
  if (turn && req.tools.length > 0 && choice !== 'none') {
    const forced = choice === 'required' ? req.tools[0] : req.tools.find((t) => t.name === choice);
    const named = req.tools.find((t) => mentions(turn, t.name));
    const tool = named ?? forced;
    if (tool) {
      const { args, missing } = toolArguments(turn, parseSchema(tool.parametersJsonSchema));
      if (missing.length === 0 || (forced && tool === forced)) {
        const n = req.messages.filter((m) => m.role === Role.ASSISTANT).reduce((k, m) => k + m.toolCalls.length, 0);
        const argumentsJson = JSON.stringify(args);
        const call: ScriptedEvent['toolCall'] = { id: `call_${n + 1}`, name: tool.name, argumentsJson };
        return { events: [{ toolCall: call }], finish: 'tool_calls', inputTokens, outputTokens: tokens(tool.name + argumentsJson) };
      }
      return reply(`To use ${tool.name} I need ${missing.join(', ')}.`);
    }
  }
  const say = /\bsay\s*(?:"([^"]*)"|:\s*(.+))/iu.exec(turn);
  if (say) return reply((say[1] ?? say[2] ?? '').trim());
  const known = turn ? fromPassages(req.messages, turn) : null;
  if (known) return reply(known);
  if (userTurns(req.messages).length === 0) return reply('Hello! How can I help you?');
  return reply(`You said: ${turn}`);
}

