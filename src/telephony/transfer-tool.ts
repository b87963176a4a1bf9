/**
 * The built-in `transfer_call` system tool of phone sessions (docs/api/phone.md). It appears to the
 * model whenever the agent has a transfer destination (never listed in `tools`).
 *
 * Cold: the agent's announcement is played out (the tool says "Please hold while I transfer
 * your call." itself when the agent said nothing before calling it), then the carrier hands the
 * call off and the session ends (`call_transferred`). A refused handoff is a failed outcome:
 * the model is told to apologize and the conversation goes on.
 *
 * Warm: the caller is put on hold (music), a private consult leg rings the destination for at
 * most 30 s showing our number, the agent's voice briefs the human in the third person (the
 * model's `briefing`, or a default one), then `confirm` waits for the human's OK (speech: yes /
 * okay / sure / go ahead / put them through; or key 1; key 2 or "no" declines) and `direct`
 * merges at once. The merge bridges caller and human and the session ends
 * (`call_transferred`); failure, decline or silence brings the caller back from hold and the
 * model is told why.
 */
import type { SessionBackend, SessionTool, ToolOutcome } from '../../actors/types.ts';
import { SESSION_SAMPLE_RATE_HZ } from '../../actors/types.ts';
import type { TransferDestination } from '../agent-config/index.ts';
import { createResampler, int16ToPcmBytes, pcmBytesToInt16 } from '../audio/index.ts';
import type { Logger } from '../log.ts';
import type { CallParty } from './call-link.ts';
import { CarrierRefused, type CallControl, type CallLeg, type Handoff } from './carrier.ts';

export const TRANSFER_TOOL_NAME = 'transfer_call';
/** How long the destination may ring (cold handoff and warm consult leg). */
export { TRANSFER_RING_TIMEOUT_MS } from '../config.ts';
import { TRANSFER_RING_TIMEOUT_MS } from '../config.ts';
/** How long `confirm` waits for the human's answer after the briefing. */
export const TRANSFER_CONFIRM_TIMEOUT_MS = 20_000;
/** The session's end reason after a cold handoff or a warm merge. */
export const TRANSFERRED_REASON = 'call_transferred';

const HOLD_NOTICE: Record<string, { cold: string; warm: string; ask: string }> = {
  en: { cold: 'Please hold while I transfer your call.', warm: 'Please hold while I connect you.', ask: 'Say yes to take the call, or no to decline.' },
  es: { cold: 'Espere mientras transfiero su llamada.', warm: 'Espere mientras le comunico.', ask: 'Diga sí para atender la llamada, o no para rechazarla.' },
  fr: { cold: 'Veuillez patienter, je transfère votre appel.', warm: 'Veuillez patienter, je vous mets en relation.', ask: 'Dites oui pour prendre l’appel, ou non pour le refuser.' },
  de: { cold: 'Bitte warten Sie, ich verbinde Sie weiter.', warm: 'Bitte warten Sie, ich stelle die Verbindung her.', ask: 'Sagen Sie ja, um den Anruf anzunehmen, oder nein, um ihn abzulehnen.' },
  ja: { cold: 'おつなぎしますので、少々お待ちください。', warm: 'おつなぎしますので、少々お待ちください。', ask: 'お受けになる場合は「はい」、お断りの場合は「いいえ」とおっしゃってください。' },
  zh: { cold: '请稍候，正在为您转接。', warm: '请稍候，正在为您接通。', ask: '接听请说"是"，拒绝请说"不"。' },
  ko: { cold: '잠시만 기다려 주세요. 전화를 연결해 드리겠습니다.', warm: '잠시만 기다려 주세요. 연결해 드리겠습니다.', ask: '받으시려면 예, 거절하시려면 아니요라고 말씀해 주세요.' },
};

