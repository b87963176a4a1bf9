/**
 * Dynamic and system variables, timezone resolution and world context (docs/api/sessions.md).
 * The session API validates and stores variables; the session runtime renders them once,
 * when the session is assembled, into the system prompt and the first message (configured or
 * overridden), and the system ones into webhook tool requests.
 */
import { isTimeZone } from '../agent-config/index.ts';

export type VariableValue = string | number | boolean;

/** Names of caller variables (`{{name}}`). */
export const VARIABLE_NAME = /^[A-Za-z][A-Za-z0-9_]*$/;
/** Variables with this prefix render only into tool requests: never into the model's context, never stored in clear nor echoed. */
export const SECRET_PREFIX = 'secret__';
/** Reserved: callers cannot set `system__…` (nor `system.…`, which the name pattern excludes). */
export const RESERVED_PREFIX = 'system__';

export type Channel = 'phone_inbound' | 'phone_outbound' | 'web_voice';

const PLACEHOLDER = /\{\{\s*([A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z][A-Za-z0-9_]*)?)\s*\}\}/g;

/**
 * Replaces `{{name}}` and `{{system.name}}` (spaces inside the braces tolerated) with the value
 * of that key in `vars`; a placeholder without a value stays literal. Values render as text
 * (`true`, `42`). Substituted text is not rendered again.
 */
export function renderTemplate(text: string, vars: Readonly<Record<string, VariableValue>>): string {
  if (!text.includes('{{')) return text;
  return text.replace(PLACEHOLDER, (whole, name: string) => (Object.hasOwn(vars, name) ? String(vars[name]) : whole));
}

/** The caller variables that may reach the model: every one except the `secret__` ones. */
export function promptVariables(dynamic: Readonly<Record<string, VariableValue>>): Record<string, VariableValue> {
  const out: Record<string, VariableValue> = {};
  for (const [k, v] of Object.entries(dynamic)) if (!k.startsWith(SECRET_PREFIX)) out[k] = v;
  return out;
}

/** Splits caller variables into the storable ones and the `secret__` ones. */
export function splitSecretVariables(dynamic: Readonly<Record<string, VariableValue>>): { plain: Record<string, VariableValue>; secret: Record<string, VariableValue> } {
  const plain: Record<string, VariableValue> = {};
  const secret: Record<string, VariableValue> = {};
  for (const [k, v] of Object.entries(dynamic)) (k.startsWith(SECRET_PREFIX) ? secret : plain)[k] = v;
  return { plain, secret };
}

/** Formatters per time zone are costly to build (~0.1 ms each); at most this many zones are kept per kind. */
const FORMATTER_CACHE_MAX = 256;

/** A bounded (least recently used) cache of one kind of formatter, keyed by time zone. */
function formatterCache(make: (timeZone: string) => Intl.DateTimeFormat): (timeZone: string) => Intl.DateTimeFormat {
  const cache = new Map<string, Intl.DateTimeFormat>();
  return (timeZone) => {
    let f = cache.get(timeZone);
    if (f) {
      cache.delete(timeZone); // refreshed: moves to the newest end
    } else {
      f = make(timeZone); // an invalid zone throws here and is not cached
      if (cache.size >= FORMATTER_CACHE_MAX) cache.delete(cache.keys().next().value!);
    }
    cache.set(timeZone, f);
    return f;
  };
}

const dateFormat = formatterCache((timeZone) => new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }));
const timeFormat = formatterCache((timeZone) => new Intl.DateTimeFormat('en-GB', { timeZone, hour: '2-digit', minute: '2-digit', hourCycle: 'h23' }));

/**
 * `format` remembered per zone for the minute of `at`: every turn's world-context line formats
 * the local time, and `formatToParts` was ~1 % of a busy node's thread. A zone's local date and
 * time change only on a whole minute (every zone's offset has been whole minutes since 1972).
 */
function perMinute(format: (at: Date, timeZone: string) => string): (at: Date, timeZone: string) => string {
  const last = new Map<string, { minute: number; value: string }>();
  return (at, timeZone) => {
    const minute = Math.floor(at.getTime() / 60_000);
    const hit = last.get(timeZone);
    if (hit && hit.minute === minute) return hit.value;
    const value = format(at, timeZone); // an invalid zone or date throws here and is not kept
    if (!hit && last.size >= FORMATTER_CACHE_MAX) last.clear();
    last.set(timeZone, { minute, value });
    return value;
  };
}

/** `YYYY-MM-DD` of `at` in `timeZone`. */
export const localDate = perMinute((at, timeZone) => {
  const parts = dateFormat(timeZone).formatToParts(at);
  const get = (t: string) => parts.find((p) => p.type === t)!.value;
  return `${get('year')}-${get('month')}-${get('day')}`;
});

/** `HH:MM` (24 h) of `at` in `timeZone`. */
export const localTime = perMinute((at, timeZone) => {
  const parts = timeFormat(timeZone).formatToParts(at);
  const get = (t: string) => parts.find((p) => p.type === t)!.value;
  return `${get('hour')}:${get('minute')}`;
});

export interface SystemVariableInput {
  channel: Channel;
  /** The resolved zone (`resolveTimezone`). */
  timezone: string;
  /** `YYYY-MM-DD`; default: the date of `now` in `timezone`. */
  today?: string;
  /** Used for `today` when it is not given; default: the current time. */
  now?: Date;
  /** The language override, else the configured speaking language. */
  language: string;
  /** The human party's E.164 number; anything else renders as "". */
  callerNumber?: string | null;
  /** Our number's E.164; anything else renders as "". */
  dialedNumber?: string | null;
}

const E164 = /^\+[1-9][0-9]{1,14}$/;

/** The reserved `system.*` variables of one session, keyed as they appear in templates. */
export function systemVariables(i: SystemVariableInput): Record<string, string> {
  const e164 = (n: string | null | undefined) => (n && E164.test(n) ? n : '');
  return {
    'system.channel': i.channel,
    'system.timezone': i.timezone,
    'system.today': i.today ?? localDate(i.now ?? new Date(), i.timezone),
    'system.language': i.language,
    'system.caller_number': e164(i.callerNumber),
    'system.dialed_number': e164(i.dialedNumber),
  };
}

/**
 * The session's zone, first match wins (docs/api/sessions.md): the request's `timezone` (validated
 * before, so taken as is), the agent's `conversation.timezone`, the client's browser zone when
 * it is a valid IANA name, the phone number's zone (single-zone countries; the telephony side
 * passes it), else `UTC`.
 */
export function resolveTimezone(i: { request?: string | null; agent?: string | null; client?: string | null; phone?: string | null }): string {
  if (i.request) return i.request;
  if (i.agent) return i.agent;
  if (i.client && i.client.length <= 64 && isTimeZone(i.client)) return i.client;
  if (i.phone && isTimeZone(i.phone)) return i.phone;
  return 'UTC';
}

/**
 * World-context lines for the model (not counted toward prompt limits). `start` at session
 * start: the date and the zone; `turn` before every reply: the local time to the minute.
 */
export function worldContext(kind: 'start' | 'turn', at: Date, timeZone: string): string {
  if (kind === 'start') return `Current date: ${localDate(at, timeZone)}. Time zone: ${timeZone}.`;
  return `Current local time: ${localTime(at, timeZone)} (${timeZone}).`;
}
