/**
 * The widget's words, each overridable through the `text-contents` attribute (a JSON object of
 * these keys). `{name}` is the agent's name, `{tool}` a tool's name.
 */
export const DEFAULT_TEXTS = {
  main_label: 'Talk to {name}',
  start_call: 'Start a call',
  new_call: 'New call',
  end_call: 'End call',
  mute_microphone: 'Mute',
  unmute_microphone: 'Unmute',
  collapse: 'Close',
  input_label: 'Message',
  input_placeholder: 'Type a message…',
  send_message: 'Send',
  transcript_label: 'Conversation',
  you: 'You',
  connecting_status: 'Connecting…',
  connected_status: 'Connected',
  listening_status: 'Listening',
  thinking_status: 'Thinking…',
  speaking_status: 'Speaking',
  user_ended_conversation: 'You ended the call',
  agent_ended_conversation: 'The call ended',
  error_occurred: 'Something went wrong:',
  unavailable: 'This assistant is not available right now.',
  microphone_unavailable: 'The microphone is unavailable: type your messages instead.',
  muted_status: 'Microphone muted',
  tool_running: 'Using {tool}…',
  tool_done: 'Used {tool}',
  tool_failed: '{tool} failed',
  terms_title: 'Before we start',
  accept_terms: 'Accept',
  dismiss_terms: 'Decline',
} as const;

export type WidgetTextKey = keyof typeof DEFAULT_TEXTS;
export type WidgetTexts = Record<WidgetTextKey, string>;

/** A JSON object attribute, or undefined when absent or not an object. */
export function jsonObject(raw: string | null): Record<string, unknown> | undefined {
  if (!raw) return undefined;
  try {
    const v: unknown = JSON.parse(raw);
    return v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

/** The defaults with the `text-contents` overrides that are strings of known keys. */
export function textsFrom(raw: string | null): WidgetTexts {
  const out: WidgetTexts = { ...DEFAULT_TEXTS };
  for (const [k, v] of Object.entries(jsonObject(raw) ?? {})) if (k in out && typeof v === 'string') out[k as WidgetTextKey] = v;
  return out;
}

export const fill = (text: string, vars: Record<string, string>) => text.replace(/\{(\w+)\}/g, (m, k: string) => vars[k] ?? m);

/** A consent notice shown before the first call: plain text, or JSON `{text, title?, links?, accept?, decline?}`. */
export interface Consent {
  title?: string;
  text: string;
  links: { text: string; href: string }[];
  accept?: string;
  decline?: string;
}

/** Only http(s) links are kept (never `javascript:` or `data:`). */
function safeHref(href: unknown): string | undefined {
  if (typeof href !== 'string') return undefined;
  try {
    const u = new URL(href, globalThis.location?.href);
    return u.protocol === 'https:' || u.protocol === 'http:' ? u.href : undefined;
  } catch {
    return undefined;
  }
}

export function consentFrom(raw: string | null): Consent | undefined {
  if (raw === null || raw.trim() === '' || raw.trim() === 'false') return undefined;
  const o = jsonObject(raw);
  if (!o) return { text: raw, links: [] };
  const str = (v: unknown) => (typeof v === 'string' && v.trim() ? v : undefined);
  const links = Array.isArray(o.links)
    ? o.links.flatMap((l: unknown) => {
      const link = (l ?? {}) as { text?: unknown; href?: unknown };
      const href = safeHref(link.href);
      return href ? [{ text: str(link.text) ?? href, href }] : [];
    })
    : [];
  return { title: str(o.title), text: str(o.text) ?? '', links, accept: str(o.accept), decline: str(o.decline) };
}

/** A short stable fingerprint of a consent notice: acceptance is remembered per notice. */
export function consentKey(agentId: string, c: Consent): string {
  const s = JSON.stringify([c.title, c.text, c.links]);
  let h = 5381;
  for (let i = 0; i < s.length; i++) h = ((h * 33) ^ s.charCodeAt(i)) >>> 0;
  return `parley-consent:${agentId}:${h.toString(36)}`;
}
