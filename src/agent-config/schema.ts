/**
 * The agent draft configuration: the PATCH body schema (write shape), the stored shape and
 * the read shape. docs/api/agents.md "Configuration" and "PATCH rules", plus the
 * extensions of D-CFG-1 (the other decisions: D-CFG-2 to D-CFG-8).
 *
 * Write-side conventions:
 * - every object is strict: unknown keys → 422 `extra_forbidden` with the key in `loc`;
 * - every field is optional (omitted keeps the stored value, rule 1) and explicit null is a
 *   422, except the named null exceptions (`webhooks.post_call`, `webhooks.conversation_init`,
 *   `llm.custom`, `llm.custom.api_key`, `conversation.outbound`, `analysis.summary.prompt`,
 *   `analysis.data_fields[].enum_options`);
 * - checks that need the stored draft (a field required when an object is first set) live in
 *   `merge.ts`; checks that need the database (ids resolve) live in `validateReferences`.
 */
import { z } from 'zod';
import { countTokens } from 'gpt-tokenizer/encoding/o200k_base';
import { ALLOWED_DESTINATIONS_TEXT, checkDestination } from '../telephony/destinations.ts';
import { checkUrl as defaultCheckUrl, isAllowListed, parseAllowList } from '../net/url-check.ts';

// ---------------------------------------------------------------------------------------------
// Enumerations and limits

export const FIRST_MESSAGE_MODES = ['off', 'fixed', 'prompt'] as const;
export const SPEAKING_LANGUAGES = ['en', 'ja', 'zh', 'ko', 'es', 'fr', 'de'] as const;
export const EAGERNESS = ['relaxed', 'balanced', 'eager'] as const;
export const INTERRUPTION_SENSITIVITY = ['low', 'balanced', 'high'] as const;
export const TRANSFER_MODES = ['cold', 'warm'] as const;
export const WARM_CONNECT = ['confirm', 'direct'] as const;
export const SUMMARY_LANGUAGES = ['en', 'zh', 'ja', 'ko', 'es', 'fr', 'de', 'pt', 'ru', 'ar'] as const;
export const DATA_FIELD_TYPES = ['boolean', 'text', 'number', 'enum'] as const;
export const LLM_TIERS = ['instant', 'medium', 'high'] as const;
export const VOICEMAIL_ACTIONS = ['hangup', 'leave_message', 'leave_prompt_message'] as const;

/** The reserved `{{system.*}}` variables (docs/api/sessions.md). Any other `system.` name is a 422. */
export const SYSTEM_VARIABLES = [
  'system.caller_number',
  'system.channel',
  'system.dialed_number',
  'system.language',
  'system.timezone',
  'system.today',
] as const;

export const LIMITS = {
  systemPromptChars: 100_000,
  systemPromptTokens: 4_000,
  firstMessageChars: 10_000,
  voiceIdChars: 256,
  maxDurationSeconds: { min: 60, max: 3600 },
  hangupAfterSeconds: { min: 10, max: 3600 },
  timezoneChars: 64,
  transferDestinations: 1,
  transferLabelChars: 64,
  postCallEndpoints: 5,
  webhookUrlChars: 4_000,
  webhookSecretChars: 256,
  initTimeoutSeconds: { min: 1, max: 8 },
  voicemailMessageChars: 10_000,
  idChars: 256,
  knowledgeSources: 100,
  summaryPromptChars: 1_000,
  dataFields: 20,
  criteria: 10,
  analysisDescriptionChars: 500,
  enumOptions: { min: 2, max: 20 },
  enumOptionChars: 500,
  llmBaseUrlChars: 2_000,
  llmModelChars: 256,
  llmApiKeyChars: 4_096,
} as const;

export const ANALYSIS_NAME_PATTERN = /^[a-z][a-z0-9_]{0,63}$/;
/** E.164: `+`, a non-zero digit, at most 15 digits in all. */
export const E164_PATTERN = /^\+[1-9][0-9]{1,14}$/;

// ---------------------------------------------------------------------------------------------
// Field-level helpers

/** The URL check used for webhook and custom-LLM URLs (the SSRF guard's static half). */
export type UrlChecker = (raw: string) => { ok: true; url: URL } | { ok: false; reason: string };