const YES = /\b(yes|yeah|yep|ok|okay|sure|go ahead|put (them|him|her) through|connect (them|him|her)|accept)\b|^(はい|是|예|oui|sí|si|ja)/i;
const NO = /\b(no|nope|decline|not now|can't|cannot|busy)\b|^(いいえ|不|아니요|non|nein)/i;

export interface TransferToolOptions {
  destination: TransferDestination;
  /** The call: a `CallLink` (media here) or a `RoomCall` (media in a LiveKit room: nothing is spoken by the tool itself). */
  link: CallParty;
  carrier: CallControl;
  /** Our number: the caller ID the destination sees (the originally dialed number, inbound). */
  ourNumber: string;
  /** The human party of the call, for the default briefing. */
  callerNumber: string;
  sessionId: string;
  /** The team placing the transfer (the sandbox rings only that team's phones). */
  teamId?: string;
  backend: SessionBackend;
  voiceId: string;
  language: string;
  log: Logger;
  ringTimeoutMs?: number;
  confirmTimeoutMs?: number;
  /**
   * Writes transcript items (the session's record). What the tool itself speaks (the hold line,
   * and on warm transfers the briefing and the question to the human) is written as an
   * `assistant` message with `audience` `caller` or `transfer_destination` and `source`
   * `transfer_call`.
   */
  record?(items: { type: string; payload: unknown }[]): void;
  /** The call was handed off (cold transfer done, or warm merge): transfer minutes start now. */
  onHandoff?(h: { mode: 'cold' | 'warm'; destination: string; at: Date; handoff: Handoff }): void;
}

const sleep = (ms: number, signal?: AbortSignal) =>
  new Promise<void>((resolve) => {
    const done = () => {
      clearTimeout(t);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const t = setTimeout(done, ms);
    signal?.addEventListener('abort', done, { once: true });
  });

/**
 * Speaks `text` in the session's voice to `leg`, paced in real time (20 ms frames), and writes it
 * to the transcript as an assistant message addressed to `audience`.
 */
async function say(o: TransferToolOptions, leg: CallLeg, text: string, signal: AbortSignal, audience: 'caller' | 'transfer_destination' = 'caller'): Promise<void> {
  const media = leg.media;
  if (!media || !text.trim()) return;
  o.record?.([{ type: 'message', payload: { role: 'assistant', content: text, audience, source: TRANSFER_TOOL_NAME, created_at: new Date().toISOString() } }]);
  const tts = await o.backend.synthesize({ voiceId: o.voiceId, language: o.language, signal });
  tts.send(text);
  tts.end();
  const down = createResampler(SESSION_SAMPLE_RATE_HZ, media.sampleRateHz);
  const frame = (media.sampleRateHz * 20) / 1000;
  let pending = new Int16Array(0);
  const t0 = Date.now();
  let sentMs = 0;
  const flush = async (all: boolean) => {
    while (pending.length >= frame || (all && pending.length > 0)) {
      const n = Math.min(frame, pending.length);
      media.send(pending.slice(0, n));
      pending = pending.slice(n);
      sentMs += (n / media.sampleRateHz) * 1000;
      const ahead = t0 + sentMs - 60 - Date.now();
      if (ahead > 0) await sleep(ahead, signal);
      if (signal.aborted) return;
    }
  };
  for await (const e of tts) {
    if (signal.aborted) return;
    if (e.type !== 'audio' || !e.pcm.length) continue;
    const narrow = down.push(pcmBytesToInt16(e.pcm));
    const next = new Int16Array(pending.length + narrow.length);
    next.set(pending);
    next.set(narrow, pending.length);
    pending = next;
    await flush(false);
  }
  const tail = down.end();
  if (tail.length) {
    const next = new Int16Array(pending.length + tail.length);
    next.set(pending);
    next.set(tail, pending.length);
    pending = next;
  }
  await flush(true);
  // Let the last frames play.
  const left = t0 + sentMs - Date.now();
  if (left > 0) await sleep(left, signal);
}

/**
 * Listens on the consult leg from the moment it is answered (so nothing the human says is
 * lost while the recognizer connects): `answer(timeoutMs)` resolves with the human's answer to
 * the question, by speech (recognized) or keys 1 / 2; `stop()` releases everything.
 */
function listen(o: TransferToolOptions, leg: CallLeg, signal: AbortSignal): { answer(timeoutMs: number): Promise<'yes' | 'no' | 'silence'>; stop(): void } {
  const media = leg.media!;
  const ac = new AbortController();
  const stop = () => ac.abort();
  signal.addEventListener('abort', stop, { once: true });
  let decide!: (v: 'yes' | 'no' | 'silence') => void;
  const decided = new Promise<'yes' | 'no' | 'silence'>((r) => (decide = r));
  media.onDtmf((digits) => {
    if (digits.includes('1')) decide('yes');
    else if (digits.includes('2')) decide('no');
  });
  const up = createResampler(media.sampleRateHz, SESSION_SAMPLE_RATE_HZ);
  let early: Uint8Array[] | null = [];
  let stt: Awaited<ReturnType<SessionBackend['transcribe']>> | null = null;
  media.onAudio((pcm) => {
    const wide = up.push(pcm);
    if (!wide.length || ac.signal.aborted) return;
    if (stt) stt.sendAudio(int16ToPcmBytes(wide));
    else early?.push(int16ToPcmBytes(wide));
  });
  void (async () => {
    const s = await o.backend.transcribe({ language: o.language, signal: ac.signal });
    stt = s;
    for (const f of early ?? []) s.sendAudio(f);
    early = null;
    // Settled from inside the loop: leaving a `for await` early would wait for the stream to close.
    for await (const e of s) {
      if (e.type !== 'committed' || !e.text.trim()) continue;
      if (NO.test(e.text)) decide('no');
      else if (YES.test(e.text)) decide('yes');
    }
    decide('silence');
  })().catch(() => decide('silence'));
  return {
    answer: (timeoutMs) => Promise.race([decided, sleep(timeoutMs, ac.signal).then(() => 'silence' as const)]),
    stop: () => {
      media.onAudio(null);
      media.onDtmf(null);
      signal.removeEventListener('abort', stop);
      ac.abort();
      stt?.cancel();
    },
  };
}

function outcome(t0: number, status: ToolOutcome['status'], output: string, error: string | null, endSession?: string): ToolOutcome {
  return { status, output: JSON.stringify(status === 'completed' ? { ok: true, message: output } : { ok: false, error: output }), error, latencyMs: Date.now() - t0, ...(endSession ? { endSession } : {}) };
}

/** The `transfer_call` SessionTool for one phone session and its one destination. */
export function transferCallTool(o: TransferToolOptions): SessionTool {
  const d = o.destination;
  const who = d.label || 'a human colleague';
  const notice = HOLD_NOTICE[o.language] ?? HOLD_NOTICE.en!;
  const spec = {
    name: TRANSFER_TOOL_NAME,
    description:
      `Transfer this phone call to ${who}. Use it when the caller asks for a person or needs help you cannot give. ` +
      'Tell the caller you are transferring them before you call it.' +
      (d.mode === 'warm' ? ' Give a short briefing for the person you transfer to, in the third person (who is calling and what they need).' : ''),
    parametersJsonSchema: JSON.stringify({
      type: 'object',
      properties: d.mode === 'warm' ? { briefing: { type: 'string', description: 'A short third-person summary of the caller and their request, spoken to the person before the call is connected' } } : {},
      additionalProperties: false,
    }),
  };

  /** After a handoff the session ends even if the actor does not act on `endSession`. */
  const endSoon = () => {
    setTimeout(() => o.link.session?.handle.end(TRANSFERRED_REASON), 1_500).unref();
  };

  async function cold(t0: number, signal: AbortSignal): Promise<ToolOutcome> {
    await o.link.agentQuiet();
    if (!o.link.announced()) await say(o, o.link.leg, notice.cold, signal);
    try {
      const handoff = await o.link.handingOff(o.carrier.transfer({ callId: o.link.leg.callId, destination: d.phone_number, from: o.ourNumber, ringTimeoutMs: o.ringTimeoutMs ?? TRANSFER_RING_TIMEOUT_MS, teamId: o.teamId }, signal));
      o.onHandoff?.({ mode: 'cold', destination: d.phone_number, at: new Date(), handoff });
    } catch (err) {
      const detail = err instanceof CarrierRefused ? err.detail : 'the carrier did not answer';
      o.log.warn({ err, mode: 'cold' }, 'transfer refused');
      return outcome(t0, 'failed', `The transfer to ${who} did not go through (${detail}). Apologize to the caller and keep helping them.`, detail);
    }
    endSoon();
    return outcome(t0, 'completed', `The call was transferred to ${who}.`, null, TRANSFERRED_REASON);
  }

  async function warm(argsJson: string, t0: number, signal: AbortSignal): Promise<ToolOutcome> {
    let briefing = '';
    try {
      const a = JSON.parse(argsJson || '{}') as { briefing?: unknown };
      if (typeof a.briefing === 'string') briefing = a.briefing.trim();
    } catch {
      // a malformed argument string: the default briefing
    }
    if (!briefing) briefing = `I have a caller${o.callerNumber ? ` from ${o.callerNumber}` : ''} on the line who asked to be transferred to you.`;
    await o.link.agentQuiet();
    if (!o.link.announced()) await say(o, o.link.leg, notice.warm, signal);
    const callId = o.link.leg.callId;
    const back = async (why: string, detail: string) => {
      await o.carrier.hold(callId, false).catch(() => {});
      o.link.inputMuted = false;
      return outcome(t0, 'failed', `${why} The caller is back with you: tell them and keep helping.`, detail);
    };
    o.link.inputMuted = true;
    try {
      await o.carrier.hold(callId, true);
    } catch (err) {
      o.link.inputMuted = false;
      const detail = err instanceof CarrierRefused ? err.detail : 'hold failed';
      return outcome(t0, 'failed', `The transfer to ${who} did not go through (${detail}). Apologize to the caller and keep helping them.`, detail);
    }
    let consult: CallLeg;
    try {
      const r = await o.carrier.dial({ from: o.ourNumber, to: d.phone_number, ringTimeoutMs: o.ringTimeoutMs ?? TRANSFER_RING_TIMEOUT_MS, sessionId: o.sessionId, consultFor: callId, teamId: o.teamId }, signal);
      if (r.status !== 'answered') return back(`${who} did not take the call (${r.status.replace('_', ' ')}).`, r.status);
      if (r.answeredBy === 'voicemail') {
        await o.carrier.hangUp(r.leg.callId);
        return back(`${who} did not answer (voicemail).`, 'voicemail');
      }
      consult = r.leg;
    } catch (err) {
      const detail = err instanceof CarrierRefused ? err.detail : 'the carrier did not answer';
      return back(`The transfer to ${who} did not go through (${detail}).`, detail);
    }
    const listener = d.warm_connect === 'confirm' ? listen(o, consult, signal) : null;
    try {
      await say(o, consult, briefing, signal, 'transfer_destination');
      if (listener) {
        await say(o, consult, notice.ask, signal, 'transfer_destination');
        const answer = await listener.answer(o.confirmTimeoutMs ?? TRANSFER_CONFIRM_TIMEOUT_MS);
        listener.stop();
        if (answer !== 'yes') {
          await o.carrier.hangUp(consult.callId);
          return back(answer === 'no' ? `${who} declined the call.` : `${who} did not confirm.`, answer === 'no' ? 'declined' : 'no_confirmation');
        }
      }
      if (signal.aborted) throw new Error('session ended');
      const handoff = await o.link.handingOff(o.carrier.bridge(callId, consult.callId));
      o.onHandoff?.({ mode: 'warm', destination: d.phone_number, at: new Date(), handoff });
    } catch (err) {
      listener?.stop();
      await o.carrier.hangUp(consult.callId).catch(() => {});
      const detail = err instanceof CarrierRefused ? err.detail : 'the transfer failed';
      o.log.warn({ err, mode: 'warm' }, 'warm transfer failed');
      if (signal.aborted) return outcome(t0, 'cancelled', 'The session ended during the transfer.', detail);
      return back(`The transfer to ${who} did not go through (${detail}).`, detail);
    }
    endSoon();
    return outcome(t0, 'completed', `The caller is now connected with ${who}.`, null, TRANSFERRED_REASON);
  }

  return {
    spec,
    source: 'system',
    mode: 'blocking',
    async execute(argsJson, { signal }) {
      const t0 = Date.now();
      try {
        return d.mode === 'warm' ? await warm(argsJson, t0, signal) : await cold(t0, signal);
      } catch (err) {
        o.log.error({ err }, 'transfer_call failed');
        o.link.inputMuted = false;
        return outcome(t0, 'failed', 'The transfer failed. Apologize to the caller and keep helping them.', 'internal error');
      }
    },
  };
}
