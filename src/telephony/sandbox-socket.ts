/**
 * `wss /v1/telephony/sandbox/calls`: the phones of the sandbox carrier (docs/telephony.md, "The sandbox phones").
 *
 * - `?dial=<to>&from=<caller>`: the socket calls one of the carrier's numbers (inbound call).
 * - `?line=<number>`: the socket is the phone line of `number`: outbound calls and transfers to
 *   it ring here (`call.ringing`), and it answers (`{"type":"answer"}`) or declines.
 *
 * Binary frames both ways are 8 kHz mono signed 16-bit little-endian PCM; text frames are JSON.
 * Needs an API key (`Authorization: Bearer …`), checked after the upgrade: a bad one closes
 * with 4401, a bad query with 4400. Audio to the phone is dropped while more than
 * `MAX_FRAME_BYTES` wait unsent; a phone that then takes nothing (audio or JSON past that mark)
 * for `PARLEY_WS_STALL_TIMEOUT_MS` is closed 4008, which hangs up its call as any close does.
 */
import type uws from 'uWebSockets.js';
import type { Principal } from '../auth/principal.ts';
import { acceptUpgrade, readHandshake, readQuery, type HttpApp } from '../http/app.ts';
import type { Logger } from '../log.ts';
import { stallWatch } from '../http/ws-frames.ts';
import type { PhoneCommand, PhoneSocket, SandboxCalls, SandboxPhone } from './sandbox-calls.ts';

export const SANDBOX_CALLS_PATH = '/v1/telephony/sandbox/calls';
const MAX_FRAME_BYTES = 64 * 1024;
const E164 = /^\+[1-9][0-9]{1,14}$/;

interface UserData {
  auth: string;
  dial: string;
  from: string;
  line: string;
  closed: boolean;
  phone?: SandboxPhone;
  /** Closes the socket 4008 when its client stops reading (`stallWatch`). */
  stall?: ReturnType<typeof stallWatch>;
}

export function mountSandboxCalls(http: HttpApp, calls: SandboxCalls, o: { authenticate(token: string): Promise<Principal>; log: Logger }): void {
  http.ws<UserData>(SANDBOX_CALLS_PATH, {
    compression: 0,
    maxPayloadLength: MAX_FRAME_BYTES,
    maxBackpressure: 4 * 1024 * 1024,
    idleTimeout: 120,
    sendPingsAutomatically: true,
    upgrade: (res, req, context) => {
      res.onAborted(() => {});
      const q = new URLSearchParams(readQuery(req));
      const data: UserData = { auth: req.getHeader('authorization'), dial: q.get('dial') ?? '', from: q.get('from') ?? '', line: q.get('line') ?? '', closed: false };
      const hs = readHandshake(req);
      acceptUpgrade<UserData>(res, hs, data, context);
    },
    open: (ws) => {
      const d = ws.getUserData();
      const socket: PhoneSocket = {
        json: (m) => {
          if (d.closed) return;
          ws.cork(() => ws.send(JSON.stringify(m), false));
          d.stall?.sent(ws.getBufferedAmount(), MAX_FRAME_BYTES);
        },
        audio: (pcm) => {
          if (d.closed) return;
          // Past the mark the audio is dropped and the stall clock runs (`drain` stops it).
          if (ws.getBufferedAmount() > MAX_FRAME_BYTES) return d.stall?.behind();
          d.stall?.caughtUp();
          ws.cork(() => ws.send(new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength), true));
        },
        close: (code, reason) => {
          if (d.closed) return;
          d.closed = true;
          ws.cork(() => ws.end(code, reason));
        },
      };
      d.stall = stallWatch(http.wsStallTimeoutMs, (code, reason) => {
        o.log.warn({ number: d.line || d.from, stallTimeoutMs: http.wsStallTimeoutMs }, 'sandbox phone not reading: closed 4008, call hung up');
        socket.close(code, reason);
      });
      const m = /^Bearer\s+(\S+)$/i.exec(d.auth);
      if (!m) return socket.close(4401, 'API key required');
      const dial = d.dial.trim() ? `+${d.dial.trim().replace(/^\+/, '')}` : '';
      const from = d.from.trim() ? `+${d.from.trim().replace(/^\+/, '')}` : '';
      const line = d.line.trim() ? `+${d.line.trim().replace(/^\+/, '')}` : '';
      if (!!dial === !!line || (dial && (!E164.test(dial) || !E164.test(from))) || (line && !E164.test(line)))
        return socket.close(4400, 'Give either dial=<E.164>&from=<E.164> or line=<E.164>');
      o.authenticate(m[1]!).then(
        (principal) => {
          if (d.closed) return;
          d.phone = dial ? calls.dialIn(socket, from, dial) : calls.registerLine(socket, line, principal.teamId);
        },
        () => socket.close(4401, 'Invalid API key'),
      );
    },
    message: (ws, message, isBinary) => {
      const d = ws.getUserData();
      if (!d.phone) return;
      if (isBinary) {
        if (message.byteLength % 2 !== 0) return;
        d.phone.audio(new Int16Array(message.slice(0)));
        return;
      }
      let c: PhoneCommand | null = null;
      try {
        const m = JSON.parse(Buffer.from(message).toString('utf8')) as { type?: unknown; digits?: unknown; as?: unknown };
        if (m.type === 'answer') c = m.as === 'voicemail' ? { type: 'answer', as: 'voicemail' } : { type: 'answer' };
        else if (m.type === 'reject' || m.type === 'hangup') c = { type: m.type };
        else if (m.type === 'dtmf' && typeof m.digits === 'string' && /^[0-9*#]{1,32}$/.test(m.digits)) c = { type: 'dtmf', digits: m.digits };
      } catch {
        c = null;
      }
      if (c) d.phone.command(c);
    },
    drain: (ws) => ws.getUserData().stall?.caughtUp(),
    close: (ws) => {
      const d = ws.getUserData();
      d.closed = true;
      d.stall?.stop();
      if (d.phone) calls.forget(d.phone);
    },
  } as uws.WebSocketBehavior<UserData>, { shutdown: 'owner' });
}
