// wss /v1/tts/live: the official client, the community client, and the protocol's edges
// with a raw socket (ws).
import t from 'tap';
import { FishAudioClient, RealtimeEvents } from 'fish-audio';
import { WebSocketSession, TTSRequest } from 'fish-audio-sdk';
import { pack, unpack } from 'msgpackr';
import WebSocket from 'ws';
import { startTestServer } from '../helpers/server.ts';
import { heard, MAGIC } from './tts-helpers.ts';

const app = await startTestServer({ backend: 'synthetic' });
t.teardown(() => app.close());
const wsUrl = app.url.replace('http://', 'ws://') + '/v1/tts/live';

interface Session {
  frames: any[];
  closed: Promise<{ code: number; reason: string }>;
  send(frame: unknown): void;
  audio(): Buffer;
  ws: WebSocket;
}

async function open(headers: Record<string, string> = app.auth): Promise<Session> {
  const ws = new WebSocket(wsUrl, { headers });
  const frames: any[] = [];
  ws.on('message', (data, isBinary) => frames.push(isBinary ? unpack(data as Buffer) : { text: String(data) }));
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  return {
    ws,
    frames,
    closed,
    send: (f) => ws.send(f instanceof Uint8Array ? f : pack(f)),
    audio: () => Buffer.concat(frames.filter((f) => f.event === 'audio').map((f) => f.audio)),
  };
}

t.test('official fish-audio client: live synthesis streams audio and closes', async (t) => {
  const fish = new FishAudioClient({ apiKey: app.key, baseUrl: app.url });
  async function* text() {
    yield 'Hello ';
    yield 'live world.';
  }
  const conn = await fish.textToSpeech.convertRealtime({ text: '', format: 'pcm', sample_rate: 16000 } as never, text(), 's1');
  const parts: Buffer[] = [];
  await new Promise<void>((resolve, reject) => {
    conn.on(RealtimeEvents.AUDIO_CHUNK, (a: any) => parts.push(Buffer.from(a)));
    conn.on(RealtimeEvents.CLOSE, () => resolve());
    conn.on(RealtimeEvents.ERROR, (e: any) => reject(e));
  });
  t.equal(await heard(Buffer.concat(parts), 'pcm', 16000), 'Hello live world.');
});

t.test('community fish-audio-sdk: live synthesis delivers audio (its reader drops back-to-back frames)', async (t) => {
  const session = new WebSocketSession(app.key, app.url.replace('http://', 'ws://'));
  t.teardown(() => session.close());
  async function* text() {
    yield 'Community ';
    yield 'client'; // no sentence end: nothing is spoken before `stop`, when its listener exists
  }
  let got = 0;
  for await (const chunk of session.tts(new TTSRequest('', { format: 'pcm' }), text())) {
    got += chunk.length;
    break; // its single-resolver reader may lose `finish`; one chunk is the contract we can check
  }
  t.ok(got > 0, 'audio arrived');
});

t.test('raw socket: start, text, flush, stop; audio in the start format; finish stop; close 1000', async (t) => {
  const s = await open({ ...app.auth, model: 's2.1-pro' });
  s.send({ event: 'start', request: { text: '', format: 'mp3', latency: 'balanced', chunk_length: 100, prosody: null, reference_id: null } });
  s.send({ event: 'text', text: 'First part' });
  s.send({ event: 'flush' });
  const flushed = await new Promise<boolean>((resolve) => {
    const timer = setInterval(() => {
      if (s.frames.some((f) => f.event === 'audio')) {
        clearInterval(timer);
        resolve(true);
      }
    }, 10);
  });
  t.ok(flushed, 'flush speaks the buffer before stop');
  s.send({ event: 'text', text: ' and the second part.' });
  s.send({ event: 'something_new' }); // ignored
  s.send({ event: 'stop' });
  const closed = await s.closed;
  t.equal(closed.code, 1000);
  t.same(s.frames[s.frames.length - 1], { event: 'finish', reason: 'stop' });
  t.ok(s.frames.slice(0, -1).every((f) => f.event === 'audio' && f.audio instanceof Uint8Array), 'audio frames carry bytes');
  const mp3 = s.audio();
  t.ok(MAGIC.mp3!(mp3), 'MP3 bytes');
  t.equal(await heard(mp3, 'mp3'), 'First part and the second part.');
});

t.test('upgrade without a valid key: HTTP 401 before the upgrade', async (t) => {
  for (const headers of [{ Authorization: 'Bearer wrong' }, {}]) {
    const status = await new Promise<number>((resolve) => {
      const ws = new WebSocket(wsUrl, { headers });
      ws.on('unexpected-response', (_req, res) => {
        resolve(res.statusCode ?? 0);
        res.resume();
        ws.terminate();
      });
      ws.on('open', () => {
        resolve(101);
        ws.close();
      });
      ws.on('error', () => {});
    });
    t.equal(status, 401, JSON.stringify(headers));
  }
});

t.test('protocol errors end with finish{reason:error, message} and close 1008', async (t) => {
  const cases: [string, unknown[], RegExp][] = [
    ['first frame not start', [{ event: 'text', text: 'hi' }], /first frame must be a start/],
    ['invalid request', [{ event: 'start', request: { text: '', chunk_length: 50 } }], /chunk_length/],
    ['sample rate', [{ event: 'start', request: { text: '', format: 'opus', sample_rate: 44100 } }], /^Invalid sample rate/],
    ['unknown voice', [{ event: 'start', request: { text: '', reference_id: 'nobody' } }], /^Reference not found$/],
    ['second start', [{ event: 'start', request: { text: '' } }, { event: 'start', request: { text: '' } }], /one start/],
    ['not MessagePack', [new Uint8Array([0x82, 0xa5, 0x65])], /MessagePack/],
  ];
  for (const [name, frames, message] of cases) {
    const s = await open();
    for (const f of frames) s.send(f);
    const closed = await s.closed;
    t.equal(closed.code, 1008, `${name}: close 1008`);
    const last = s.frames[s.frames.length - 1];
    t.equal(last?.event, 'finish', `${name}: finish frame`);
    t.equal(last?.reason, 'error');
    t.match(last?.message, message, name);
  }
});

t.test('a client that goes away cancels the backend stream', async (t) => {
  const s = await open();
  s.send({ event: 'start', request: { text: '', format: 'pcm' } });
  s.send({ event: 'text', text: Array.from({ length: 200 }, (_, i) => `Sentence ${i}.`).join(' ') + ' ' });
  await new Promise<void>((resolve) => {
    const timer = setInterval(() => {
      if (s.frames.length > 0) {
        clearInterval(timer);
        resolve();
      }
    }, 10);
  });
  t.equal(app.backend!.stats().activeCalls, 1);
  s.ws.terminate();
  const end = Date.now() + 10_000;
  while (app.backend!.stats().activeCalls !== 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  t.equal(app.backend!.stats().activeCalls, 0, 'backend call cancelled');
});
