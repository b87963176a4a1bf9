/**
 * Phone calls (issue 9, "Calls"): inbound calls to bound numbers and outbound calls through
 * `POST /v1/agent/phone-calls` (docs/api/phone.md), each a session of the agent's published
 * version (source `phone`) run by the session runtime with the carrier leg as its client
 * (`CallLink`). Sessions are created by `SessionService.createPhone` (agent checks, capacity,
 * up-front hold). Phone sessions with a transfer destination get the `transfer_call` tool.
 */
import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ServiceError, invalidField, type FieldError, type ServiceErrorOptions } from '../errors.ts';
import type { Principal } from '../auth/principal.ts';
import type { InferenceClient } from '../inference/index.ts';
import type { Logger } from '../log.ts';
import { outboundFetch } from '../net/index.ts';
import type { SecretBox } from '../crypto/secrets.ts';
import type { VoiceResolver } from '../speech/request.ts';
import type { SharedState } from '../state/index.ts';
import type { Sql } from '../store/db.ts';
import {
  claimIdempotencyKey, completeIdempotencyKey, countOutboundAttempt, numberForInbound, numberOfTeam, recordTransfer, releaseIdempotencyKey, setDialStatus,
} from './store.ts';
import { isNumberHeld, type PhoneNumberRow } from '../phone-numbers/store.ts';
import { appendSessionItems, getSessionForCreation, getSessionRuntime, markSessionEnded, type SessionRow } from '../sessions/store.ts';
import { newId } from '../ids.ts';
import type { CallDispatch } from '../transport/livekit-agent.ts';
import { CallLink, RoomCall, type CallParty } from '../telephony/call-link.ts';
import { CarrierRefused, type CallControl, type CallLeg, type Carriers, type InboundCall, type Provider } from '../telephony/index.ts';
import { checkDestination, singleZoneOf } from '../telephony/destinations.ts';
import { transferCallTool } from '../telephony/transfer-tool.ts';
import type { PhoneCallSettings } from '../config.ts';
import { signatureHeader, SIGNATURE_HEADER } from '../webhooks/sign.ts';
import { defaultOutbound, type Outbound, type StoredDraft } from '../agent-config/index.ts';
import { ConnectRefused, inferenceBackend, VOICEMAIL_HUNG_UP, type LiveSession, type SessionRuntime } from '../sessions/runtime.ts';
import { overridesSchema, sessionCreateBody, SESSION_CONTROL_CHANNEL, type SessionService } from '../sessions/service.ts';
import type { VariableValue } from '../sessions/variables.ts';

/** Retry-After of the concurrency 429: a call slot usually frees within seconds. */
const CONCURRENCY_RETRY_AFTER_S = 10;
/** How long a ringing outbound call's session may stay pending beyond the ring time. */
const PENDING_MARGIN_MS = 60_000;
/**
 * The lease of an outbound call's concurrency slot (shared state, `outbound-call-slots:<team>`),
 * renewed every third of it while the call rings or is live: the slots of a node that died
 * free themselves after this long.
 */
export const CALL_SLOT_LEASE_MS = 30_000;

export const phoneCallBody = z.strictObject({
  agent_id: z.string().min(1).max(256),
  phone_number_id: z.string().min(1).max(256),
  to_number: z.string().min(1).max(32).describe('E.164; US, CA and JP only (a JP trunk zero is normalized)'),
  dynamic_variables: sessionCreateBody.shape.dynamic_variables,
  overrides: overridesSchema.optional(),
  metadata: z.record(z.string(), z.unknown()).optional().describe('Stored and returned verbatim'),
});
export type PhoneCallBody = z.output<typeof phoneCallBody>;

export const phoneCallCreated = z.object({ session_id: z.string(), status: z.literal('queued') });
export const phoneCallError = z.object({ status: z.number().int(), message: z.string(), reason: z.string() });

/** A refusal of call creation with its `reason` (docs/api/phone.md; rendered beside status and message). */
function refused(code: ServiceError['code'], message: string, reason: string, options?: ServiceErrorOptions): ServiceError {
  return new ServiceError(code, message, { ...options, reason });
}

/** 422 with a reason: the usual list shape, one entry whose `type` is the reason. */
function unprocessable(reason: string, msg: string, loc: (string | number)[] = ['body', 'to_number']): ServiceError {
  const fields: FieldError[] = [{ type: reason, loc, msg: `Value error, ${msg}`, ctx: { reason } }];
  return refused('invalid', msg, reason, { fields });
}

