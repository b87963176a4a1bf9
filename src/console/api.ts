/**
 * The console's one client of the public API: every page calls these functions and none calls
 * `fetch` itself. The API key lives in this tab's session storage only (never a URL, a log or
 * local storage); signing out removes it.
 */

/** One entry of a 422 answer: `loc` names the field (`['body', 'prompt', 'system_prompt']`). */
export interface FieldError {
  type: string;
  loc: (string | number)[];
  msg: string;
}

/** A failed API call: the status, the API's message, and the field errors of a 422. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly fields: FieldError[] = [],
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

const KEY = 'parley.apiKey';

export function storedKey(): string | null {
  try {
    return sessionStorage.getItem(KEY);
  } catch {
    return null;
  }
}

type Query = Record<string, string | number | boolean | undefined | null>;

interface CallOptions {
  query?: Query;
  json?: unknown;
  form?: FormData;
  headers?: Record<string, string>;
  /** Answer as bytes (audio) instead of JSON. */
  blob?: boolean;
  /** A key to use instead of the stored one (signing in). */
  key?: string;
}

/** What to tell a person for a status the API gave without a useful message. */
function fallbackMessage(status: number): string {
  if (status === 401) return 'Your API key was not accepted. Sign out and sign in with a valid key.';
  if (status === 403) return 'This team is not allowed to do that.';
  if (status === 404) return 'Not found: it may have been deleted.';
  if (status === 413) return 'That is too large for the API.';
  if (status === 429) return 'Too many requests: wait a moment and try again.';
  if (status >= 500) return `The server failed (${status}). Try again; if it keeps failing, check the server's log.`;
  return `The request failed (${status}).`;
}

async function call<T>(method: string, path: string, o: CallOptions = {}): Promise<T> {
  const key = o.key ?? storedKey();
  const headers: Record<string, string> = { ...o.headers };
  if (key) headers.Authorization = `Bearer ${key}`;
  let body: BodyInit | undefined;
  if (o.json !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(o.json);
  } else if (o.form) body = o.form;
  let url = path;
  if (o.query) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(o.query)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
    const s = q.toString();
    if (s) url += `?${s}`;
  }
  let res: Response;
  try {
    res = await fetch(url, { method, headers, body });
  } catch {
    throw new ApiError(0, 'The server cannot be reached. Check that Parley is running and try again.');
  }
  if (res.ok) {
    if (o.blob) return (await res.blob()) as T;
    if (res.status === 204) return undefined as T;
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }
  let parsed: unknown;
  try {
    parsed = await res.json();
  } catch {
    parsed = undefined;
  }
  if (res.status === 422 && Array.isArray(parsed)) {
    const fields = parsed as FieldError[];
    throw new ApiError(422, fields.length === 1 ? fields[0]!.msg : 'Some fields are not valid: see the messages next to them.', fields);
  }
  const message = parsed && typeof parsed === 'object' && typeof (parsed as { message?: unknown }).message === 'string' ? (parsed as { message: string }).message : '';
  throw new ApiError(res.status, message || fallbackMessage(res.status));
}

const enc = encodeURIComponent;

// ---------------------------------------------------------------------------------------------
// Shapes (the fields the console reads; the API's OpenAPI document has them all)

export interface Page<T> {
  items: T[];
  hasMore: boolean;
  total: number | null;
}
function page<T>(key: string) {
  return (b: Record<string, unknown>): Page<T> => ({ items: b[key] as T[], hasMore: b.has_more as boolean, total: b.total as number | null });
}

