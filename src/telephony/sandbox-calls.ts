/**
 * Calls of the sandbox carrier. The "phones" are WebSocket clients of
 * `/v1/telephony/sandbox/calls` (docs/telephony.md, "The sandbox phones"): a socket either dials one of the
 * carrier's numbers (it is the caller of an inbound call) or registers as the phone line of a
 * number (outbound calls and transfers to that number ring it). Audio is 8 kHz mono 16-bit
 * PCM. Everything lives in this process: one node, tests and development.
 *
 * A leg joins the platform (the agent session) with one phone. A bridge (warm merge, cold
 * transfer) joins two phones directly: their audio is relayed between the sockets and the
 * platform is out of the call.
 */
import {
  CALL_SAMPLE_RATE_HZ,
  CarrierRefused,
  type CallControl,
  type CallLeg,
  type CallMedia,
  type DialOutcome,
  type DialRequest,
  type Handoff,
  type InboundCall,
  type LegEnd,
} from './carrier.ts';

/** What the carrier needs from a phone's socket. */
export interface PhoneSocket {
  json(m: Record<string, unknown>): void;
  audio(pcm: Int16Array): void;
  close(code: number, reason: string): void;
}

/**
 * Events the phone sends (`type` of its JSON frames). `answer` with `as: 'voicemail'`: the line
 * answers as an answering machine (what a carrier's detection would report).
 */
export type PhoneCommand = { type: 'answer'; as?: 'voicemail' } | { type: 'reject' } | { type: 'hangup' } | { type: 'dtmf'; digits: string };

/** Sandbox switches for call operations: the next `dial` / `transfer` fails with this detail. */
export interface CallFailures {
  dial: string[];
  transfer: string[];
}

/** A soft two-note chime at 3.2/3.6 kHz: audible, and outside the synthetic speech band (0.4–2.5 kHz). */
function holdMusic(offset: number, n: number): Int16Array {
  const out = new Int16Array(n);
  for (let i = 0; i < n; i++) {
    const t = (offset + i) / CALL_SAMPLE_RATE_HZ;
    const f = Math.floor(t * 2) % 2 === 0 ? 3200 : 3600;
    out[i] = Math.round(1500 * Math.sin(2 * Math.PI * f * t));
  }
  return out;
}
const HOLD_FRAME_MS = 100;

let seq = 0;
const lineKey = (teamId: string, number: string) => `${teamId}\u0000${number}`;
const newCallId = () => `sbxcall_${Date.now().toString(36)}${(++seq).toString(36)}`;

/** One phone: a socket, and the call it is in (at most one at a time). */
export class SandboxPhone {
  /** The leg this phone is on with the platform, or the phone it is bridged with. */
  leg: SandboxLeg | null = null;
  peer: SandboxPhone | null = null;
  ringing: { callId: string; settle(answer: boolean, by?: 'human' | 'voicemail'): void } | null = null;
  closed = false;
  /** Set while bridged by a handoff: called once when the bridged call ends. */
  onBridgeEnd: (() => void) | null = null;
  /** A line's key in the carrier's table (its team and number); empty for a dialer. */
  lineKey = '';

  constructor(
    readonly socket: PhoneSocket,
    /** A line: stays open across calls. A dialer: closes when its call ends. */
    readonly kind: 'line' | 'dialer',
    readonly number: string,
    private readonly carrier: SandboxCalls,
  ) {}

  /** A JSON command from the socket. */
  command(c: PhoneCommand): void {
    if (c.type === 'answer') this.ringing?.settle(true, c.as ?? 'human');
    else if (c.type === 'reject') this.ringing?.settle(false);
    else if (c.type === 'hangup') this.hangUp();
    else if (c.type === 'dtmf') this.leg?.dtmf(c.digits);
  }

  /** Audio from the socket: to the platform, or to the bridged phone. */
  audio(pcm: Int16Array): void {
    if (this.peer) this.peer.socket.audio(pcm);
    else this.leg?.fromPhone(pcm);
  }

