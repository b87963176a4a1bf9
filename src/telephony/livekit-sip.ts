/**
 * The `livekit-sip` carrier (provider value `managed`): numbers and calls through a LiveKit
 * server's SIP service, with livekit-server-sdk's `SipClient`. Used when LiveKit is configured
 * (`LIVEKIT_URL`, `LIVEKIT_API_KEY`, `LIVEKIT_API_SECRET`).
 *
 * - Numbers: the number itself is rented at the SIP provider behind LiveKit (there is no
 *   inventory to search here); "purchase" registers it with LiveKit: an inbound trunk for the
 *   number and a dispatch rule that puts each call in a room of its own (`parley-call-…`).
 *   Release deletes both. `carrierRef` is `<inbound trunk id>/<dispatch rule id>`.
 * - Outbound: `createSipParticipant` through the outbound trunk (`LIVEKIT_SIP_OUTBOUND_TRUNK_ID`)
 *   into the session's room (`parley-<session id>`), waiting until answered, ringing ≤ the ring
 *   timeout. SIP 486/600/603 → `busy`, 408/480/487 → `no_answer`.
 * - Cold transfer: `transferSipParticipant` (SIP REFER) to `tel:<destination>`. Warm merge:
 *   the consult leg is dialed into its own room, then moved into the caller's room.
 * - Media flows in the LiveKit room, not through this process: legs have `media: null`; the
 *   LiveKit agent participant (not built yet, docs/websocket-transport.md "LiveKit") is what
 *   would carry a session's audio. Inbound calls are announced by LiveKit webhooks
 *   (`participant_joined` of a SIP participant): `inboundFromParticipant` turns one into an
 *   `InboundCall`.
 */
import { sipOutboundTrunkId, type Env } from '../config.ts';
import { RoomServiceClient, SipClient, type CreateSipDispatchRuleOptions, type CreateSipInboundTrunkOptions, type CreateSipParticipantOptions, type SipDispatchRuleIndividual, type TransferSipParticipantOptions } from 'livekit-server-sdk';
import type { Logger } from '../log.ts';
import { callerIdentity } from '../transport/livekit.ts';
import {
  CarrierRefused,
  type AvailableNumber,
  type CallControl,
  type CallLeg,
  type Carrier,
  type DialOutcome,
  type DialRequest,
  type InboundCall,
  type LegEnd,
} from './carrier.ts';

export interface LivekitSipConfig {
  url: string;
  apiKey: string;
  apiSecret: string;
  /** `LIVEKIT_SIP_OUTBOUND_TRUNK_ID`: outbound calls and transfers' consult legs; without it dials are refused. */
  outboundTrunkId: string | null;
}

/** The SIP settings from the environment when LiveKit is configured. */
export function livekitSipFromEnv(env: Env, lk: { url: string; apiKey: string; apiSecret: string }): LivekitSipConfig {
  return { ...lk, outboundTrunkId: sipOutboundTrunkId(env) };
}

/** Rooms of inbound calls start with this; the dispatch rule adds a unique suffix per call. */
export const INBOUND_ROOM_PREFIX = 'parley-call-';
/** The room of a session (same as the `livekit` transport's). */
export const sessionRoom = (sessionId: string) => `parley-${sessionId}`;
/**
 * The phone participant of a session's room: the caller identity of the `livekit` transport
 * (`caller-<session_id>`), so the agent participant of that room hears it as the caller; a
 * warm transfer's consult leg is `consult-<session_id>` in a private room.
 */
export const phoneIdentity = (sessionId: string, consult = false) => (consult ? `consult-${sessionId}` : callerIdentity(sessionId));

// ---------------------------------------------------------------------------------------------
// Request building (pure: unit-tested against the SDK's types)

export function inboundTrunkRequest(phoneNumber: string): { name: string; numbers: string[]; opts: CreateSipInboundTrunkOptions } {
  return { name: `parley ${phoneNumber}`, numbers: [phoneNumber], opts: { metadata: JSON.stringify({ phone_number: phoneNumber }), krispEnabled: true } };
}

export function dispatchRuleRequest(phoneNumber: string, trunkId: string): { rule: SipDispatchRuleIndividual; opts: CreateSipDispatchRuleOptions } {
  return {
    rule: { type: 'individual', roomPrefix: INBOUND_ROOM_PREFIX },
    opts: { name: `parley ${phoneNumber}`, trunkIds: [trunkId], metadata: JSON.stringify({ phone_number: phoneNumber }), attributes: { 'parley.dialed_number': phoneNumber } },
  };
}