export interface Team { team_id: string; name: string; beta_access: boolean; credit: number; paid: number; created_at: string }
export interface Agent {
  agent_id: string; name: string; description: string; status: 'active' | 'archived'; publication_state: 'live' | 'draft';
  public_enabled: boolean; allowed_origins: string[]; overrides_allowed: string[]; created_at: string; updated_at: string;
}
export interface AgentConfig {
  agent_id: string; config_hash: string; updated_at: string;
  prompt: { system_prompt: string; first_message_mode: 'off' | 'fixed' | 'prompt'; first_message: string; first_message_prompt: string };
  voice: { voice_id: string; speaking_language: string; expressive: boolean };
  conversation: {
    max_duration_seconds: number; eagerness: string; interruptible: boolean; interruption_sensitivity: string; reengage_enabled: boolean;
    record_audio: boolean; timezone: string; hangup_after_seconds: number; hangup_farewell_enabled: boolean;
    transfer_destinations: { type: 'phone'; label: string; phone_number: string; mode: string; warm_connect: string }[];
    outbound: { amd_enabled: boolean; voicemail: { action: string; message: string } } | null;
  };
  tools: { enabled: boolean; tool_ids: string[]; system_tools: { hang_up_call: boolean } };
  webhooks: {
    post_call: { url: string; has_secret: boolean }[];
    conversation_init: { url: string; has_secret: boolean; timeout_seconds: number } | null;
  };
  knowledge_base: { enabled: boolean; knowledge_source_ids: string[] };
  analysis: {
    summary: { enabled: boolean; prompt: string | null; language: string };
    data_fields: { name: string; type: string; description: string; enum_options: string[] | null }[];
    criteria: { name: string; description: string }[];
  };
  guardrails: { focus: boolean; manipulation: boolean };
  llm: { tier: string; custom: { base_url: string; model: string; api_key: null; has_api_key: boolean } | null };
}
export interface Version { version_number: number; version_title: string | null; version_description: string | null; config_hash: string; published_at: string }
export interface SessionStart { session_id: string; transport: string; token: string; websocket_url?: string; [k: string]: unknown }
export interface SessionRow {
  session_id: string; agent_id: string; agent_name: string; status: string; source: string; direction: string;
  caller_number: string | null; dialed_number: string | null; dial_status: string | null;
  created_at: string; started_at: string | null; ended_at: string | null; duration_seconds: number | null; metadata: Record<string, unknown>;
}
export interface TurnMetricsRow { turn_id: number; recognition_ms: number | null; decide_ms: number | null; model_ms: number | null; synthesis_ms: number | null; total_ms: number | null; platform_ms: number | null }
export interface SessionItem { type: string; created_at: string; [k: string]: unknown }
export interface SessionDetail extends SessionRow {
  version_number: number; transport: string; ended_reason: string | null; overrides: Record<string, unknown>;
  items: SessionItem[]; metrics: { turns: TurnMetricsRow[] } | null; analysis?: unknown; analysis_status?: string;
  dynamic_variables: Record<string, unknown>;
}
export interface Analysis {
  status: string; summary: string | null; finished_at: string | null;
  data: { name: string; type: string; value: boolean | number | string | null; rationale: string }[];
  criteria_results: { name: string; result: string; rationale: string }[];
}
export interface PreviewStatus { session_id: string; status: string; ended_reason: string | null; duration_seconds: number | null; analysis_status: string | null; analysis: Analysis | null }
export interface RecordingView {
  status: string; error_message: string | null;
  tracks: { role: string; status: string; url: string | null; duration_ms: number | null }[];
}
export interface Delivery {
  delivery_id: string; event: string; url: string; status: string; attempts: number; max_attempts: number;
  last_status_code: number | null; last_error: string | null; next_attempt_at: string | null; delivered_at: string | null; created_at: string; updated_at: string;
}
export interface ToolHeader { name: string; kind: 'custom' | 'authorization_bearer' | 'authorization_basic'; value: string | null; has_secret: boolean }
export interface Tool {
  tool_id: string; name: string; description: string; tool_type: 'webhook' | 'client'; method: string; url: string; used_by: number;
  arguments: { name: string; description: string }[]; content_type: string; body_template: string; headers: ToolHeader[];
  timeout_seconds: number; error_handling: string; expects_response: boolean; execution_mode: string;
  mock_responses: { name: string; status_code: number; content_type: string; body: string }[];
  created_at: string; updated_at: string;
}
export interface ToolTestResult {
  status_code: number; latency_ms: number; headers: Record<string, string>; body: string; response_truncated: boolean; mock: string | null;
  request: { method: string; url: string; headers: Record<string, string | null>; body: string | null } | null;
}
export interface KnowledgeSource { knowledge_source_id: string; name: string; description: string; file_name: string; size_bytes: number; chunk_count: number; revision_number: number; created_at: string }
export interface AgentRef { agent_id: string; name: string }
export interface PhoneNumber { phone_number_id: string; phone_number: string; provider: string; label: string; agent_id: string | null; status: string; status_detail: string | null; created_at: string }
export interface AvailableNumber { phone_number: string; country_code: string; region: string; locality: string; provider: string; pricing: { daily_price: number } }
export interface Voice { _id: string; title: string; description: string; state: string; visibility: string; samples: { title: string; text: string; audio: string }[]; languages: string[]; created_at: string }
export interface Transcription { text: string; duration: number; segments: { text: string; start: number; end: number }[]; words?: { text: string; start: number; end: number }[]; language: string | null }
export interface UsageEntry { kind: string; unit: string; amount: number; cost: number; count: number }
export interface UsageReport { from: string; to: string; days: (UsageEntry & { date: string })[]; totals: UsageEntry[] }
export interface LedgerEntry { entry_id: string; amount: number; balance: number; reason: string; ref: string | null; created_at: string }

