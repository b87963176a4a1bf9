/**
 * `<parley-agent>`: a public agent (or a private one, through `sessionTokenProvider`) on any
 * page. A launcher opens a call card: voice first (the device's microphone and speaker through
 * the SDK's browser helpers), the live transcript, typing during the call, tool activity
 * inline, mute and end. Attributes, properties, events and CSS custom properties are in
 * docs/widget.md.
 */
import { createPublicSession } from '../client/public.ts';
import { browserMicrophone, browserSpeaker, type BrowserMicrophone, type BrowserSpeaker } from '../client/audio.ts';
import { ClientError, type AgentState, type ClientToolHandler, type Conversation, type Microphone, type SessionResponse, type StartOptions } from '../client/types.ts';
import { startWebsocket } from '../client/websocket.ts';
import { WIDGET_CSS } from './styles.ts';
import { consentFrom, consentKey, fill, jsonObject, textsFrom, type Consent, type WidgetTexts } from './texts.ts';

/** The display config the platform serves for a public agent (`GET /v1/agent/agents/{id}/widget`). */
export interface WidgetDisplayConfig {
  agent_name: string;
  language?: string | null;
  available?: boolean;
  overrides_allowed?: string[];
  [field: string]: unknown;
}

/** Creates a private agent's session on your backend (with your API key) and returns the creation response unmodified. */
export type SessionTokenProvider = () => Promise<SessionResponse>;

/** Events the element dispatches (bubbling and composed, so `document` hears them). */
export interface WidgetEventMap {
  'parley:connect': { sessionId: string };
  'parley:message': { role: 'user' | 'agent'; text: string; final: boolean; segmentId: string; typed: boolean };
  'parley:tool-call': { callId: string; toolName: string; source: string; status: 'started' | 'completed' | 'failed' | 'requested'; input?: string; output?: string; error?: string; params?: Record<string, unknown> };
  'parley:state': { state: AgentState };
  'parley:end': { sessionId: string; reason: string };
  'parley:error': { code: string; message: string; status?: number };
}

const POSITIONS = new Set(['bottom-right', 'bottom-left', 'top-right', 'top-left', 'inline']);
const ACTIVITY_EVERY_MS = 1000;

type CallPhase = 'idle' | 'connecting' | 'live' | 'ended';

/** Where the platform is when the element has no `server-url`: set by the served `/widget.js` from its own URL. */
let defaultServerUrl: string | undefined;
export function setDefaultServerUrl(url: string | undefined): void {
  defaultServerUrl = url;
}

/** `""`/`true`/present → true, `false`/`0`/`off`/`no` → false, absent → `dflt`. */
function flag(raw: string | null, dflt: boolean): boolean {
  if (raw === null) return dflt;
  return !/^(false|0|off|no)$/i.test(raw.trim());
}

function el<K extends keyof HTMLElementTagNameMap>(tag: K, props: Record<string, string> = {}, ...children: (Node | string)[]): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) e.setAttribute(k, v);
  e.append(...children);
  return e;
}

/** The SDK's failure as the widget's error event: code, message, and the HTTP status of a refusal. */
function errorInfo(err: unknown): { code: string; message: string; status?: number } {
  if (err instanceof ClientError) {
    // `Session refused (403): Origin not allowed` → the platform's own words.
    const message = err.code === 'session_refused' ? err.message.replace(/^Session refused \(\d+\): /, '') : err.message;
    return { code: err.code, message, ...(err.status !== undefined ? { status: err.status } : {}) };
  }
  return { code: 'error', message: err instanceof Error ? err.message : String(err) };
}

export class ParleyAgentElement extends HTMLElement {
  static observedAttributes = ['agent-id', 'agent-name', 'greeting', 'transcript', 'text-input', 'mic-muting', 'position', 'language', 'server-url', 'text-contents', 'consent'];