export function dialRequest(cfg: LivekitSipConfig, req: DialRequest): { trunkId: string; number: string; room: string; opts: CreateSipParticipantOptions } {
  if (!cfg.outboundTrunkId) throw new CarrierRefused('no outbound SIP trunk is configured (LIVEKIT_SIP_OUTBOUND_TRUNK_ID)');
  const consult = req.consultFor !== undefined;
  return {
    trunkId: cfg.outboundTrunkId,
    number: req.to,
    room: consult ? `${sessionRoom(req.sessionId)}-consult` : sessionRoom(req.sessionId),
    opts: {
      fromNumber: req.from,
      participantIdentity: phoneIdentity(req.sessionId, consult),
      participantName: req.to,
      participantAttributes: { 'parley.session_id': req.sessionId, 'parley.leg': consult ? 'consult' : 'call' },
      ringingTimeout: Math.max(1, Math.round(req.ringTimeoutMs / 1000)),
      waitUntilAnswered: true,
      playDialtone: false,
      krispEnabled: true,
    },
  };
}

export function transferRequest(room: string, identity: string, destination: string, ringTimeoutMs: number): { room: string; identity: string; transferTo: string; opts: TransferSipParticipantOptions } {
  return { room, identity, transferTo: `tel:${destination}`, opts: { playDialtone: false, ringingTimeout: Math.max(1, Math.round(ringTimeoutMs / 1000)) } };
}

/** A SIP call error's outcome: busy, no answer, or a failure. */
export function dialOutcomeOf(err: unknown): 'busy' | 'no_answer' | 'failed' {
  const e = err as { sipStatusCode?: number; metadata?: Record<string, string> };
  const code = e?.sipStatusCode ?? Number(e?.metadata?.sip_status_code);
  if (code === 486 || code === 600 || code === 603) return 'busy';
  if (code === 408 || code === 480 || code === 487) return 'no_answer';
  return 'failed';
}

// ---------------------------------------------------------------------------------------------
// The carrier

interface LkLeg extends CallLeg {
  room: string;
  identity: string;
  finish(how: LegEnd): void;
}

function lkLeg(o: { callId: string; from: string; to: string; direction: 'inbound' | 'outbound'; room: string; identity: string }): LkLeg {
  let finish!: (how: LegEnd) => void;
  const ended = new Promise<LegEnd>((r) => (finish = r));
  return { ...o, media: null, mediaRoom: { name: o.room, identity: o.identity }, ended, finish };
}

export class LivekitSipCarrier implements Carrier {
  readonly provider = 'managed' as const;
  readonly sip: SipClient;
  readonly rooms: RoomServiceClient;
  readonly calls: CallControl & {
    /** A SIP participant joined an inbound room (LiveKit webhook): the call, handed to the handler; null when not ours or already known. */
    inboundFromParticipant(p: { room: string; identity: string; attributes: Record<string, string> }): InboundCall | null;
    /** A phone's participant left its room (LiveKit webhook): its leg ends (`remote_hangup`). */
    participantLeft(p: { room: string; identity: string }): void;
  };

