/**
 * `parley/client`: the client SDK for browsers and Node. Pass the session creation response
 * unmodified to `start()`; it connects by `transport` and never falls back to another one.
 *
 * ```ts
 * import { start } from 'parley/client';
 * const convo = await start(await (await fetch('/my-backend/session')).json(), {
 *   onAudio: (pcm) => speaker.play(pcm),            // agent audio, 16 kHz Int16 PCM
 *   microphone: myMic,                              // { start(onFrame) → stop }
 * });
 * convo.on('transcript', (t) => console.log(t.role, t.text, t.final));
 * convo.sendUserMessage('Hello');
 * await convo.hangup();
 * ```
 *
 * In a browser, a public agent needs no backend of yours:
 *
 * ```ts
 * import { startPublic, browserMicrophone, browserSpeaker } from 'parley/client';
 * const convo = await startPublic({ baseUrl: 'https://voice.example.com', agentId },
 *   { microphone: browserMicrophone(), speaker: browserSpeaker() });
 * ```
 *
 * Transports: `websocket` (browsers' `WebSocket`, or the `ws` package in Node 20, loaded on
 * demand; docs/websocket-transport.md) and `livekit` (`./livekit.ts`: a room factory, or the
 * `livekit-client` package, loaded only when a session uses it). Any other transport fails with
 * `unsupported_transport`. src/client/README.md describes the whole interface.
 */
export { start } from './start.ts';
export * from './types.ts';
export type { LivekitHandlers, LivekitRoom, LivekitRoomFactory } from './livekit.ts';
export { browserTimezone, createPublicSession, startPublic, type PublicSessionRequest } from './public.ts';
export { browserMicrophone, browserSpeaker, type BrowserAudioOptions, type BrowserMicrophone, type BrowserMicrophoneOptions, type BrowserSpeaker } from './audio.ts';