  // Properties are accessors over these: a page may set them before the element is defined,
  // and the constructor moves such values in (a class field would overwrite them).
  private provider: SessionTokenProvider | null = null;
  private tools_: Record<string, ClientToolHandler> = {};
  private variables_: Record<string, string | number | boolean> | null = null;

  /** For private agents: your backend creates the session with its key; the widget joins it. */
  get sessionTokenProvider(): SessionTokenProvider | null {
    return this.provider;
  }
  set sessionTokenProvider(v: SessionTokenProvider | null) {
    this.provider = typeof v === 'function' ? v : null;
    this.render();
  }

  /** Client tools the agent may call, by tool name (see the SDK's `clientTools`); read when a call starts. */
  get clientTools(): Record<string, ClientToolHandler> {
    return this.tools_;
  }
  set clientTools(v: Record<string, ClientToolHandler>) {
    this.tools_ = v && typeof v === 'object' ? v : {};
  }

  /** Values for the agent's `{{placeholders}}`; over the `dynamic-variables` attribute. */
  get dynamicVariables(): Record<string, string | number | boolean> | null {
    return this.variables_;
  }
  set dynamicVariables(v: Record<string, string | number | boolean> | null) {
    this.variables_ = v && typeof v === 'object' ? v : null;
  }

  private readonly shadow: ShadowRoot;
  private readonly ui: ReturnType<ParleyAgentElement['build']>;
  private config: WidgetDisplayConfig | null = null;
  private configError: { status?: number; message: string } | null = null;
  private configFor = '';
  private texts: WidgetTexts = textsFrom(null);
  private phase: CallPhase = 'idle';
  private convo: Conversation | null = null;
  private microphone: BrowserMicrophone | null = null;
  private speaker: BrowserSpeaker | null = null;
  private micFailed = false;
  private lastActivity = 0;
  private typedCount = 0;
  private hangingUp = false;
  private readonly segments = new Map<string, HTMLElement>();
  private readonly toolItems = new Map<string, HTMLElement>();

  constructor() {
    super();
    this.shadow = this.attachShadow({ mode: 'open' });
    const Sheet = (globalThis as { CSSStyleSheet?: typeof CSSStyleSheet }).CSSStyleSheet;
    try {
      const sheet = new Sheet!();
      sheet.replaceSync(WIDGET_CSS);
      this.shadow.adoptedStyleSheets = [sheet];
    } catch {
      this.shadow.append(el('style', {}, WIDGET_CSS));
    }
    this.ui = this.build();
    this.shadow.append(this.ui.root);
    for (const prop of ['sessionTokenProvider', 'clientTools', 'dynamicVariables'] as const) {
      if (Object.prototype.hasOwnProperty.call(this, prop)) {
        const value = (this as Record<string, unknown>)[prop];
        delete (this as Record<string, unknown>)[prop];
        (this as Record<string, unknown>)[prop] = value;
      }
    }
  }

  /** The conversation in progress, if any (the SDK's `Conversation`). */
  get conversation(): Conversation | null {
    return this.convo;
  }

  connectedCallback(): void {
    this.render();
    // A task later: a page script right after the element may still set sessionTokenProvider,
    // and a private agent's widget asks for no display config (it would be refused).
    setTimeout(() => void this.loadConfig(), 0);
  }

  disconnectedCallback(): void {
    void this.endCall();
  }

  attributeChangedCallback(name: string): void {
    if (name === 'text-contents') this.texts = textsFrom(this.getAttribute('text-contents'));
    if ((name === 'agent-id' || name === 'server-url') && this.isConnected) void this.loadConfig();
    this.render();
  }

  /** Opens the call card. */
  open(): void {
    this.ui.card.hidden = false;
    this.ui.launcher.setAttribute('aria-expanded', 'true');
    this.render();
    const focus = !this.ui.consent.hidden ? this.ui.accept : this.phase === 'live' && !this.ui.compose.hidden ? this.ui.input : !this.ui.start.hidden ? this.ui.start : this.ui.close;
    focus.focus();
  }