// ---------------------------------------------------------------------------------------------
// Calls, by page

/** Checks `key` against the API and keeps it for this tab; a wrong key throws (401). */
export async function signIn(key: string): Promise<Team> {
  const team = await call<Team>('GET', '/v1/team', { key });
  sessionStorage.setItem(KEY, key);
  return team;
}
export function signOut(): void {
  sessionStorage.removeItem(KEY);
}

export const team = () => call<Team>('GET', '/v1/team');

export const agents = {
  list: (q: { search?: string; page?: number; page_size?: number }) => call<Record<string, unknown>>('GET', '/v1/agent/agents', { query: q }).then(page<Agent>('agents')),
  create: (body: { name: string; description?: string }) => call<Agent>('POST', '/v1/agent/agents', { json: body }),
  get: (id: string) => call<Agent>('GET', `/v1/agent/agents/${enc(id)}`),
  update: (id: string, body: Partial<Pick<Agent, 'name' | 'description' | 'public_enabled' | 'allowed_origins' | 'overrides_allowed'>>) => call<Agent>('PATCH', `/v1/agent/agents/${enc(id)}`, { json: body }),
  remove: (id: string) => call<void>('DELETE', `/v1/agent/agents/${enc(id)}`),
  config: (id: string) => call<AgentConfig>('GET', `/v1/agent/agents/${enc(id)}/config`),
  patchConfig: (id: string, patch: unknown) => call<AgentConfig>('PATCH', `/v1/agent/agents/${enc(id)}/config`, { json: patch }),
  publish: (id: string, body: { version_title?: string; version_description?: string }) => call<Version>('POST', `/v1/agent/agents/${enc(id)}/publish`, { json: body }),
  versions: (id: string) => call<Record<string, unknown>>('GET', `/v1/agent/agents/${enc(id)}/versions`, { query: { page_size: 100 } }).then(page<Version>('versions')),
  version: (id: string, n: number) => call<Version & { config: AgentConfig }>('GET', `/v1/agent/agents/${enc(id)}/versions/${n}`),
  preview: (id: string) => call<SessionStart>('POST', `/v1/agent/agents/${enc(id)}/preview`, { json: {} }),
  previewStatus: (id: string, sessionId: string) => call<PreviewStatus>('GET', `/v1/agent/agents/${enc(id)}/preview/${enc(sessionId)}`),
  endPreview: (id: string, sessionId: string) => call<void>('POST', `/v1/agent/agents/${enc(id)}/preview/${enc(sessionId)}/end`),
};

export const sessions = {
  create: (agentId: string) => call<SessionStart>('POST', '/v1/agent/sessions', { json: { agent_id: agentId } }),
  list: (q: { agent_id?: string; status?: string; created_after?: string; created_before?: string; phone_number?: string; page?: number; page_size?: number }) =>
    call<Record<string, unknown>>('GET', '/v1/agent/sessions', { query: q }).then(page<SessionRow>('sessions')),
  get: (id: string) => call<SessionDetail>('GET', `/v1/agent/sessions/${enc(id)}`),
  end: (id: string) => call<void>('POST', `/v1/agent/sessions/${enc(id)}/end`),
  recording: (id: string) => call<RecordingView>('GET', `/v1/agent/sessions/${enc(id)}/recording`),
  deliveries: (id: string) => call<{ deliveries: Delivery[] }>('GET', `/v1/agent/sessions/${enc(id)}/webhook-deliveries`).then((b) => b.deliveries),
  redeliver: (id: string, deliveryId: string) => call<Delivery>('POST', `/v1/agent/sessions/${enc(id)}/webhook-deliveries/${enc(deliveryId)}/redeliver`),
};