  /** The phone hung up (a `hangup` command, or its socket closed). */
  hangUp(): void {
    this.ringing?.settle(false);
    if (this.peer) {
      const p = this.peer;
      this.peer = null;
      p.peer = null;
      p.callEnded('remote_hangup');
      this.callEnded('hangup');
      this.bridgeOver();
      p.bridgeOver();
    } else if (this.leg) {
      this.leg.end('remote_hangup');
    }
  }

  /** The bridged call of a handoff ended. */
  bridgeOver(): void {
    const f = this.onBridgeEnd;
    this.onBridgeEnd = null;
    f?.();
  }

  /** Tells the phone its call ended; a dialer's socket closes. */
  callEnded(reason: string, callId?: string): void {
    if (this.closed) return;
    this.socket.json({ type: 'call.ended', ...(callId ? { call_id: callId } : {}), reason });
    if (this.kind === 'dialer') {
      this.closed = true;
      this.socket.close(1000, reason);
      this.carrier.forget(this);
    }
  }

  get busy(): boolean {
    return !!(this.leg || this.peer || this.ringing);
  }
}

class SandboxLeg implements CallLeg, InboundCall {
  readonly media: CallMedia;
  readonly ended: Promise<LegEnd>;
  private resolveEnded!: (e: LegEnd) => void;
  private receiver: ((pcm: Int16Array) => void) | null = null;
  private dtmfReceiver: ((digits: string) => void) | null = null;
  done = false;
  held = false;
  private holdTimer: NodeJS.Timeout | null = null;
  onDecision: ((d: 'answer' | 'busy' | 'unavailable') => void) | null = null;

  constructor(
    readonly callId: string,
    readonly from: string,
    readonly to: string,
    readonly direction: 'inbound' | 'outbound',
    public phone: SandboxPhone,
  ) {
    this.ended = new Promise((r) => (this.resolveEnded = r));
    this.media = {
      sampleRateHz: CALL_SAMPLE_RATE_HZ,
      send: (pcm) => {
        if (!this.done && !this.held) this.phone.socket.audio(pcm);
      },
      onAudio: (r) => {
        this.receiver = r;
      },
      onDtmf: (r) => {
        this.dtmfReceiver = r;
      },
    };
  }

  answer(): void {
    this.onDecision?.('answer');
  }

  reject(reason: 'busy' | 'unavailable'): void {
    this.onDecision?.(reason);
  }

  fromPhone(pcm: Int16Array): void {
    if (!this.done && !this.held) this.receiver?.(pcm);
  }

  dtmf(digits: string): void {
    if (!this.done) this.dtmfReceiver?.(digits);
  }

  setHold(on: boolean): void {
    if (this.done || this.held === on) return;
    this.held = on;
    this.phone.socket.json({ type: 'call.hold', call_id: this.callId, on });
    if (this.holdTimer) clearInterval(this.holdTimer);
    this.holdTimer = null;
    if (on) {
      let offset = 0;
      const n = (CALL_SAMPLE_RATE_HZ * HOLD_FRAME_MS) / 1000;
      this.holdTimer = setInterval(() => {
        this.phone.socket.audio(holdMusic(offset, n));
        offset += n;
      }, HOLD_FRAME_MS);
      this.holdTimer.unref();
    }
  }

  /** Ends the leg for the platform. The phone is told unless it was handed to another phone. */
  end(how: LegEnd): void {
    if (this.done) return;
    this.done = true;
    if (this.holdTimer) clearInterval(this.holdTimer);
    this.holdTimer = null;
    if (this.held && how === 'transferred') this.phone.socket.json({ type: 'call.hold', call_id: this.callId, on: false });
    if (this.phone.leg === this) this.phone.leg = null;
    if (how !== 'transferred' && how !== 'remote_hangup') this.phone.callEnded(how === 'local_hangup' ? 'hangup' : 'failed', this.callId);
    if (how === 'remote_hangup' && this.phone.kind === 'dialer') this.phone.callEnded('hangup', this.callId);
    this.resolveEnded(how);
  }
}

/** The sandbox carrier's `CallControl`, and the phones connected to it. */
export class SandboxCalls implements CallControl {
  private handler: ((call: InboundCall) => void) | null = null;
  private readonly legs = new Map<string, SandboxLeg>();
  private readonly lines = new Map<string, Set<SandboxPhone>>();
  private readonly phones = new Set<SandboxPhone>();