  /** Closes the card; a call in progress goes on. */
  close(): void {
    this.ui.card.hidden = true;
    this.ui.launcher.setAttribute('aria-expanded', 'false');
    this.ui.launcher.focus();
  }

  /** Starts a call (from a click: browsers start audio only after a user gesture). */
  async startCall(): Promise<void> {
    if (this.phase === 'connecting' || this.phase === 'live') return;
    const consent = this.consent();
    if (consent && !this.consented(consent)) {
      this.open();
      return;
    }
    const base = this.serverUrl();
    const agentId = this.getAttribute('agent-id') ?? '';
    if (!base || (!agentId && !this.sessionTokenProvider)) {
      this.fail({ code: 'misconfigured', message: !base ? 'server-url is required' : 'agent-id is required' });
      return;
    }
    this.clearTranscript();
    this.ui.error.hidden = true;
    this.micFailed = false;
    this.hangingUp = false;
    this.phase = 'connecting';
    this.render();
    // Audio objects now, inside the click: the autoplay policy lets them start.
    const workletUrl = new URL('/sdk/parley-audio-worklet.js', base).href;
    try {
      this.speaker = browserSpeaker({ workletUrl });
      this.microphone = browserMicrophone({ workletUrl });
    } catch {
      this.speaker = null;
      this.microphone = null;
      this.micFailed = true;
    }
    const options: StartOptions = {
      ...(this.speaker ? { speaker: this.speaker } : {}),
      ...(this.microphone ? { microphone: this.guardedMicrophone(this.microphone) } : {}),
      clientTools: this.clientTools,
    };
    try {
      const session = this.sessionTokenProvider ? await this.sessionTokenProvider() : await createPublicSession({
        baseUrl: base,
        agentId,
        ...(this.languageOverride() ? { overrides: { language: this.languageOverride()! } } : {}),
        ...(this.variables() ? { dynamicVariables: this.variables()! } : {}),
        ...(this.getAttribute('user-id') ? { endUserId: this.getAttribute('user-id')! } : {}),
      });
      if (this.phase !== 'connecting') return; // ended while the session was being created
      const convo = session.transport === 'livekit' ? await this.startLivekit(base, session, options) : await startWebsocket(session, options);
      if (this.phase !== 'connecting') {
        // Ended (or the element removed) while joining: leave at once.
        await convo.hangup().catch(() => {});
        return;
      }
      this.attach(convo);
    } catch (err) {
      this.releaseAudio();
      this.phase = 'idle';
      this.fail(errorInfo(err));
    }
  }

  /** Ends the call in progress, if any. */
  async endCall(): Promise<void> {
    const convo = this.convo;
    if (!convo) {
      if (this.phase === 'connecting') this.phase = 'idle';
      this.releaseAudio();
      this.render();
      return;
    }
    this.hangingUp = true;
    await convo.hangup().catch(() => {});
  }

  /** Sends a typed message in the call (starting one when none is in progress). */
  sendMessage(text: string): void {
    const t = text.trim();
    if (!t) return;
    if (!this.convo) {
      void this.startCall().then(() => this.convo && this.typed(t));
      return;
    }
    this.typed(t);
  }

  // ------------------------------------------------------------------------------------------

