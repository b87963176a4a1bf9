/**
 * Custom LLM endpoints (docs/api/agents.md): an agent whose config has `llm.custom` gets its replies
 * from an OpenAI-compatible `POST {base_url}/chat/completions` with `stream: true`, read as
 * server-sent events, instead of the backend's `Generate`. Never falls back to a platform model.
 *
 * - Messages and tools go in the OpenAI shape (function calling); the body also carries
 *   `session_id` and, when the session has one, `user_id` (= `end_user_id`).
 * - The API key is stored sealed; it is opened here, once per session, and only sent in the
 *   `Authorization` header. It is never logged.
 * - Every request goes through the SSRF guard (`outboundStream`): the URL is checked and every
 *   address the host resolves to must be public, unless allow-listed (`PARLEY_OUTBOUND_ALLOW`).
 * - Failure rules: each attempt must produce its first token within `LLM_TIMEOUT_MS` and may
 *   not go silent longer than that afterwards. A request that fails before its first token is
 *   retried once (not after: a half-spoken reply is never restarted). A failed turn says a
 *   short hold line and the call goes on; the third consecutive failure says an apology and
 *   the session ends with `llm_endpoint_failure`. Each failure is reported (`onFailure`) so
 *   the runtime records an `llm.endpoint_error` item and tells the client.
 */
import type { ChatMessage, LlmEvent, ToolSpec } from '../../actors/types.ts';
import type { SecretBox } from '../crypto/secrets.ts';
import { OutboundError, outboundStream, type OutboundOptions } from '../net/index.ts';
import type { StoredDraft } from '../agent-config/index.ts';

/** Cap per attempt: time to the first token, and longest silence once streaming. */
export const LLM_TIMEOUT_MS = 10_000;
/** Retries of a request that failed before its first token. */
export const LLM_RETRIES = 1;
/** Consecutive failed turns after which the session ends (`llm_endpoint_failure`). */
export const LLM_MAX_CONSECUTIVE_FAILURES = 3;
/** Pause before the retry. */
const RETRY_DELAY_MS = 200;
/** Statuses that no retry can fix (the request or the credentials are wrong). */
const PERMANENT = new Set([400, 401, 403, 404, 405, 413, 422]);

const HOLD: Record<string, string> = {
  en: 'Sorry, one moment please.',
  es: 'Perdón, un momento por favor.',
  fr: 'Pardon, un instant s’il vous plaît.',
  de: 'Entschuldigung, einen Moment bitte.',
  ja: '申し訳ありません、少々お待ちください。',
  zh: '抱歉，请稍等。',
  ko: '죄송합니다, 잠시만 기다려 주세요.',
};
const APOLOGY: Record<string, string> = {
  en: 'I am sorry, I am having technical difficulties and have to end the call. Please try again later. Goodbye.',
  es: 'Lo siento, tengo problemas técnicos y debo terminar la llamada. Inténtalo más tarde. Adiós.',
  fr: 'Je suis désolé, je rencontre un problème technique et dois mettre fin à l’appel. Réessayez plus tard. Au revoir.',
  de: 'Es tut mir leid, ich habe technische Probleme und muss das Gespräch beenden. Bitte versuchen Sie es später erneut. Auf Wiederhören.',
  ja: '申し訳ありません。技術的な問題のため通話を終了します。後ほどおかけ直しください。',
  zh: '非常抱歉，出现了技术问题，我需要结束通话。请稍后再试。再见。',
  ko: '죄송합니다. 기술적인 문제로 통화를 종료해야 합니다. 나중에 다시 시도해 주세요. 안녕히 계세요.',
};

/** The spoken hold line and apology in a session language (English otherwise). */
export function holdLine(language: string): string {
  return HOLD[language] ?? HOLD.en;
}
export function apologyLine(language: string): string {
  return APOLOGY[language] ?? APOLOGY.en;
}

/** Why an attempt failed; `reason` is stable (recorded), `status` is the HTTP status when there was one. */
export class LlmEndpointError extends Error {
  constructor(
    readonly reason: 'timeout' | 'http_status' | 'connect_failed' | 'ssrf_blocked' | 'stream_error' | 'bad_response',
    message: string,
    readonly status: number | null = null,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'LlmEndpointError';
  }
  get permanent(): boolean {
    return this.reason === 'ssrf_blocked' || (this.status !== null && PERMANENT.has(this.status));
  }
}