// The settings are read with the rest of the configuration (src/config.ts).
export { OUTBOUND_CONCURRENCY_LIMIT, OUTBOUND_DAILY_LIMIT, phoneCallSettings, TRANSFER_PRICE_PER_MINUTE, type PhoneCallSettings } from '../config.ts';

export interface PhoneCallServiceDeps {
  sql: Sql;
  state: SharedState;
  box: SecretBox;
  sessions: SessionService;
  runtime: SessionRuntime;
  carriers: Carriers;
  inference: InferenceClient;
  resolveVoice?: VoiceResolver;
  log: Logger;
  /** `PARLEY_OUTBOUND_ALLOW` (conversation-init webhooks go through outboundFetch). */
  outboundAllow?: string[];
  settings: PhoneCallSettings;
  /** The LiveKit agent participant: joins the rooms of calls whose media is in LiveKit (livekit-sip). */
  livekit?: { dispatchCall(c: CallDispatch): void };
}

const isE164 = (n: string) => /^\+[1-9][0-9]{1,14}$/.test(n);

export class PhoneCallService {
  /** Outbound dials in progress, by session id (ending the session cancels the dial). */
  private readonly dialing = new Map<string, AbortController>();
  private unsubscribe: (() => Promise<void>) | null = null;
  private closed = false;
  /** Outbound call slots this node holds: session id → slot (renewed together). */
  private readonly slots = new Map<string, { key: string; holder: string }>();
  private renewer: NodeJS.Timeout | undefined;
  /** Transfer minutes being recorded (awaited on close). */
  private readonly billing = new Set<Promise<void>>();

  constructor(private readonly d: PhoneCallServiceDeps) {}