  private build() {
    const launcher = el('button', { class: 'launcher', part: 'launcher', type: 'button', 'aria-expanded': 'false', 'aria-controls': 'card' }, el('span', { class: 'dot', 'aria-hidden': 'true' }), el('span', { class: 'label' }));
    const title = el('h2', { id: 'title' });
    const status = el('p', { class: 'status', role: 'status' });
    const close = el('button', { class: 'close', type: 'button' });
    const greeting = el('p', { class: 'greeting' });
    const error = el('p', { class: 'error', role: 'alert', hidden: '' });
    const notice = el('p', { class: 'notice', hidden: '' });
    const accept = el('button', { class: 'primary', type: 'button' });
    const decline = el('button', { class: 'secondary', type: 'button' });
    const consent = el('div', { class: 'consent', hidden: '' });
    const transcript = el('div', { class: 'transcript', role: 'log' });
    const input = el('input', { id: 'message', type: 'text', autocomplete: 'off', enterkeyhint: 'send' });
    const inputLabel = el('label', { class: 'sr', for: 'message' });
    const send = el('button', { class: 'primary', type: 'submit' });
    const compose = el('form', { class: 'compose', part: 'compose' }, inputLabel, input, send);
    const start = el('button', { class: 'primary', type: 'button' });
    const mute = el('button', { class: 'secondary', type: 'button', 'aria-pressed': 'false' });
    const end = el('button', { class: 'danger', type: 'button' });
    const body = el('div', { class: 'body' }, greeting, consent, error, notice, transcript);
    const card = el('section', { id: 'card', class: 'card', part: 'card', role: 'dialog', 'aria-labelledby': 'title', hidden: '' },
      el('header', { class: 'head' }, el('span', { class: 'avatar', 'aria-hidden': 'true' }), el('div', { class: 'titles' }, title, status), close),
      body, compose, el('div', { class: 'controls' }, start, mute, end));
    const root = el('div', { class: 'root', part: 'root' }, card, launcher);

    launcher.addEventListener('click', () => {
      if (card.hidden) {
        this.open();
        if (this.phase === 'idle' && !this.blocked() && !this.consentPending()) void this.startCall();
      } else this.close();
    });
    close.addEventListener('click', () => this.close());
    card.addEventListener('keydown', (e) => {
      if ((e as KeyboardEvent).key === 'Escape') this.close();
    });
    start.addEventListener('click', () => void this.startCall());
    end.addEventListener('click', () => void this.endCall());
    mute.addEventListener('click', () => {
      if (!this.microphone) return;
      this.microphone.muted = !this.microphone.muted;
      this.render();
    });
    accept.addEventListener('click', () => {
      const c = this.consent();
      if (c) this.remember(c);
      this.render();
      void this.startCall();
    });
    decline.addEventListener('click', () => this.close());
    compose.addEventListener('submit', (e) => {
      e.preventDefault();
      const text = input.value;
      input.value = '';
      this.sendMessage(text);
    });
    input.addEventListener('input', () => {
      const now = Date.now();
      if (this.convo && this.phase === 'live' && now - this.lastActivity > ACTIVITY_EVERY_MS) {
        this.lastActivity = now;
        try {
          this.convo.sendActivity();
        } catch {
          // not connected at this moment: activity is advisory
        }
      }
    });
    return { root, launcher, card, title, status, close, greeting, error, notice, consent, accept, decline, transcript, compose, input, inputLabel, send, start, mute, end };
  }

  private serverUrl(): string | undefined {
    const raw = this.getAttribute('server-url') || defaultServerUrl;
    if (!raw) return undefined;
    try {
      return new URL(raw, globalThis.location?.href).origin === 'null' ? undefined : raw.replace(/\/+$/, '');
    } catch {
      return undefined;
    }
  }

  /**
   * The `language` attribute as the session's override, unless the display config says the
   * agent does not take it from visitors (then it only sets the card's `lang`): a refused
   * override would refuse the whole session.
   */
  private languageOverride(): string | undefined {
    const lang = this.getAttribute('language');
    if (!lang) return undefined;
    return this.config && Array.isArray(this.config.overrides_allowed) && !this.config.overrides_allowed.includes('language') ? undefined : lang;
  }

  private variables(): Record<string, string | number | boolean> | undefined {
    if (this.variables_) return this.variables_;
    const o = jsonObject(this.getAttribute('dynamic-variables'));
    return o as Record<string, string | number | boolean> | undefined;
  }