/** One failure as the runtime records it (`llm.endpoint_error`). */
export interface LlmFailure {
  reason: LlmEndpointError['reason'];
  status: number | null;
  /** Attempts made for this turn (1 or 2). */
  attempts: number;
  /** Failed turns in a row, this one included. */
  consecutive: number;
  /** True on the failure that ends the session (after the apology is spoken). */
  fatal: boolean;
  /** Whether the reply had started (some text was already spoken). */
  afterFirstToken: boolean;
}

// ---------------------------------------------------------------------------------------------
// OpenAI shapes

export interface OpenAiMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string | null;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
  name?: string;
}

/** Chat messages in the OpenAI chat-completions shape. */
export function toOpenAiMessages(messages: ChatMessage[]): OpenAiMessage[] {
  return messages.map((m) => {
    if (m.role === 'tool') return { role: 'tool', tool_call_id: m.toolCallId ?? '', content: m.content };
    if (m.role === 'assistant' && m.toolCalls?.length) {
      return {
        role: 'assistant',
        content: m.content || null,
        tool_calls: m.toolCalls.map((c) => ({ id: c.id, type: 'function' as const, function: { name: c.name, arguments: c.argumentsJson || '{}' } })),
      };
    }
    return { role: m.role, content: m.content };
  });
}

/** Tool specs as OpenAI function tools. */
export function toOpenAiTools(tools: ToolSpec[]) {
  return tools.map((t) => {
    let parameters: unknown = { type: 'object', properties: {} };
    try {
      parameters = JSON.parse(t.parametersJsonSchema);
    } catch {
      // a spec without a valid schema takes no arguments
    }
    return { type: 'function' as const, function: { name: t.name, description: t.description, parameters } };
  });
}

// ---------------------------------------------------------------------------------------------
// Server-sent events

/**
 * Splits an SSE byte stream into the `data` of each event (multi-line data joined with `\n`;
 * comments, `event:`, `id:` and `retry:` fields ignored). Handles CRLF and chunks that cut
 * lines or UTF-8 sequences anywhere.
 */
export class SseParser {
  private buffer = '';
  private data: string[] = [];
  private readonly decoder = new TextDecoder();

  push(chunk: Uint8Array): string[] {
    this.buffer += this.decoder.decode(chunk, { stream: true });
    return this.drain(false);
  }

  end(): string[] {
    this.buffer += this.decoder.decode();
    return this.drain(true);
  }

  private drain(final: boolean): string[] {
    const out: string[] = [];
    const lines = this.buffer.split(/\r\n|\r|\n/);
    this.buffer = final ? '' : lines.pop()!;
    for (const line of lines) this.line(line, out);
    if (final && this.data.length) out.push(this.data.join('\n'));
    if (final) this.data = [];
    return out;
  }

  private line(line: string, out: string[]) {
    if (line === '') {
      if (this.data.length) out.push(this.data.join('\n'));
      this.data = [];
      return;
    }
    if (line.startsWith(':')) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    if (field === 'data') this.data.push(value);
  }
}

/**
 * Maps streamed chat-completion chunks to `LlmEvent`s: content deltas become `text`;
 * `tool_calls` deltas are assembled by `index` (id and name from the first fragment,
 * arguments concatenated) and emitted whole when the choice finishes (or the stream ends);
 * the finish reason becomes `finish`.
 */
export class ChunkMapper {
  private calls = new Map<number, { id: string; name: string; args: string }>();
  private finished = false;

  /** Events for one parsed chunk; throws `LlmEndpointError` for an error object. */
  map(chunk: unknown): LlmEvent[] {
    if (!chunk || typeof chunk !== 'object') throw new LlmEndpointError('bad_response', 'Custom LLM sent a chunk that is not an object');
    const c = chunk as { error?: unknown; choices?: { delta?: { content?: unknown; tool_calls?: unknown }; finish_reason?: unknown }[] };
    if (c.error) throw new LlmEndpointError('stream_error', 'Custom LLM sent an error in its stream');
    const out: LlmEvent[] = [];
    const choice = Array.isArray(c.choices) ? c.choices[0] : undefined;
    if (!choice) return out;
    const delta = choice.delta ?? {};
    if (typeof delta.content === 'string' && delta.content !== '') out.push({ type: 'text', text: delta.content });
    if (Array.isArray(delta.tool_calls)) {
      for (const raw of delta.tool_calls as { index?: unknown; id?: unknown; function?: { name?: unknown; arguments?: unknown } }[]) {
        const index = typeof raw.index === 'number' ? raw.index : this.calls.size;
        let call = this.calls.get(index);
        if (!call) this.calls.set(index, (call = { id: '', name: '', args: '' }));
        if (typeof raw.id === 'string' && raw.id) call.id = raw.id;
        if (typeof raw.function?.name === 'string') call.name += raw.function.name;
        if (typeof raw.function?.arguments === 'string') call.args += raw.function.arguments;
      }
    }
    if (typeof choice.finish_reason === 'string' && choice.finish_reason) out.push(...this.finish(choice.finish_reason));
    return out;
  }

