/**
 * A phone call as a session client: the `ClientLink` of a live session whose "connection" is a
 * carrier call leg. The agent's audio (16 kHz, paced in real time by the runtime) is
 * resampled to the leg's 8 kHz and played to the phone; the phone's audio is resampled to
 * 16 kHz and fed to the session's recognizer. Messages (transcripts, agent state) have no
 * phone channel; the agent state is kept so a transfer can wait for the agent to finish
 * speaking. When the session ends the carrier leg is hung up, unless the call was handed
 * off (transfer); when the phone hangs up the session ends (`user_hangup`). `RoomCall` is the
 * same view of a call whose media is in a LiveKit room (the agent participant is its client).
 */
import { SESSION_SAMPLE_RATE_HZ, type AgentState } from '../../actors/types.ts';
import type { ClientLink, LiveSession, SessionMessage } from '../sessions/runtime.ts';
import type { ServerMessage } from '../../actors/types.ts';
import { createResampler, int16ToPcmBytes, pcmBytesToInt16 } from '../audio/index.ts';
import type { Logger } from '../log.ts';
import type { CallControl, CallLeg } from './carrier.ts';

/**
 * A call as the transfer tool sees it: its leg, its live session, and what the agent is doing
 * (fed with the session's messages and audio). `CallLink` (media here) and `RoomCall` (media in
 * a LiveKit room) are both.
 */
export class CallParty {
  protected live: LiveSession | null = null;
  /** The call left the platform (cold transfer, warm merge): ending the session must not hang it up. */
  handedOff = false;
  /** A handoff asked of the carrier and not answered yet; resolves true once the call is handed off. */
  protected handoff: Promise<boolean> | null = null;

  /**
   * Runs the carrier's handoff (REFER, bridge). The phone may leave the room before the carrier
   * answers (LiveKit removes a transferred SIP participant as the REFER is accepted): a departure
   * meanwhile waits for the answer, and only counts as the caller hanging up if the handoff failed.
   */
  async handingOff<T>(carrierCall: Promise<T>): Promise<T> {
    const done = carrierCall.then(() => true, () => false);
    this.handoff = done;
    try {
      const r = await carrierCall;
      this.handedOff = true;
      return r;
    } finally {
      if (this.handoff === done) this.handoff = null;
    }
  }
  /** The caller is on hold: its audio does not reach the agent. */
  inputMuted = false;
  agentState: AgentState = 'initializing';
  protected lastAudioAt = 0;
  private turnAt = 0;
  protected closed = false;

  constructor(readonly leg: CallLeg) {}

  get session(): LiveSession | null {
    return this.live;
  }

  /** A message of the session (the agent's state). */
  observe(m: ServerMessage | SessionMessage): void {
    if (m.topic !== 'lk.agent.state') return;
    if (m.state === 'thinking' && this.agentState !== 'thinking') this.turnAt = Date.now();
    this.agentState = m.state;
  }

  /** Whether the agent's current reply has been heard (audio since it started thinking). */
  announced(): boolean {
    return this.lastAudioAt > this.turnAt;
  }

  /**
   * Resolves once what the agent is saying has been played to the phone: audio that is about
   * to start (the agent is thinking or speaking) gets up to `startMs` to begin, then the audio
   * must stop for `quietMs`. Gives up after `maxMs`.
   */
  async agentQuiet(o: { quietMs?: number; startMs?: number; maxMs?: number } = {}): Promise<void> {
    const { quietMs = 400, startMs = 2_000, maxMs = 20_000 } = o;
    const t0 = Date.now();
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    while (this.lastAudioAt < t0 && Date.now() - t0 < startMs && (this.agentState === 'thinking' || this.agentState === 'speaking') && !this.closed) await sleep(50);
    while (!this.closed && Date.now() - t0 < maxMs && Date.now() - this.lastAudioAt < quietMs) await sleep(50);
  }
}

/**
 * A call whose media is in a LiveKit room (livekit-sip): the agent participant is the session's
 * client; `watch` gives the agent a view of the live session that also feeds this party (the
 * agent's state and audio), and that ignores the phone leaving once the call was handed off.
 */
export class RoomCall extends CallParty {
  watch(live: LiveSession): LiveSession {
    this.live = live;
    const tees = new WeakMap<ClientLink, ClientLink>();
    const tee = (l: ClientLink): ClientLink => {
      let t = tees.get(l);
      if (!t) {
        t = {
          message: (m) => {
            this.observe(m);
            l.message(m);
          },
          audio: (pcm) => {
            this.lastAudioAt = Date.now();
            l.audio(pcm);
          },
          close: (code, reason) => {
            this.closed = true;
            l.close(code, reason);
          },
        };
        tees.set(l, t);
      }
      return t;
    };
    return {
      id: live.id,
      handle: live.handle,
      resume: live.resume,
      attach: (l) => live.attach(tee(l)),
      detach: (l, how) => {
        // After a handoff the phone leaves the room: the transfer tool ends the session.
        if (this.handedOff) return;
        if (this.handoff) void this.handoff.then((ok) => { if (!ok) live.detach(tee(l), how); });
        else live.detach(tee(l), how);
      },
      clientToolResult: (r) => live.clientToolResult(r),
    };
  }
}

export class CallLink extends CallParty implements ClientLink {
  private readonly down;
  private readonly up;
  private legOver: string | null = null;

  constructor(
    leg: CallLeg,
    private readonly carrier: CallControl,
    private readonly log: Logger,
  ) {
    super(leg);
    const media = leg.media;
    if (!media) throw new Error('CallLink needs a leg with media');
    this.down = createResampler(SESSION_SAMPLE_RATE_HZ, media.sampleRateHz);
    this.up = createResampler(media.sampleRateHz, SESSION_SAMPLE_RATE_HZ);
    media.onAudio((pcm) => {
      if (this.inputMuted || !this.live) return;
      const wide = this.up.push(pcm);
      if (wide.length) this.live.handle.sendAudio(int16ToPcmBytes(wide));
    });
    void leg.ended.then((how) => {
      this.legOver = how;
      if (this.closed || !this.live) return;
      if (how === 'transferred') return; // the transfer tool ends the session
      this.live.detach(this, 'clean'); // the caller hung up (or the carrier dropped the call)
    });
  }

  /** Joins the live session: from now on the two talk. */
  attach(live: LiveSession): void {
    this.live = live;
    live.attach(this);
    // The caller hung up while the session was starting.
    if (this.legOver && this.legOver !== 'transferred') live.detach(this, 'clean');
  }

  message(m: ServerMessage | SessionMessage): void {
    this.observe(m);
  }

  audio(pcm: Uint8Array): void {
    if (this.closed || this.handedOff) return;
    const narrow = this.down.push(pcmBytesToInt16(pcm));
    this.lastAudioAt = Date.now();
    if (narrow.length && !this.inputMuted) this.leg.media!.send(narrow);
  }

  close(_code: number, reason: string): void {
    if (this.closed) return;
    this.closed = true;
    this.leg.media?.onAudio(null);
    if (this.handedOff) return;
    this.carrier.hangUp(this.leg.callId).catch((err) => this.log.warn({ err, reason }, 'carrier hang-up failed'));
  }
}