export interface ConfigSchemaOptions {
  /** Defaults to `checkUrl` of `src/net/url-check.ts` (honours `PARLEY_OUTBOUND_ALLOW`). */
  checkUrl?: UrlChecker;
}

type Ctx = z.core.$RefinementCtx<unknown>;

/** Adds a field error; `type` becomes the 422 entry's `type`. The input is never copied. */
function issue(ctx: Ctx, message: string, type = 'value_error', path?: (string | number)[]): void {
  ctx.addIssue({ code: 'custom', message, params: { type }, ...(path ? { path } : {}) });
}

const TOKENIZE_OPTIONS = { disallowedSpecial: new Set<string>() }; // user text: special-token spellings are plain text

/**
 * Runs that the o200k pre-tokenizer keeps as one piece: letters and marks, or anything but
 * letters and digits (punctuation, symbols, whitespace). Every piece longer than a few
 * characters lies inside one such run.
 */
const LONG_RUN = /[\p{L}\p{M}]{257,}|[^\p{L}\p{N}]{257,}/gu;
const RUN_SLICE = 64;

/**
 * o200k_base token count of a text, special-token spellings counted as ordinary text.
 *
 * Byte-pair encoding is quadratic in the length of a pre-tokenizer piece (100,000 spaces take
 * about 12 s in gpt-tokenizer, 100,000 letters 16 s), which would let one PATCH stall the event
 * loop. So runs longer than 256 code points are counted in slices of 64 code points; the rest
 * of the text is counted exactly. Ordinary prompts have no such runs and get the exact count;
 * for the pathological ones the count is an estimate close to the exact figure. Worst case
 * measured: 100,000 random CJK characters, about 0.5–0.8 s (the library's per-byte cost).
 */
export function countPromptTokens(text: string): number {
  LONG_RUN.lastIndex = 0;
  const pathological = LONG_RUN.test(text);
  LONG_RUN.lastIndex = 0; // matchAll starts where test() stopped otherwise
  if (!pathological) return countTokens(text, TOKENIZE_OPTIONS);
  let total = 0;
  let last = 0;
  for (const m of text.matchAll(LONG_RUN)) {
    if (m.index > last) total += countTokens(text.slice(last, m.index), TOKENIZE_OPTIONS);
    const points = Array.from(m[0]);
    for (let i = 0; i < points.length; i += RUN_SLICE) total += countTokens(points.slice(i, i + RUN_SLICE).join(''), TOKENIZE_OPTIONS);
    last = m.index + m[0].length;
  }
  if (last < text.length) total += countTokens(text.slice(last), TOKENIZE_OPTIONS);
  return total;
}

const SYSTEM_PLACEHOLDER = /\{\{\s*(system\.[^{}\s]*)\s*\}\}/g;
const KNOWN_SYSTEM = new Set<string>(SYSTEM_VARIABLES);

/** The unknown `{{system.x}}` names in a text, in order of first appearance. */
export function unknownSystemVariables(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(SYSTEM_PLACEHOLDER)) if (!KNOWN_SYSTEM.has(m[1]) && !out.includes(m[1])) out.push(m[1]);
  return out;
}

function systemVariablesCheck(value: string, ctx: Ctx): void {
  const unknown = unknownSystemVariables(value);
  if (unknown.length === 0) return;
  issue(
    ctx,
    `Value error, unknown system variable${unknown.length > 1 ? 's' : ''} ${unknown.map((n) => `{{${n}}}`).join(', ')}; valid names: ${SYSTEM_VARIABLES.join(', ')}`,
    'unknown_system_variable',
  );
}

/** A text that may hold `{{system.x}}` placeholders. */
const templated = (max: number) => z.string().max(max).superRefine(systemVariablesCheck);

const systemPrompt = z
  .string()
  .max(LIMITS.systemPromptChars)
  .superRefine((value, ctx) => {
    if (value.length > LIMITS.systemPromptChars) return; // already a too_big; do not tokenize huge input
    // Every token covers at least one UTF-8 byte, so a text of at most 4,000 bytes is within the limit.
    if (Buffer.byteLength(value, 'utf8') <= LIMITS.systemPromptTokens) return;
    const tokens = countPromptTokens(value);
    if (tokens > LIMITS.systemPromptTokens) {
      issue(ctx, `Value error, system_prompt exceeds ${LIMITS.systemPromptTokens} tokens (got ${tokens})`, 'value_error');
    }
  })
  .superRefine(systemVariablesCheck);