  constructor(
    /** Whether the carrier holds this number (calls to others are "not in service"). */
    private readonly holds: (number: string) => boolean,
    private readonly failures: CallFailures,
  ) {}

  onInboundCall(handler: (call: InboundCall) => void): void {
    this.handler = handler;
  }

  /**
   * A socket registers as the phone line of `number` for `teamId`: that team's calls to the
   * number ring it. Each team has its own outside world, so a team's key cannot pick up the
   * calls another team's agents place.
   */
  registerLine(socket: PhoneSocket, number: string, teamId: string): SandboxPhone {
    const phone = new SandboxPhone(socket, 'line', number, this);
    phone.lineKey = lineKey(teamId, number);
    let set = this.lines.get(phone.lineKey);
    if (!set) this.lines.set(phone.lineKey, (set = new Set()));
    set.add(phone);
    this.phones.add(phone);
    socket.json({ type: 'line.ready', number });
    return phone;
  }

  /** A socket dials `to` from `from`: an inbound call to one of the carrier's numbers. */
  dialIn(socket: PhoneSocket, from: string, to: string): SandboxPhone {
    const phone = new SandboxPhone(socket, 'dialer', from, this);
    this.phones.add(phone);
    const callId = newCallId();
    if (!this.holds(to) || !this.handler) {
      queueMicrotask(() => phone.callEnded('not_in_service', callId));
      return phone;
    }
    const leg = new SandboxLeg(callId, from, to, 'inbound', phone);
    phone.leg = leg;
    this.legs.set(callId, leg);
    void leg.ended.then(() => this.legs.delete(callId));
    socket.json({ type: 'call.ringing', call_id: callId, direction: 'inbound', from, to });
    leg.onDecision = (d) => {
      leg.onDecision = null;
      if (leg.done) return;
      if (d === 'answer') {
        socket.json({ type: 'call.started', call_id: callId, direction: 'inbound', from, to, sample_rate_hz: CALL_SAMPLE_RATE_HZ, encoding: 'pcm_s16le' });
        return;
      }
      leg.done = true;
      phone.leg = null;
      phone.callEnded(d, callId);
      this.legs.delete(callId);
    };
    this.handler(leg);
    return phone;
  }

  /** A phone's socket closed. */
  forget(phone: SandboxPhone): void {
    this.phones.delete(phone);
    if (phone.lineKey) this.lines.get(phone.lineKey)?.delete(phone);
    if (!phone.closed) {
      phone.closed = true;
      phone.hangUp();
    }
  }

  /** Rings a free line of `to` (any free one) until it answers, declines or the time runs out. */
  private ring(teamId: string, from: string, to: string, callId: string, ringTimeoutMs: number, signal?: AbortSignal): Promise<{ phone: SandboxPhone; by: 'human' | 'voicemail' } | { status: 'busy' | 'no_answer' | 'failed' }> {
    const lines = [...(this.lines.get(lineKey(teamId, to)) ?? [])].filter((p) => !p.closed);
    const free = lines.find((p) => !p.busy);
    if (lines.length && !free) return Promise.resolve({ status: 'busy' as const });
    return new Promise((resolve) => {
      let timer: NodeJS.Timeout | null = null;
      const finish = (r: { phone: SandboxPhone; by: 'human' | 'voicemail' } | { status: 'busy' | 'no_answer' | 'failed' }) => {
        if (timer) clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (free) free.ringing = null;
        resolve(r);
      };
      const onAbort = () => {
        free?.callEnded('cancelled', callId);
        finish({ status: 'failed' });
      };
      timer = setTimeout(() => {
        free?.callEnded('no_answer', callId);
        finish({ status: 'no_answer' });
      }, ringTimeoutMs);
      timer.unref();
      if (signal?.aborted) return onAbort();
      signal?.addEventListener('abort', onAbort, { once: true });
      if (!free) return; // nobody listens on that number: it rings out
      free.ringing = {
        callId,
        settle: (answer, by = 'human') => {
          if (answer) finish({ phone: free, by });
          else {
            free.callEnded('declined', callId);
            finish({ status: 'busy' });
          }
        },
      };
      free.socket.json({ type: 'call.ringing', call_id: callId, direction: 'outbound', from, to });
    });
  }