  /** What is still owed at the end of the stream (tool calls without a finish chunk, the finish). */
  end(): LlmEvent[] {
    return this.finish('stop');
  }

  /** Whether any tool call has started assembling (counts as the first token). */
  get hasToolCalls(): boolean {
    return this.calls.size > 0;
  }

  private finish(reason: string): LlmEvent[] {
    if (this.finished) return [];
    this.finished = true;
    const out: LlmEvent[] = [];
    for (const [index, c] of [...this.calls.entries()].sort((a, b) => a[0] - b[0])) {
      if (!c.name) continue;
      out.push({ type: 'tool_call', id: c.id || `call_${index}`, name: c.name, argumentsJson: c.args || '{}' });
    }
    this.calls.clear();
    out.push({ type: 'finish', reason });
    return out;
  }
}

// ---------------------------------------------------------------------------------------------
// The client

export interface CustomLlmOptions {
  /** `llm.custom` of the pinned config (the key still sealed). */
  custom: NonNullable<StoredDraft['llm']['custom']>;
  box: Pick<SecretBox, 'open'>;
  sessionId: string;
  endUserId?: string | null;
  /** The session language (hold line and apology). */
  language: string;
  /** SSRF guard options (allow-list, resolver). */
  outbound?: OutboundOptions;
  /** Per-attempt cap; default `LLM_TIMEOUT_MS`. */
  timeoutMs?: number;
  retryDelayMs?: number;
  /** Called for every failed turn (after its retry), before the hold line or apology is yielded. */
  onFailure?(f: LlmFailure): void;
}

/** The endpoint the requests go to: `{base_url}/chat/completions` (base_url is stored without it). */
export function completionsUrl(baseUrl: string): string {
  return `${baseUrl.replace(/\/+$/, '')}/chat/completions`;
}

type Attempt = { events: AsyncGenerator<LlmEvent>; first: IteratorResult<LlmEvent> };

/**
 * A `generate` for the session backend backed by the custom endpoint. The function keeps the
 * count of consecutive failed turns for its session; create one per session.
 */