const TIME_ZONES = new Set<string>([...Intl.supportedValuesOf('timeZone'), 'UTC']);

/** An IANA zone name the runtime knows (canonical or alias). Offsets such as `+05:00` are not zone names. */
export function isTimeZone(name: string): boolean {
  if (TIME_ZONES.has(name)) return true;
  if (!/^[A-Za-z]/.test(name)) return false;
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

const timezone = z
  .string()
  .max(LIMITS.timezoneChars)
  .superRefine((value, ctx) => {
    if (value !== '' && value.length <= LIMITS.timezoneChars && !isTimeZone(value)) issue(ctx, 'Value error, timezone is not a valid IANA time zone', 'timezone');
  });

function urlField(max: number, check: UrlChecker) {
  return z
    .string()
    .min(1)
    .max(max)
    .superRefine((value, ctx) => {
      if (value.length === 0 || value.length > max) return;
      const verdict = check(value);
      if (!verdict.ok) issue(ctx, `Value error, ${verdict.reason}`, 'url');
    });
}

/**
 * `llm.custom.base_url`: https only, a public host, no query or fragment; a trailing
 * `/chat/completions` is dropped. Plain http is accepted only for an endpoint on
 * `PARLEY_OUTBOUND_ALLOW` (development and tests, never production).
 */
function baseUrlField(check: UrlChecker) {
  return z
    .string()
    .min(1)
    .max(LIMITS.llmBaseUrlChars)
    .superRefine((value, ctx) => {
      if (value.length === 0 || value.length > LIMITS.llmBaseUrlChars) return;
      const verdict = check(value);
      if (!verdict.ok) return issue(ctx, `Value error, ${verdict.reason}`, 'url');
      if (verdict.url.protocol !== 'https:' && !isAllowListed(verdict.url, parseAllowList())) return issue(ctx, 'Value error, base_url must use https', 'url');
      if (value.includes('?') || value.includes('#')) issue(ctx, 'Value error, base_url must not have a query or fragment', 'url');
    })
    .transform((value) => value.replace(/\/chat\/completions\/?$/, ''));
}

/** Adds a 422 at `[index, key]` for each entry whose `key` repeats an earlier one. */
function uniqueBy<T>(key: (item: T) => string | undefined, field: string | null, what: string) {
  return (items: T[], ctx: Ctx) => {
    const seen = new Set<string>();
    items.forEach((item, index) => {
      const k = key(item);
      if (k === undefined) return;
      if (seen.has(k)) issue(ctx, `Value error, duplicate ${what}`, 'duplicate', field === null ? [index] : [index, field]);
      seen.add(k);
    });
  };
}

function normalUrl(raw: string): string {
  try {
    return new URL(raw).href;
  } catch {
    return raw;
  }
}

// ---------------------------------------------------------------------------------------------
// PATCH body (write shape)

const transferDestination = z.strictObject({
  type: z.literal('phone').default('phone'),
  label: z.string().max(LIMITS.transferLabelChars).default(''),
  phone_number: z
    .string()
    .regex(E164_PATTERN, 'phone_number must be an E.164 number such as +14155550123')
    .superRefine((n, ctx) => {
      // docs/api/phone.md: E.164 within the country allow-list; the 422 names the allowed codes.
      if (!E164_PATTERN.test(n)) return;
      const c = checkDestination(n);
      if (!c.ok) issue(ctx, `Value error, transfer destinations must be in an allowed country: ${ALLOWED_DESTINATIONS_TEXT}${c.reason === 'premium_destination_blocked' ? ' (premium-rate numbers excluded)' : ''}`, c.reason);
    }),
  mode: z.enum(TRANSFER_MODES).default('cold'),
  warm_connect: z.enum(WARM_CONNECT).default('confirm'),
});

const analysisName = z.string().regex(ANALYSIS_NAME_PATTERN, 'name must match ^[a-z][a-z0-9_]{0,63}$');

const dataField = z
  .strictObject({
    name: analysisName,
    type: z.enum(DATA_FIELD_TYPES).default('text'),
    description: z.string().max(LIMITS.analysisDescriptionChars).default(''),
    enum_options: z
      .array(z.string().min(1).max(LIMITS.enumOptionChars))
      .superRefine(uniqueBy<string>((s) => s, null, 'enum option'))
      .nullable()
      .default(null),
  })
  .superRefine((field, ctx) => {
    const options = field.enum_options;
    if (field.type === 'enum') {
      if (!options || options.length < LIMITS.enumOptions.min || options.length > LIMITS.enumOptions.max) {
        issue(ctx, `Value error, enum fields need ${LIMITS.enumOptions.min} to ${LIMITS.enumOptions.max} enum_options`, 'value_error', ['enum_options']);
      }
    } else if (options !== null && options !== undefined) {
      issue(ctx, 'Value error, enum_options is only allowed when type is enum', 'value_error', ['enum_options']);
    }
  });

const criterion = z.strictObject({
  name: analysisName,
  description: z.string().max(LIMITS.analysisDescriptionChars).default(''),
});

const summary = z.strictObject({
  enabled: z.boolean().default(true),
  prompt: z.string().max(LIMITS.summaryPromptChars).nullable().default(null),
  language: z.enum(SUMMARY_LANGUAGES).default('en'),
});

const idList = (max?: number) => {
  const list = z.array(z.string().min(1).max(LIMITS.idChars));
  return (max === undefined ? list : list.max(max)).superRefine(uniqueBy<string>((s) => s, null, 'id'));
};

function buildPatchSchema(check: UrlChecker) {
  const postCallEndpoint = z.strictObject({
    url: urlField(LIMITS.webhookUrlChars, check),
    secret: z.string().max(LIMITS.webhookSecretChars).optional(),
  });
  return z.strictObject({
    prompt: z
      .strictObject({
        system_prompt: systemPrompt.optional(),
        first_message_mode: z.enum(FIRST_MESSAGE_MODES).optional(),
        first_message: templated(LIMITS.firstMessageChars).optional(),
        first_message_prompt: templated(LIMITS.firstMessageChars).optional(),
      })
      .optional(),
    voice: z
      .strictObject({
        voice_id: z.string().min(1).max(LIMITS.voiceIdChars).optional(),
        speaking_language: z.enum(SPEAKING_LANGUAGES).optional(),
        expressive: z.boolean().optional(),
      })
      .optional(),
    conversation: z
      .strictObject({
        max_duration_seconds: z.int().min(LIMITS.maxDurationSeconds.min).max(LIMITS.maxDurationSeconds.max).optional(),
        eagerness: z.enum(EAGERNESS).optional(),
        interruptible: z.boolean().optional(),
        interruption_sensitivity: z.enum(INTERRUPTION_SENSITIVITY).optional(),
        reengage_enabled: z.boolean().optional(),
        record_audio: z.boolean().optional(),
        timezone: timezone.optional(),
        transfer_destinations: z.array(transferDestination).max(LIMITS.transferDestinations).optional(),
        hangup_after_seconds: z.int().min(LIMITS.hangupAfterSeconds.min).max(LIMITS.hangupAfterSeconds.max).optional(),
        hangup_farewell_enabled: z.boolean().optional(),
        outbound: z
          .strictObject({
            amd_enabled: z.boolean().optional(),
            voicemail: z
              .strictObject({
                action: z.enum(VOICEMAIL_ACTIONS).optional(),
                message: templated(LIMITS.voicemailMessageChars).optional(),
              })
              .optional(),
          })
          .nullable()
          .optional(),
      })
      .optional(),
    tools: z
      .strictObject({
        enabled: z.boolean().optional(),
        tool_ids: idList().optional(),
        system_tools: z.strictObject({ hang_up_call: z.boolean().optional() }).optional(),
      })
      .optional(),
    webhooks: z
      .strictObject({
        // The array branch first: when both branches fail on an array, the 422 reports the array's problem.
        post_call: z
          .union([
            z
              .array(postCallEndpoint)
              .max(LIMITS.postCallEndpoints)
              .superRefine(uniqueBy<{ url: string }>((e) => (typeof e?.url === 'string' ? normalUrl(e.url) : undefined), 'url', 'webhook URL')),
            postCallEndpoint,
          ])
          .nullable()
          .transform((v) => (v === null ? [] : Array.isArray(v) ? v : [v]))
          .optional(),
        conversation_init: z
          .strictObject({
            url: urlField(LIMITS.webhookUrlChars, check).optional(),
            secret: z.string().max(LIMITS.webhookSecretChars).optional(),
            timeout_seconds: z.number().min(LIMITS.initTimeoutSeconds.min).max(LIMITS.initTimeoutSeconds.max).optional(),
          })
          .nullable()
          .optional(),
      })
      .optional(),
    knowledge_base: z
      .strictObject({
        enabled: z.boolean().optional(),
        knowledge_source_ids: idList(LIMITS.knowledgeSources).optional(),
      })
      .optional(),
    analysis: z
      .strictObject({
        summary: summary.optional(),
        data_fields: z
          .array(dataField)
          .max(LIMITS.dataFields)
          .superRefine(uniqueBy<{ name: string }>((f) => f?.name, 'name', 'data field name'))
          .optional(),
        criteria: z
          .array(criterion)
          .max(LIMITS.criteria)
          .superRefine(uniqueBy<{ name: string }>((c) => c?.name, 'name', 'criterion name'))
          .optional(),
      })
      .optional(),
    guardrails: z
      .strictObject({
        focus: z.boolean().optional(),
        manipulation: z.boolean().optional(),
      })
      .optional(),
    llm: z
      .strictObject({
        tier: z.enum(LLM_TIERS).optional(),
        custom: z
          .strictObject({
            base_url: baseUrlField(check).optional(),
            model: z.string().min(1).max(LIMITS.llmModelChars).optional(),
            // null or omitted keeps the stored key (D-CFG-2)
            api_key: z.string().min(1).max(LIMITS.llmApiKeyChars).nullable().optional(),
          })
          .nullable()
          .optional(),
      })
      .optional(),
  });
}

/** The PATCH body schema with the default URL check; use it for the OpenAPI document. */
export const configPatchSchema = buildPatchSchema((raw) => defaultCheckUrl(raw));

const schemaCache = new WeakMap<UrlChecker, typeof configPatchSchema>();

/** The PATCH body schema with an injected URL check (tests, a custom allow-list). */
export function createConfigPatchSchema(opts: ConfigSchemaOptions = {}): typeof configPatchSchema {
  if (!opts.checkUrl) return configPatchSchema;
  let schema = schemaCache.get(opts.checkUrl);
  if (!schema) schemaCache.set(opts.checkUrl, (schema = buildPatchSchema(opts.checkUrl)));
  return schema;
}

/** A validated PATCH body: `webhooks.post_call` is always a list here; secrets are still plaintext. */
export type ParsedPatch = z.output<typeof configPatchSchema>;
export type ConfigPatchInput = z.input<typeof configPatchSchema>;

// ---------------------------------------------------------------------------------------------
// Stored shape (what the store persists; secrets sealed)

/** A secret at rest: the AES-GCM sealed value and an HMAC fingerprint of the plaintext (for the content hash). */
export interface StoredSecret {
  sealed: string;
  fingerprint: string;
}

export type TransferDestination = z.output<typeof transferDestination>;
export type DataField = z.output<typeof dataField>;
export type Criterion = z.output<typeof criterion>;
export type Summary = z.output<typeof summary>;

export interface Outbound {
  amd_enabled: boolean;
  voicemail: { action: (typeof VOICEMAIL_ACTIONS)[number]; message: string };
}

export interface StoredDraft {
  prompt: {
    system_prompt: string;
    first_message_mode: (typeof FIRST_MESSAGE_MODES)[number];
    first_message: string;
    first_message_prompt: string;
  };
  voice: {
    voice_id: string;
    speaking_language: (typeof SPEAKING_LANGUAGES)[number];
    expressive: boolean;
  };
  conversation: {
    max_duration_seconds: number;
    eagerness: (typeof EAGERNESS)[number];
    interruptible: boolean;
    interruption_sensitivity: (typeof INTERRUPTION_SENSITIVITY)[number];
    reengage_enabled: boolean;
    record_audio: boolean;
    timezone: string;
    transfer_destinations: TransferDestination[];
    hangup_after_seconds: number;
    hangup_farewell_enabled: boolean;
    outbound: Outbound | null;
  };
  tools: {
    enabled: boolean;
    tool_ids: string[];
    system_tools: { hang_up_call: boolean };
  };
  webhooks: {
    post_call: { url: string; secret: StoredSecret | null }[];
    conversation_init: { url: string; secret: StoredSecret | null; timeout_seconds: number } | null;
  };
  knowledge_base: {
    enabled: boolean;
    knowledge_source_ids: string[];
  };
  analysis: {
    summary: Summary;
    data_fields: DataField[];
    criteria: Criterion[];
  };
  guardrails: {
    focus: boolean;
    manipulation: boolean;
  };
  llm: {
    tier: (typeof LLM_TIERS)[number];
    custom: { base_url: string; model: string; api_key: StoredSecret } | null;
  };
}

// ---------------------------------------------------------------------------------------------
// Read shape (responses; secrets only as has_secret / has_api_key)

const readTransferDestination = z.strictObject({
  type: z.literal('phone'),
  label: z.string(),
  phone_number: z.string(),
  mode: z.enum(TRANSFER_MODES),
  warm_connect: z.enum(WARM_CONNECT),
});

/** The response body of GET/PATCH config, and `config` inside a version. Every top-level field is always present. */
export const configReadSchema = z.strictObject({
  agent_id: z.string(),
  config_hash: z.string(),
  prompt: z.strictObject({
    system_prompt: z.string(),
    first_message_mode: z.enum(FIRST_MESSAGE_MODES),
    first_message: z.string(),
    first_message_prompt: z.string(),
  }),
  voice: z.strictObject({
    voice_id: z.string(),
    speaking_language: z.enum(SPEAKING_LANGUAGES),
    expressive: z.boolean(),
  }),
  conversation: z.strictObject({
    max_duration_seconds: z.int(),
    eagerness: z.enum(EAGERNESS),
    interruptible: z.boolean(),
    interruption_sensitivity: z.enum(INTERRUPTION_SENSITIVITY),
    reengage_enabled: z.boolean(),
    record_audio: z.boolean(),
    timezone: z.string(),
    transfer_destinations: z.array(readTransferDestination),
    hangup_after_seconds: z.int(),
    hangup_farewell_enabled: z.boolean(),
    outbound: z
      .strictObject({
        amd_enabled: z.boolean(),
        voicemail: z.strictObject({ action: z.enum(VOICEMAIL_ACTIONS), message: z.string() }),
      })
      .nullable(),
  }),
  tools: z.strictObject({
    enabled: z.boolean(),
    tool_ids: z.array(z.string()),
    system_tools: z.strictObject({ hang_up_call: z.boolean() }),
  }),
  webhooks: z.strictObject({
    post_call: z.array(z.strictObject({ url: z.string(), has_secret: z.boolean() })),
    conversation_init: z.strictObject({ url: z.string(), has_secret: z.boolean(), timeout_seconds: z.number() }).nullable(),
  }),
  knowledge_base: z.strictObject({
    enabled: z.boolean(),
    knowledge_source_ids: z.array(z.string()),
  }),
  analysis: z.strictObject({
    summary: z.strictObject({ enabled: z.boolean(), prompt: z.string().nullable(), language: z.enum(SUMMARY_LANGUAGES) }),
    data_fields: z.array(
      z.strictObject({
        name: z.string(),
        type: z.enum(DATA_FIELD_TYPES),
        description: z.string(),
        enum_options: z.array(z.string()).nullable(),
      }),
    ),
    criteria: z.array(z.strictObject({ name: z.string(), description: z.string() })),
  }),
  guardrails: z.strictObject({ focus: z.boolean(), manipulation: z.boolean() }),
  llm: z.strictObject({
    tier: z.enum(LLM_TIERS),
    custom: z.strictObject({ base_url: z.string(), model: z.string(), api_key: z.null(), has_api_key: z.boolean() }).nullable(),
  }),
  updated_at: z.string(),
});

export type ConfigRead = z.output<typeof configReadSchema>;