  private consent(): Consent | undefined {
    return consentFrom(this.getAttribute('consent'));
  }

  private consented(c: Consent): boolean {
    try {
      return globalThis.localStorage?.getItem(consentKey(this.getAttribute('agent-id') ?? '', c)) === '1';
    } catch {
      return this.accepted.has(consentKey(this.getAttribute('agent-id') ?? '', c));
    }
  }

  private readonly accepted = new Set<string>();
  private remember(c: Consent): void {
    const key = consentKey(this.getAttribute('agent-id') ?? '', c);
    this.accepted.add(key);
    try {
      globalThis.localStorage?.setItem(key, '1');
    } catch {
      // storage refused (private mode, sandboxed frame): remembered for this page only
    }
  }

  private consentPending(): boolean {
    const c = this.consent();
    return !!c && !this.consented(c) && !this.accepted.has(consentKey(this.getAttribute('agent-id') ?? '', c));
  }

  /** Fetches the display config (public agents). A private agent answers 403; with a token provider that is expected. */
  private async loadConfig(): Promise<void> {
    const base = this.serverUrl();
    const agentId = this.getAttribute('agent-id');
    const key = `${base}|${agentId}`;
    if (!base || !agentId || key === this.configFor || this.provider || !this.isConnected) return;
    this.configFor = key;
    this.config = null;
    this.configError = null;
    try {
      const res = await fetch(`${base}/v1/agent/agents/${encodeURIComponent(agentId)}/widget`, { credentials: 'omit' });
      const body: unknown = await res.json().catch(() => undefined);
      if (this.configFor !== key) return;
      if (res.ok && body && typeof body === 'object') this.config = body as WidgetDisplayConfig;
      else {
        const message = body && typeof (body as { message?: unknown }).message === 'string' ? (body as { message: string }).message : res.statusText;
        this.configError = { status: res.status, message };
        if (!this.sessionTokenProvider) this.dispatch('parley:error', { code: 'config_refused', status: res.status, message });
      }
    } catch (err) {
      if (this.configFor !== key) return;
      this.configError = { message: `Could not reach ${base}: ${(err as Error)?.message ?? String(err)}` };
      if (!this.sessionTokenProvider) this.dispatch('parley:error', { code: 'connection_failed', message: this.configError.message });
    }
    this.render();
  }

  /** A refused display config, or an agent that cannot start, is the widget's state, unless a token provider makes the call. */
  private blocked(): boolean {
    return !this.provider && (this.configError !== null || this.config?.available === false);
  }

  private name(): string {
    return this.getAttribute('agent-name') || this.config?.agent_name || 'Assistant';
  }

  /** The microphone, except that one that cannot start leaves the call going in text. */
  private guardedMicrophone(mic: BrowserMicrophone): Microphone {
    return {
      start: async (onFrame) => {
        try {
          return await mic.start(onFrame);
        } catch (err) {
          this.micFailed = true;
          this.microphone = null;
          this.dispatch('parley:error', errorInfo(err));
          this.render();
          return () => {};
        }
      },
    };
  }

  /** A livekit session joins through the SDK the platform serves (it fetches livekit-client on demand). */
  private async startLivekit(base: string, session: SessionResponse, options: StartOptions): Promise<Conversation> {
    const url = `${base}/sdk/parley-client.js`;
    const sdk = (await import(/* webpackIgnore: true */ /* @vite-ignore */ url)) as { start(s: SessionResponse, o: StartOptions): Promise<Conversation> };
    return sdk.start(session, options);
  }