export const tools = {
  list: (q: { search?: string; page?: number; page_size?: number } = {}) => call<Record<string, unknown>>('GET', '/v1/agent/tools', { query: q }).then(page<Tool>('tools')),
  get: (id: string) => call<Tool>('GET', `/v1/agent/tools/${enc(id)}`),
  create: (body: unknown) => call<Tool>('POST', '/v1/agent/tools', { json: body }),
  update: (id: string, body: unknown) => call<Tool>('PATCH', `/v1/agent/tools/${enc(id)}`, { json: body }),
  remove: (id: string) => call<void>('DELETE', `/v1/agent/tools/${enc(id)}`),
  agents: (id: string) => call<{ agents: AgentRef[] }>('GET', `/v1/agent/tools/${enc(id)}/agents`).then((b) => b.agents),
  test: (id: string, body: { arguments: Record<string, unknown>; mock?: string }) => call<ToolTestResult>('POST', `/v1/agent/tools/${enc(id)}/test`, { json: body }),
};

export const knowledge = {
  list: (q: { page?: number; page_size?: number } = {}) => call<Record<string, unknown>>('GET', '/v1/agent/knowledge-sources', { query: q }).then(page<KnowledgeSource>('knowledge_sources')),
  upload: (form: FormData) => call<KnowledgeSource>('POST', '/v1/agent/knowledge-sources', { form }),
  remove: (id: string) => call<void>('DELETE', `/v1/agent/knowledge-sources/${enc(id)}`),
  agents: (id: string) => call<{ agents: AgentRef[] }>('GET', `/v1/agent/knowledge-sources/${enc(id)}/agents`).then((b) => b.agents),
};

export const phoneNumbers = {
  available: (q: { country_code: string; area_code?: string }) => call<{ available_phone_numbers: AvailableNumber[] }>('GET', '/v1/agent/available-phone-numbers', { query: q }).then((b) => b.available_phone_numbers),
  list: () => call<Record<string, unknown>>('GET', '/v1/agent/phone-numbers', { query: { page_size: 100 } }).then(page<PhoneNumber>('phone_numbers')),
  buy: (body: { phone_number: string; provider: string; label?: string; agent_id?: string }) => call<PhoneNumber>('POST', '/v1/agent/phone-numbers', { json: body }),
  update: (id: string, body: { label?: string; agent_id?: string | null }) => call<PhoneNumber>('PATCH', `/v1/agent/phone-numbers/${enc(id)}`, { json: body }),
  release: (id: string) => call<void>('DELETE', `/v1/agent/phone-numbers/${enc(id)}`),
  call: (body: { agent_id: string; phone_number_id: string; to_number: string }) => call<{ session_id: string; status: string }>('POST', '/v1/agent/phone-calls', { json: body }),
};

export const speech = {
  voices: (own = false) => call<{ total: number; items: Voice[] }>('GET', '/model', { query: { page_size: 100, self: own ? true : undefined } }).then((b) => b.items),
  createVoice: (form: FormData) => call<Voice>('POST', '/model', { form }),
  removeVoice: (id: string) => call<void>('DELETE', `/model/${enc(id)}`),
  /** A voice's first sample as WAV bytes (for a play button). */
  sample: (id: string) => call<Blob>('GET', `/model/${enc(id)}/samples/0`, { blob: true }),
  tts: (model: string, body: Record<string, unknown>) => call<Blob>('POST', '/v1/tts', { json: body, headers: { model }, blob: true }),
  asr: (form: FormData) => call<Transcription>('POST', '/v1/asr', { form }),
};

export const usage = {
  report: (q: { from?: string; to?: string }) => call<UsageReport>('GET', '/v1/usage', { query: q }),
  ledger: (q: { page?: number; page_size?: number; reason?: string }) => call<Record<string, unknown>>('GET', '/v1/usage/ledger', { query: q }).then(page<LedgerEntry>('entries')),
};