  /** Answers inbound calls of every carrier with call handling; listens for ends of ringing calls. */
  async start(): Promise<void> {
    for (const p of this.d.carriers.providers()) {
      const calls = this.d.carriers.get(p).calls;
      calls?.onInboundCall((call) => {
        this.inbound(call, calls).catch((err) => {
          this.d.log.error({ err }, 'inbound call failed');
          call.reject('unavailable');
        });
      });
    }
    this.unsubscribe = await this.d.state.subscribe(SESSION_CONTROL_CHANNEL, (m) => {
      try {
        const msg = JSON.parse(m) as { session_id?: string; action?: string };
        if (msg.action === 'end' && msg.session_id) this.dialing.get(msg.session_id)?.abort();
      } catch {
        // not ours
      }
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const ac of this.dialing.values()) ac.abort();
    await this.unsubscribe?.().catch(() => {});
    clearInterval(this.renewer);
    this.renewer = undefined;
    await Promise.allSettled([...this.billing]);
  }

  // -------------------------------------------------------------------------------------------
  // Outbound concurrency: leased slots in the shared state (across requests and nodes)

  /** Takes one of the team's `limit` call slots, or answers 429 `concurrency_limit_exceeded`. */
  private async takeSlot(teamId: string): Promise<{ key: string; holder: string }> {
    const limit = this.d.settings.concurrencyLimit;
    const slot = { key: `outbound-call-slots:${teamId}`, holder: randomUUID() };
    const r = await this.d.state.acquireSlot(slot.key, slot.holder, limit, CALL_SLOT_LEASE_MS);
    if (!r.acquired)
      throw refused('rate_limited', `Too many calls in progress (${limit} at once)`, 'concurrency_limit_exceeded', {
        headers: { 'Retry-After': String(CONCURRENCY_RETRY_AFTER_S) },
      });
    return slot;
  }

  private holdSlot(sessionId: string, slot: { key: string; holder: string }): void {
    this.slots.set(sessionId, slot);
    this.renewer ??= setInterval(() => {
      for (const [id, s] of this.slots) {
        this.d.state.renewSlot(s.key, s.holder, CALL_SLOT_LEASE_MS).then(
          (ok) => ok || this.d.log.warn({ sessionId: id }, 'outbound call slot lease was lost'),
          (err) => this.d.log.warn({ err }, 'outbound call slot renewal failed'),
        );
      }
    }, Math.floor(CALL_SLOT_LEASE_MS / 3));
    this.renewer.unref();
  }

  private freeSlot(slot: { key: string; holder: string }): void {
    // A failed release is harmless: the lease runs out on its own.
    this.d.state.releaseSlot(slot.key, slot.holder).catch((err) => this.d.log.warn({ err }, 'outbound call slot release failed'));
  }

  /** The outbound call of `sessionId` is over (not answered, or its session ended): its slot frees. */
  private callOver(sessionId: string): void {
    const slot = this.slots.get(sessionId);
    if (!slot) return;
    this.slots.delete(sessionId);
    if (this.slots.size === 0) {
      clearInterval(this.renewer);
      this.renewer = undefined;
    }
    this.freeSlot(slot);
  }

  // -------------------------------------------------------------------------------------------
  // Inbound

  private async inbound(call: InboundCall, calls: CallControl): Promise<void> {
    const log = this.d.log.child({ callId: call.callId });
    if (this.closed) return call.reject('unavailable');
    const number = await numberForInbound(this.d.sql, call.to);
    // docs/api/phone.md: unbound numbers ring busy.
    if (!number || !number.agent_id) return call.reject('busy');
    const agent = await getSessionForCreation(this.d.sql, number.agent_id, number.team_id);
    if (!agent || !agent.config || agent.status === 'archived') return call.reject('unavailable');
    const vars = await this.conversationInit(agent.config, { agentId: agent.id, callerNumber: call.from, dialedNumber: call.to }, log);
    let session: SessionRow;
    try {
      session = await this.d.sessions.createPhone({
        teamId: number.team_id, agentId: agent.id, direction: 'inbound', callerNumber: call.from, dialedNumber: call.to,
        dynamicVariables: vars, phoneZone: singleZoneOf(call.from), expiresInMs: PENDING_MARGIN_MS, transport: call.media ? 'websocket' : 'livekit',
      });
    } catch (err) {
      log.warn({ err, code: (err as ServiceError).code }, 'inbound call refused');
      return call.reject((err as ServiceError).code === 'unavailable' ? 'busy' : 'unavailable');
    }
    call.answer();
    await this.connect(session, call, calls);
  }

  /**
   * The conversation-init webhook (docs/api/agents.md): POST `{event:"conversation.init", agent_id,
   * caller_number, dialed_number}`, signed like post-call webhooks when it has a secret, within
   * `timeout_seconds`; a 2xx JSON reply's `dynamic_variables` (session rules) become the call's
   * variables. Timeout, failure or an invalid reply: the call connects without variables.
   */
  private async conversationInit(config: StoredDraft, c: { agentId: string; callerNumber: string; dialedNumber: string }, log: Logger): Promise<Record<string, VariableValue>> {
    const hook = config.webhooks.conversation_init;
    if (!hook) return {};
    const body = JSON.stringify({ event: 'conversation.init', agent_id: c.agentId, caller_number: c.callerNumber, dialed_number: c.dialedNumber });
    const headers: Record<string, string> = { 'Content-Type': 'application/json', 'User-Agent': 'Parley-Webhooks/1' };
    try {
      if (hook.secret) headers[SIGNATURE_HEADER] = signatureHeader(this.d.box.open(hook.secret.sealed), body);
      const r = await outboundFetch(hook.url, { method: 'POST', headers, body, timeoutMs: hook.timeout_seconds * 1000, maxResponseBytes: 256 * 1024 }, { allow: this.d.outboundAllow });
      if (r.status < 200 || r.status >= 300) {
        log.warn({ status: r.status }, 'conversation-init webhook refused; connecting without variables');
        return {};
      }
      const reply = JSON.parse(r.body.toString('utf8')) as { dynamic_variables?: unknown };
      const parsed = sessionCreateBody.shape.dynamic_variables.safeParse(reply?.dynamic_variables ?? {});
      if (!parsed.success) {
        log.warn({ issues: parsed.error.issues.length }, 'conversation-init webhook variables invalid; connecting without variables');
        return {};
      }
      return (parsed.data ?? {}) as Record<string, VariableValue>;
    } catch (err) {
      log.warn({ err: (err as Error).message, reason: (err as { reason?: string }).reason }, 'conversation-init webhook failed; connecting without variables');
      return {};
    }
  }

  // -------------------------------------------------------------------------------------------
  // Outbound

  /**
   * `POST /v1/agent/phone-calls`. `body` is the route-validated form of `raw` (the
   * request body as sent, whose hash an Idempotency-Key remembers). Order: body (422, the route) → Idempotency-Key (replay, 409, 422) →
   * outbound switch (403) → number (404) → agent (404) → published (409) → number state and
   * provider (422) → destination (422) → daily limit (429; every attempt reaching it counts)
   * → concurrency (429) → capacity (503) → credit (402). Then the dial runs in the background.
   */
  async create(p: Principal, body: PhoneCallBody, raw: unknown, idempotencyKey?: string): Promise<{ status: number; body: unknown }> {
    if (idempotencyKey === undefined || idempotencyKey === '') return { status: 201, body: await this.place(p, body) };
    if (idempotencyKey.length > 255) throw invalidField(['header', 'Idempotency-Key'], 'Value error, Idempotency-Key is at most 255 characters', 'string_too_long');
    const hash = createHash('sha256').update(JSON.stringify(raw)).digest('hex');
    const claim = await claimIdempotencyKey(this.d.sql, p.teamId, idempotencyKey, hash);
    if (claim.state === 'replay') return { status: claim.status, body: claim.response };
    if (claim.state === 'in_progress') throw refused('conflict', 'A request with this Idempotency-Key is still in progress', 'idempotency_key_conflict');
    if (claim.state === 'reused') throw unprocessable('idempotency_key_reuse', 'This Idempotency-Key was used with a different request body', ['header', 'Idempotency-Key']);
    try {
      const created = await this.place(p, body);
      await completeIdempotencyKey(this.d.sql, p.teamId, idempotencyKey, 201, created);
      return { status: 201, body: created };
    } catch (err) {
      await releaseIdempotencyKey(this.d.sql, p.teamId, idempotencyKey).catch(() => {});
      throw err;
    }
  }

  private async place(p: Principal, body: PhoneCallBody): Promise<z.infer<typeof phoneCallCreated>> {
    const s = this.d.settings;
    if (!s.outboundEnabled) throw refused('forbidden', 'Outbound calls are disabled on this platform', 'outbound_disabled');
    const number = await numberOfTeam(this.d.sql, p.teamId, body.phone_number_id);
    if (!number) throw refused('not_found', 'Phone number not found', 'number_not_found');
    const agent = await getSessionForCreation(this.d.sql, body.agent_id, p.teamId);
    if (!agent) throw refused('not_found', 'Agent not found', 'agent_not_found');
    if (agent.version_number === null) throw refused('conflict', 'Agent has no published version', 'agent_not_published');
    if (agent.status === 'archived') throw refused('conflict', 'Agent is archived', 'agent_not_published');
    if (number.status !== 'active') throw unprocessable('number_inactive', `The phone number is ${number.status}, not active`, ['body', 'phone_number_id']);
    let calls: CallControl | undefined;
    try {
      calls = this.d.carriers.get(number.provider as Provider).calls;
    } catch {
      calls = undefined;
    }
    if (!calls) throw unprocessable('number_provider_unsupported', `Provider ${number.provider} cannot place calls on this platform`, ['body', 'phone_number_id']);
    const dest = checkDestination(body.to_number);
    if (!dest.ok) throw unprocessable(dest.reason, dest.message);
    if (dest.number === number.phone_number || (await isNumberHeld(this.d.sql, dest.number)))
      throw unprocessable('self_call_blocked', 'Numbers held on this platform cannot be dialed');

    const attempts = await countOutboundAttempt(this.d.sql, p.teamId);
    if (attempts > s.dailyLimit) {
      const now = Date.now();
      const midnight = Date.UTC(new Date(now).getUTCFullYear(), new Date(now).getUTCMonth(), new Date(now).getUTCDate() + 1);
      throw refused('rate_limited', `Daily outbound call limit reached (${s.dailyLimit} per UTC day)`, 'daily_limit_exceeded', {
        headers: { 'Retry-After': String(Math.max(1, Math.ceil((midnight - now) / 1000))) },
      });
    }
    // docs/api/phone.md: 10 calls ringing or live per workspace. A leased slot in the shared state
    // (atomic across concurrent requests and nodes), held until the call is over.
    const slot = await this.takeSlot(p.teamId);

    let session: SessionRow;
    try {
      session = await this.d.sessions.createPhone({
        teamId: p.teamId, agentId: agent.id, direction: 'outbound', callerNumber: number.phone_number, dialedNumber: dest.number,
        dynamicVariables: (body.dynamic_variables ?? {}) as Record<string, VariableValue>, overrides: body.overrides, metadata: body.metadata,
        phoneZone: singleZoneOf(dest.number), expiresInMs: s.ringTimeoutMs + PENDING_MARGIN_MS, transport: number.provider === 'sandbox' ? 'websocket' : 'livekit',
      });
    } catch (err) {
      this.freeSlot(slot);
      if (err instanceof ServiceError && err.code === 'payment_required') throw refused('payment_required', 'Out of API credit', 'insufficient_credit');
      throw err;
    }
    this.holdSlot(session.id, slot);
    void this.dialOut(session, number, dest.number, calls, agent.config?.conversation.outbound ?? null);
    return { session_id: session.id, status: 'queued' };
  }

  /**
   * Rings the destination; answered: the session starts; otherwise it ends unbilled with its dial
   * status. Answered by a machine (the carrier's detection says `voicemail`) with answering-machine
   * detection on (`conversation.outbound`; null is on, hang up): hang up at once, unbilled
   * (`ended_reason` `voicemail`), or leave the version's message (the session runs its one turn).
   */
  private async dialOut(session: SessionRow, number: PhoneNumberRow, to: string, calls: CallControl, outbound: Outbound | null): Promise<void> {
    const log = this.d.log.child({ sessionId: session.id });
    const ac = new AbortController();
    this.dialing.set(session.id, ac);
    let leg: CallLeg | null = null;
    let voicemail = false;
    try {
      let status: string;
      let answeredBy: string | null = null;
      try {
        const r = await calls.dial({ from: number.phone_number, to, ringTimeoutMs: this.d.settings.ringTimeoutMs, sessionId: session.id, teamId: session.team_id }, ac.signal);
        status = r.status;
        if (r.status === 'answered') {
          leg = r.leg;
          answeredBy = r.answeredBy;
        }
      } catch (err) {
        log.warn({ err: err instanceof CarrierRefused ? err.detail : err }, 'outbound dial refused');
        status = 'failed';
      }
      // docs/api/webhooks.md: phone_call.dial_finished, once per call, queued with the dial status.
      await setDialStatus(this.d.sql, session.id, status, answeredBy);
      if (!leg) {
        await markSessionEnded(this.d.sql, session.id, { status: status === 'failed' && !ac.signal.aborted ? 'failed' : 'completed', reason: ac.signal.aborted ? 'ended_by_api' : `dial_${status}` });
        this.callOver(session.id);
        return;
      }
      if (ac.signal.aborted) {
        await calls.hangUp(leg.callId);
        this.callOver(session.id);
        return;
      }
      const amd = outbound ?? defaultOutbound();
      if (answeredBy === 'voicemail' && amd.amd_enabled) {
        // An empty message leaves nothing to say: the same as hanging up.
        if (amd.voicemail.action === 'hangup' || !amd.voicemail.message.trim()) {
          await calls.hangUp(leg.callId);
          await markSessionEnded(this.d.sql, session.id, { status: 'completed', reason: VOICEMAIL_HUNG_UP });
          this.callOver(session.id);
          return;
        }
        voicemail = true;
      }
    } catch (err) {
      log.error({ err }, 'outbound call failed');
      const answered = leg as CallLeg | null;
      if (answered) await calls.hangUp(answered.callId).catch(() => {});
      await markSessionEnded(this.d.sql, session.id, { status: 'failed', reason: 'error' }).catch(() => {});
      this.callOver(session.id);
      return;
    } finally {
      this.dialing.delete(session.id);
    }
    await this.connect(session, leg, calls, () => this.callOver(session.id), voicemail);
  }

  // -------------------------------------------------------------------------------------------
  // Both directions

  /**
   * Starts the session with the call as its client, and the transfer tool when a destination
   * exists. A leg without media here (livekit-sip: the media is in a LiveKit room) gets the
   * LiveKit agent participant instead, which joins the room and starts the session once the
   * phone's participant is there. `over` runs once the call is over (the session ended, or it
   * never started).
   */
  private async connect(session: SessionRow, leg: CallLeg, calls: CallControl, over: () => void = () => {}, voicemail = false): Promise<void> {
    const log = this.d.log.child({ sessionId: session.id, callId: leg.callId });
    const failed = async (reason: string, status: 'failed' | 'completed' = 'failed') => {
      await calls.hangUp(leg.callId).catch(() => {});
      await markSessionEnded(this.d.sql, session.id, { status, reason }).catch(() => {});
      over();
    };
    const started = (live: LiveSession) => {
      void live.handle.ended.then(over, over);
      return live;
    };
    if (!leg.media) {
      const room = leg.mediaRoom;
      if (!room || !this.d.livekit) {
        log.error({}, 'call media is not reachable by this runtime');
        return failed('media_unavailable');
      }
      this.d.livekit.dispatchCall({
        sessionId: session.id, room: room.name, caller: room.identity, maxDurationSeconds: session.max_duration_seconds,
        deadline: new Date(Date.now() + PENDING_MARGIN_MS),
        start: async () => {
          const party = new RoomCall(leg);
          const tools = await this.toolsFor(session, party, calls, log);
          const live = party.watch(started(await this.d.runtime.startCall(session.id, { tools, voicemail })));
          // The session ending (agent hang-up, max duration, API) hangs the phone up.
          void live.handle.ended.then(() => calls.hangUp(leg.callId).catch((err) => log.warn({ err }, 'carrier hang-up failed')));
          return live;
        },
        onFailed: (reason, err) => {
          if (err && !(err instanceof ConnectRefused)) log.error({ err, reason }, 'phone session did not start in its LiveKit room');
          if (reason === 'caller_absent') void failed('user_hangup', 'completed'); // the phone left before the agent met it
          else void failed(err instanceof ConnectRefused && err.code === 4503 ? 'capacity' : 'media_unavailable');
        },
      });
      return;
    }
    const link = new CallLink(leg, calls, log);
    try {
      const tools = await this.toolsFor(session, link, calls, log);
      const live = started(await this.d.runtime.startCall(session.id, { tools, voicemail }));
      link.attach(live);
    } catch (err) {
      if (!(err instanceof ConnectRefused)) log.error({ err }, 'phone session did not start');
      await failed(err instanceof ConnectRefused && err.code === 4503 ? 'capacity' : 'error');
    }
  }

  /**
   * Transfer minutes (docs/api/phone.md): from the handoff to the end of the human leg, billed on
   * their own (`call_transfers`, ledger `transfer_usage`) at `PARLEY_TRANSFER_PRICE_PER_MINUTE`.
   * A carrier that cannot tell when the handed-off call ends records nothing.
   */
  private billTransfer(session: SessionRow, h: { mode: 'cold' | 'warm'; destination: string; at: Date; handoff: { ended: Promise<void> | null } }, log: Logger): void {
    if (!h.handoff.ended) return;
    const price = this.d.settings.transferPricePerMinuteMicros;
    const done: Promise<void> = h.handoff.ended
      .then(() => recordTransfer(this.d.sql, { id: newId('xfer'), teamId: session.team_id, sessionId: session.id, mode: h.mode, destination: h.destination, startedAt: h.at, pricePerMinuteMicros: price }))
      .then(
        (row) => log.info({ minutes: row.minutes, costMicros: String(row.cost_micros) }, 'transfer minutes billed'),
        (err) => log.error({ err }, 'transfer minutes not recorded'),
      )
      .finally(() => this.billing.delete(done));
    this.billing.add(done);
  }

  private async toolsFor(session: SessionRow, link: CallParty, calls: CallControl, log: Logger) {
    const rt = await getSessionRuntime(this.d.sql, session.id);
    const destination = rt?.config.conversation.transfer_destinations[0];
    if (!rt || !destination) return [];
    const config = rt.config;
    const backend = inferenceBackend(this.d.inference, { teamId: session.team_id, chatModel: `llm-${config.llm?.tier ?? 'medium'}`, requestId: session.id, resolveVoice: this.d.resolveVoice, log });
    return [
      transferCallTool({
        destination, link, carrier: calls, backend, log,
        ourNumber: session.dialed_number ?? '',
        callerNumber: session.caller_number && isE164(session.caller_number) ? session.caller_number : '',
        sessionId: session.id,
        teamId: session.team_id,
        voiceId: session.overrides.voice_id ?? config.voice.voice_id,
        language: session.overrides.language ?? config.voice.speaking_language,
        ringTimeoutMs: this.d.settings.ringTimeoutMs,
        record: (items) => void appendSessionItems(this.d.sql, session.id, items).catch((err) => log.error({ err }, 'transfer items not stored')),
        onHandoff: (h) => this.billTransfer(session, h, log),
      }),
    ];
  }
}