  private attach(convo: Conversation): void {
    this.convo = convo;
    this.phase = 'live';
    const sessionId = convo.sessionId;
    convo.on('state', (state) => {
      this.dispatch('parley:state', { state });
      this.render();
    });
    convo.on('transcript', (t) => {
      this.showMessage(t.role, t.segmentId, t.text, t.final);
      this.dispatch('parley:message', { role: t.role, text: t.text, final: t.final, segmentId: t.segmentId, typed: false });
    });
    const tool = (status: 'started' | 'completed' | 'failed') => (e: { callId: string; toolName: string; source: string; input?: string; output?: string; error?: string }) => {
      this.showTool(e.callId, e.toolName, status);
      this.dispatch('parley:tool-call', { callId: e.callId, toolName: e.toolName, source: e.source, status, ...(e.input !== undefined ? { input: e.input } : {}), ...(e.output !== undefined ? { output: e.output } : {}), ...(e.error !== undefined ? { error: e.error } : {}) });
    };
    convo.on('toolCallStarted', tool('started'));
    convo.on('toolCallCompleted', tool('completed'));
    convo.on('toolCallFailed', tool('failed'));
    convo.on('clientToolCall', (c) => {
      this.dispatch('parley:tool-call', { callId: c.callId, toolName: c.toolName, source: 'client', status: 'requested', params: c.params });
    });
    convo.on('error', (e) => this.dispatch('parley:error', { code: e.code, message: e.message ?? e.code }));
    convo.on('ended', ({ reason }) => {
      this.convo = null;
      this.phase = 'ended';
      this.releaseAudio();
      this.endReason = reason;
      this.dispatch('parley:end', { sessionId, reason });
      this.render();
    });
    this.dispatch('parley:connect', { sessionId });
    this.render();
  }

  private endReason = '';

  private releaseAudio(): void {
    this.microphone = null;
    this.speaker?.close();
    this.speaker = null;
  }

  private typed(text: string): void {
    const convo = this.convo;
    if (!convo) return;
    try {
      convo.sendUserMessage(text);
    } catch (err) {
      this.fail(errorInfo(err));
      return;
    }
    const segmentId = `typed-${++this.typedCount}`;
    this.showMessage('user', segmentId, text, true);
    this.dispatch('parley:message', { role: 'user', text, final: true, segmentId, typed: true });
  }

  private fail(info: { code: string; message: string; status?: number }): void {
    this.ui.error.textContent = `${this.texts.error_occurred} ${info.message}`;
    this.ui.error.hidden = false;
    this.dispatch('parley:error', info);
    this.render();
  }

  private clearTranscript(): void {
    this.ui.transcript.replaceChildren();
    this.segments.clear();
    this.toolItems.clear();
  }

  private showMessage(role: 'user' | 'agent', segmentId: string, text: string, final: boolean): void {
    const key = `${role}:${segmentId}`;
    let li = this.segments.get(key);
    if (!li) {
      li = el('p', { class: `msg ${role}` });
      this.segments.set(key, li);
      this.ui.transcript.append(li);
    }
    li.classList.toggle('partial', !final);
    li.replaceChildren(el('span', { class: 'sr' }, `${role === 'user' ? this.texts.you : this.name()}: `), text);
    this.scrollDown();
  }

  private showTool(callId: string, toolName: string, status: 'started' | 'completed' | 'failed'): void {
    let li = this.toolItems.get(callId);
    if (!li) {
      li = el('p', { class: 'tool' });
      this.toolItems.set(callId, li);
      this.ui.transcript.append(li);
    }
    li.dataset.status = status;
    li.textContent = fill(status === 'started' ? this.texts.tool_running : status === 'completed' ? this.texts.tool_done : this.texts.tool_failed, { tool: toolName });
    this.scrollDown();
  }

  private scrollDown(): void {
    const body = this.ui.transcript.parentElement!;
    body.scrollTop = body.scrollHeight;
  }

  private dispatch<K extends keyof WidgetEventMap>(type: K, detail: WidgetEventMap[K]): void {
    this.dispatchEvent(new CustomEvent(type, { detail, bubbles: true, composed: true }));
  }