  async dial(req: DialRequest, signal?: AbortSignal): Promise<DialOutcome> {
    const forced = this.failures.dial.shift();
    if (forced !== undefined) throw new CarrierRefused(forced);
    if (!this.holds(req.from)) throw new CarrierRefused('the calling number is not held by this carrier');
    const callId = newCallId();
    const r = await this.ring(req.teamId ?? '', req.from, req.to, callId, req.ringTimeoutMs, signal);
    if (!('phone' in r)) return r;
    const leg = new SandboxLeg(callId, req.from, req.to, 'outbound', r.phone);
    r.phone.leg = leg;
    this.legs.set(callId, leg);
    void leg.ended.then(() => this.legs.delete(callId));
    r.phone.socket.json({ type: 'call.started', call_id: callId, direction: 'outbound', from: req.from, to: req.to, sample_rate_hz: CALL_SAMPLE_RATE_HZ, encoding: 'pcm_s16le' });
    return { status: 'answered', leg, answeredBy: r.by };
  }

  async hold(callId: string, on: boolean): Promise<void> {
    const leg = this.legs.get(callId);
    if (!leg) throw new CarrierRefused('no such call');
    leg.setHold(on);
  }

  async transfer(req: { callId: string; destination: string; from: string; ringTimeoutMs: number; teamId?: string }, signal?: AbortSignal): Promise<Handoff> {
    const forced = this.failures.transfer.shift();
    if (forced !== undefined) throw new CarrierRefused(forced);
    const leg = this.legs.get(req.callId);
    if (!leg || leg.done) throw new CarrierRefused('no such call');
    const target = await this.ring(req.teamId ?? '', req.from, req.destination, newCallId(), req.ringTimeoutMs, signal);
    if (!('phone' in target)) throw new CarrierRefused(target.status === 'busy' ? 'the destination is busy' : target.status === 'no_answer' ? 'the destination did not answer' : 'the transfer failed');
    if (leg.done) {
      target.phone.callEnded('hangup');
      throw new CarrierRefused('the caller hung up');
    }
    return this.join(leg, target.phone, req.destination);
  }

  async bridge(callId: string, otherCallId: string): Promise<Handoff> {
    const a = this.legs.get(callId);
    const b = this.legs.get(otherCallId);
    if (!a || !b || a.done || b.done) throw new CarrierRefused('no such call');
    const other = b.phone;
    b.end('transferred');
    other.leg = null;
    return this.join(a, other, b.to);
  }

  /** Connects the phone of `leg` directly with `other`; the platform leaves the leg. */
  private join(leg: SandboxLeg, other: SandboxPhone, otherNumber: string): Handoff {
    const phone = leg.phone;
    let over!: () => void;
    const ended = new Promise<void>((r) => (over = r));
    phone.onBridgeEnd = over;
    other.onBridgeEnd = over;
    leg.end('transferred');
    phone.leg = null;
    phone.peer = other;
    other.peer = phone;
    phone.socket.json({ type: 'call.transferred', call_id: leg.callId, to: otherNumber });
    other.socket.json({ type: 'call.started', call_id: `${leg.callId}-x`, direction: 'outbound', from: leg.direction === 'inbound' ? leg.from : leg.to, to: otherNumber, sample_rate_hz: CALL_SAMPLE_RATE_HZ, encoding: 'pcm_s16le', bridged: true });
    return { ended };
  }

  async hangUp(callId: string): Promise<void> {
    this.legs.get(callId)?.end('local_hangup');
  }

  /** Live legs (tests and shutdown). */
  get liveCalls(): number {
    return this.legs.size;
  }

  /** Ends every call and forgets every phone (closing the platform). */
  close(): void {
    for (const leg of [...this.legs.values()]) leg.end('local_hangup');
    for (const p of [...this.phones]) {
      p.bridgeOver();
      p.closed = true;
      p.socket.close(1001, 'carrier closing');
    }
    this.phones.clear();
    this.lines.clear();
  }
}
