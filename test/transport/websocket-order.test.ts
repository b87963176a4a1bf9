/**
 * What a client of the websocket transport receives, in order (docs/websocket-transport.md): the
 * platform writes a socket's agent audio and JSON messages of one moment together, and the
 * client still sees them in the order they were handed over: a turn's metrics and `speaking`
 * before its first audio frame, each interim agent transcript after the audio that completed
 * its words, the final transcript after the reply's last frame and before the next state. The
 * audio stays 20 ms messages.
 */
import t from 'tap';
import WebSocket from 'ws';
import { makeAgent } from '../agent/sessions-helpers.ts';
import { createSession, sleep } from '../e2e/session-helpers.ts';
import { startTestServer } from '../helpers/server.ts';

type Received = { audio: number } | { json: any };

t.test('agent audio and JSON messages arrive in the order they were handed over', async (t) => {
  const app = await startTestServer({ backend: 'synthetic' });
  t.teardown(() => app.close());
  const agent = await makeAgent(app, { config: { prompt: { first_message_mode: 'off' } } });
  const s = await createSession(app, agent);
  const ws = new WebSocket(`${s.websocket_url}?token=${s.token}`);
  const received: Received[] = [];
  ws.on('message', (d, binary) => received.push(binary ? { audio: (d as Buffer).length } : { json: JSON.parse(String(d)) }));
  ws.on('error', () => {});
  const closed = new Promise((resolve) => ws.on('close', resolve));
  const index = (pred: (m: any) => boolean, from = 0) => received.findIndex((r, i) => i >= from && 'json' in r && pred(r.json));
  const until = async (pred: (m: any) => boolean, from = 0) => {
    for (let i = 0; i < 500 && index(pred, from) < 0; i++) await sleep(20);
    return index(pred, from);
  };
  t.ok((await until((m) => m.type === 'session.started')) >= 0, 'the session started');
  await until((m) => m.topic === 'lk.agent.state' && m.state === 'idle');
  ws.send(JSON.stringify({ type: 'user.message', text: 'hello, tell me something' }));
  const final = await until((m) => m.topic === 'lk.transcription' && m.role === 'agent' && m.final);
  t.ok(final > 0, 'the agent answered');
  const next = await until((m) => m.topic === 'lk.agent.state' && (m.state === 'idle' || m.state === 'listening'), final + 1);

  const audio = received.map((r, i) => ('audio' in r ? i : -1)).filter((i) => i >= 0);
  t.ok(audio.length > 10, 'the reply was spoken');
  t.ok(audio.every((i) => (received[i] as { audio: number }).audio === 640), 'every audio message is one 20 ms frame');
  const metrics = index((m) => m.type === 'turn.metrics');
  const speaking = index((m) => m.topic === 'lk.agent.state' && m.state === 'speaking');
  t.ok(metrics >= 0 && metrics < audio[0]!, 'the turn metrics before the first audio frame');
  t.ok(speaking >= 0 && speaking < audio[0]!, '`speaking` before the first audio frame');
  const interims = received.flatMap((r, i) => ('json' in r && r.json.topic === 'lk.transcription' && r.json.role === 'agent' && !r.json.final ? [i] : []));
  t.ok(interims.length > 0, 'interim agent transcripts, paced to playback');
  t.ok(interims.every((i) => i > audio[0]!), 'each after audio that completed its words');
  t.ok(final > audio[audio.length - 1]!, 'the final transcript after the last frame of the reply');
  t.ok(next > final, 'then the next state');
  const lastAudio = audio[audio.length - 1]!;
  t.ok(lastAudio < next, 'no audio of the reply after the state left speaking');
  ws.send(JSON.stringify({ type: 'user.hangup' }));
  await closed;
});