export function customLlmGenerate(o: CustomLlmOptions): (req: { messages: ChatMessage[]; tools: ToolSpec[]; signal: AbortSignal }) => AsyncGenerator<LlmEvent> {
  const apiKey = o.box.open(o.custom.api_key.sealed);
  const url = completionsUrl(o.custom.base_url);
  const timeoutMs = o.timeoutMs ?? LLM_TIMEOUT_MS;
  let consecutive = 0;

  /** One request: resolves with its first event (the first token), or rejects. */
  async function attempt(body: string, signal: AbortSignal): Promise<Attempt> {
    const ac = new AbortController();
    const onAbort = () => ac.abort(signal.reason);
    signal.addEventListener('abort', onAbort, { once: true });
    let timedOut = false;
    const firstToken = setTimeout(() => {
      timedOut = true;
      ac.abort();
    }, timeoutMs);
    const detach = () => {
      clearTimeout(firstToken);
      signal.removeEventListener('abort', onAbort);
    };
    const translate = (err: unknown): unknown => {
      if (signal.aborted) return err;
      if (err instanceof LlmEndpointError) return err;
      if (timedOut) return new LlmEndpointError('timeout', `Custom LLM gave no first token within ${timeoutMs} ms`);
      if (err instanceof OutboundError) {
        if (err.reason === 'timeout') return new LlmEndpointError('timeout', 'Custom LLM stream went silent', null, { cause: err });
        if (err.reason === 'ssrf_blocked' || err.reason === 'invalid_url') return new LlmEndpointError('ssrf_blocked', 'Custom LLM endpoint is not reachable under the outbound policy', null, { cause: err });
        if (err.reason === 'response_failed') return new LlmEndpointError('stream_error', 'Custom LLM stream broke', null, { cause: err });
        return new LlmEndpointError('connect_failed', 'Custom LLM endpoint could not be reached', null, { cause: err });
      }
      return new LlmEndpointError('bad_response', 'Custom LLM response could not be read', null, { cause: err });
    };
    try {
      const res = await outboundStream(
        url,
        {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', Accept: 'text/event-stream', Authorization: `Bearer ${apiKey}` },
          body,
          headersTimeoutMs: timeoutMs,
          idleTimeoutMs: timeoutMs,
          signal: ac.signal,
        },
        o.outbound,
      );
      if (res.status < 200 || res.status > 299) {
        res.close();
        throw new LlmEndpointError('http_status', `Custom LLM answered ${res.status}`, res.status);
      }
      const events = (async function* (): AsyncGenerator<LlmEvent> {
        const parser = new SseParser();
        const mapper = new ChunkMapper();
        let done = false;
        const handle = function* (data: string): Generator<LlmEvent> {
          if (data.trim() === '[DONE]') {
            done = true;
            return;
          }
          let parsed: unknown;
          try {
            parsed = JSON.parse(data);
          } catch (cause) {
            throw new LlmEndpointError('bad_response', 'Custom LLM sent an event that is not JSON', null, { cause });
          }
          const out = mapper.map(parsed);
          // A tool call being assembled is the model answering: the first-token cap is met
          // although its event comes only once the call is complete.
          if (mapper.hasToolCalls) clearTimeout(firstToken);
          yield* out;
        };
        try {
          for await (const chunk of res.body) {
            for (const data of parser.push(chunk)) {
              if (!done) yield* handle(data);
            }
            if (done) break;
          }
          if (!done) for (const data of parser.end()) yield* handle(data);
          yield* mapper.end();
        } catch (err) {
          throw translate(err);
        } finally {
          detach();
          res.close();
        }
      })();
      // The first token decides whether a retry is still allowed: wait for it here.
      const first = await events.next();
      clearTimeout(firstToken);
      return { events, first };
    } catch (err) {
      detach();
      throw translate(err);
    }
  }

  return async function* generate({ messages, tools, signal }) {
    const body = JSON.stringify({
      model: o.custom.model,
      messages: toOpenAiMessages(messages),
      ...(tools.length ? { tools: toOpenAiTools(tools) } : {}),
      stream: true,
      session_id: o.sessionId,
      ...(o.endUserId ? { user_id: o.endUserId } : {}),
    });
    let spoke = false;
    let attempts = 0;
    let failure: LlmEndpointError | null = null;
    {
      let got: Attempt | null = null;
      for (;;) {
        attempts++;
        try {
          got = await attempt(body, signal);
          break;
        } catch (err) {
          if (signal.aborted) return;
          if (!(err instanceof LlmEndpointError)) throw err;
          if (attempts > LLM_RETRIES || err.permanent) {
            failure = err;
            break;
          }
          await new Promise((r) => setTimeout(r, o.retryDelayMs ?? RETRY_DELAY_MS));
          if (signal.aborted) return;
        }
      }
      if (got) {
        try {
          let r = got.first;
          while (!r.done) {
            if (r.value.type === 'text' || r.value.type === 'tool_call') spoke = true;
            yield r.value;
            r = await got.events.next();
          }
        } catch (err) {
          if (signal.aborted) return;
          if (!(err instanceof LlmEndpointError)) throw err;
          failure = err;
        } finally {
          // A consumer that stops early (or an abort) closes the request too.
          await got.events.return(undefined).catch(() => {});
        }
      }
    }
    if (signal.aborted) return; // an interrupted turn neither fails nor succeeds
    if (!failure) {
      consecutive = 0;
      return;
    }
    consecutive++;
    const fatal = consecutive >= LLM_MAX_CONSECUTIVE_FAILURES;
    o.onFailure?.({ reason: failure.reason, status: failure.status, attempts, consecutive, fatal, afterFirstToken: spoke });
    if (fatal) yield { type: 'text', text: `${spoke ? ' ' : ''}${apologyLine(o.language)}` };
    else if (!spoke) yield { type: 'text', text: holdLine(o.language) };
    yield { type: 'finish', reason: 'error' };
  };
}