  private statusText(): string {
    const t = this.texts;
    if (this.phase === 'connecting') return t.connecting_status;
    if (this.phase === 'ended') return this.endReason === 'user_hangup' || this.hangingUp ? t.user_ended_conversation : t.agent_ended_conversation;
    if (this.phase !== 'live' || !this.convo) return '';
    if (this.microphone?.muted && this.convo.state === 'listening') return t.muted_status;
    switch (this.convo.state) {
      case 'initializing': return t.connecting_status;
      case 'listening': return t.listening_status;
      case 'thinking': return t.thinking_status;
      case 'speaking': return t.speaking_status;
      default: return t.connected_status;
    }
  }

  private render(): void {
    const u = this.ui;
    const t = this.texts;
    const name = this.name();
    const live = this.phase === 'live';
    const position = this.getAttribute('position') ?? 'bottom-right';
    u.root.dataset.position = POSITIONS.has(position) ? position : 'bottom-right';
    u.root.dataset.call = this.phase;
    u.root.dataset.state = live && this.convo ? this.convo.state : this.phase;
    const lang = this.getAttribute('language') || this.config?.language;
    if (lang) u.card.setAttribute('lang', lang);
    else u.card.removeAttribute('lang');
    (u.launcher.lastChild as HTMLElement).textContent = fill(t.main_label, { name });
    u.title.textContent = name;
    u.status.textContent = this.statusText();
    u.close.textContent = t.collapse;
    u.start.textContent = this.phase === 'ended' ? t.new_call : t.start_call;
    u.end.textContent = t.end_call;
    u.send.textContent = t.send_message;
    u.inputLabel.textContent = t.input_label;
    u.input.placeholder = t.input_placeholder;
    u.transcript.setAttribute('aria-label', t.transcript_label);

    const greeting = this.getAttribute('greeting');
    u.greeting.textContent = greeting ?? '';
    u.greeting.hidden = !greeting || this.phase !== 'idle' || u.transcript.childElementCount > 0;

    const consent = this.consent();
    const pending = !!consent && this.consentPending() && !live && this.phase !== 'connecting';
    u.consent.hidden = !pending;
    if (pending && consent) {
      u.accept.textContent = consent.accept ?? t.accept_terms;
      u.decline.textContent = consent.decline ?? t.dismiss_terms;
      const links = consent.links.length ? [el('ul', {}, ...consent.links.map((l) => el('li', {}, el('a', { href: l.href, target: '_blank', rel: 'noopener noreferrer' }, l.text))))] : [];
      u.consent.replaceChildren(el('h3', {}, consent.title ?? t.terms_title), el('p', {}, consent.text), ...links, el('div', { class: 'row' }, u.accept, u.decline));
    }

    const blocked = this.blocked();
    if (blocked && this.phase === 'idle') {
      u.error.textContent = this.configError ? `${t.error_occurred} ${this.configError.message}` : t.unavailable;
      u.error.hidden = false;
    }
    u.notice.textContent = t.microphone_unavailable;
    u.notice.hidden = !(this.micFailed && live);
    u.transcript.hidden = !flag(this.getAttribute('transcript'), true);
    u.compose.hidden = !flag(this.getAttribute('text-input'), true) || !live;
    u.start.hidden = live || this.phase === 'connecting' || pending;
    u.start.disabled = blocked;
    u.end.hidden = !(live || this.phase === 'connecting');
    u.mute.hidden = !live || !this.microphone || !flag(this.getAttribute('mic-muting'), true);
    u.mute.setAttribute('aria-pressed', String(!!this.microphone?.muted));
    u.mute.textContent = this.microphone?.muted ? t.unmute_microphone : t.mute_microphone;
  }
}

/** Registers the element under `tagName` (default `parley-agent`) unless something already is. */
export function defineParleyAgent(tagName = 'parley-agent'): void {
  const registry = (globalThis as { customElements?: CustomElementRegistry }).customElements;
  if (registry && !registry.get(tagName)) registry.define(tagName, class extends ParleyAgentElement {});
}