  constructor(
    readonly cfg: LivekitSipConfig,
    log: Logger,
  ) {
    this.sip = new SipClient(cfg.url, cfg.apiKey, cfg.apiSecret);
    this.rooms = new RoomServiceClient(cfg.url, cfg.apiKey, cfg.apiSecret);
    const legs = new Map<string, LkLeg>();
    let handler: ((c: InboundCall) => void) | null = null;
    const refused = (err: unknown): never => {
      throw new CarrierRefused((err as Error)?.message ? `LiveKit: ${(err as Error).message}` : 'LiveKit did not answer', { cause: err });
    };
    const sip = this.sip;
    const rooms = this.rooms;
    this.calls = {
      onInboundCall: (h) => {
        handler = h;
      },
      inboundFromParticipant: (p) => {
        if (!p.room.startsWith(INBOUND_ROOM_PREFIX) || !handler) return null;
        // LiveKit delivers webhooks at least once: a participant already known is the same call.
        if (legs.has(`${p.room}/${p.identity}`)) return null;
        const leg = lkLeg({ callId: `${p.room}/${p.identity}`, from: p.attributes['sip.phoneNumber'] ?? '', to: p.attributes['sip.trunkPhoneNumber'] ?? '', direction: 'inbound', room: p.room, identity: p.identity });
        legs.set(leg.callId, leg);
        const call: InboundCall = {
          ...leg,
          answer: () => {},
          reject: () => {
            legs.delete(leg.callId);
            rooms.removeParticipant(p.room, p.identity).catch((err) => log.warn({ err }, 'LiveKit: could not reject a call'));
            leg.finish('local_hangup');
          },
        };
        handler(call);
        return call;
      },
      participantLeft: (p) => {
        const callId = `${p.room}/${p.identity}`;
        const leg = legs.get(callId);
        if (!leg) return;
        legs.delete(callId);
        leg.finish('remote_hangup');
      },
      dial: async (req, signal): Promise<DialOutcome> => {
        const r = dialRequest(this.cfg, req);
        try {
          if (signal?.aborted) return { status: 'failed', detail: 'cancelled' };
          await sip.createSipParticipant(r.trunkId, r.number, r.room, r.opts);
        } catch (err) {
          const status = dialOutcomeOf(err);
          if (status === 'failed' && !(err as { sipStatusCode?: number })?.sipStatusCode) refused(err);
          return { status, detail: (err as Error).message };
        }
        const leg = lkLeg({ callId: `${r.room}/${r.opts.participantIdentity}`, from: req.from, to: req.to, direction: 'outbound', room: r.room, identity: r.opts.participantIdentity! });
        legs.set(leg.callId, leg);
        return { status: 'answered', leg, answeredBy: 'unknown' };
      },
      hold: async () => {
        throw new CarrierRefused('hold is not supported by the livekit-sip carrier yet');
      },
      transfer: async (req) => {
        const leg = legs.get(req.callId);
        if (!leg) throw new CarrierRefused('no such call');
        const t = transferRequest(leg.room, leg.identity, req.destination, req.ringTimeoutMs);
        await sip.transferSipParticipant(t.room, t.identity, t.transferTo, t.opts).catch(refused);
        legs.delete(req.callId);
        leg.finish('transferred');
        // After the REFER the call is the SIP provider's: its end is not reported here.
        return { ended: null };
      },
      bridge: async (callId, otherCallId) => {
        const a = legs.get(callId);
        const b = legs.get(otherCallId);
        if (!a || !b) throw new CarrierRefused('no such call');
        await rooms.moveParticipant(b.room, b.identity, a.room).catch(refused);
        legs.delete(callId);
        legs.delete(otherCallId);
        a.finish('transferred');
        b.finish('transferred');
        return { ended: null };
      },
      hangUp: async (callId) => {
        const leg = legs.get(callId);
        if (!leg) return;
        legs.delete(callId);
        await rooms.removeParticipant(leg.room, leg.identity).catch((err) => log.warn({ err }, 'LiveKit: hang-up failed'));
        leg.finish('local_hangup');
      },
    };
  }

  async search(): Promise<AvailableNumber[]> {
    return []; // numbers come from the SIP provider behind LiveKit: purchase registers one you hold there
  }

  async purchase(phoneNumber: string): Promise<{ carrierRef: string }> {
    const t = inboundTrunkRequest(phoneNumber);
    let trunkId: string;
    try {
      trunkId = (await this.sip.createSipInboundTrunk(t.name, t.numbers, t.opts)).sipTrunkId;
    } catch (err) {
      throw new CarrierRefused(`LiveKit: ${(err as Error).message}`, { cause: err });
    }
    try {
      const d = dispatchRuleRequest(phoneNumber, trunkId);
      const rule = await this.sip.createSipDispatchRule(d.rule, d.opts);
      return { carrierRef: `${trunkId}/${rule.sipDispatchRuleId}` };
    } catch (err) {
      await this.sip.deleteSipTrunk(trunkId).catch(() => {});
      throw new CarrierRefused(`LiveKit: ${(err as Error).message}`, { cause: err });
    }
  }

  async release(_phoneNumber: string, carrierRef: string | null): Promise<void> {
    if (!carrierRef) return;
    const [trunkId, ruleId] = carrierRef.split('/');
    const gone = (err: unknown) => (err as { status?: number })?.status === 404;
    try {
      if (ruleId) await this.sip.deleteSipDispatchRule(ruleId).catch((err) => { if (!gone(err)) throw err; });
      if (trunkId) await this.sip.deleteSipTrunk(trunkId).catch((err) => { if (!gone(err)) throw err; });
    } catch (err) {
      throw new CarrierRefused(`LiveKit: ${(err as Error).message}`, { cause: err });
    }
  }
}
