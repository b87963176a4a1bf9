// wss …/realtime (docs/api/compat.md "Realtime" and "Limits") driven step by step with a raw `ws`
// client, and once with the `openai` package's own realtime client (OpenAIRealtimeWS).
import t from 'tap';
import { connect as netConnect } from 'node:net';
import WebSocket from 'ws';
import OpenAI from 'openai';
import { OpenAIRealtimeWS } from 'openai/realtime/ws';
import { startTestServer, type TestServer } from '../helpers/server.ts';
import { heard } from '../speech/tts-helpers.ts';

const TEXT = 'hello world from parley';
const MiB = 1024 * 1024;

let app: TestServer;
let wsBase: string;
t.before(async () => {
  app = await startTestServer({ backend: 'synthetic' });
  wsBase = app.url.replace(/^http/, 'ws');
});
t.teardown(() => app.close());

/** A raw client: events are queued in arrival order; `next` takes the next one. */
class Conn {
  readonly events: any[] = [];
  private waiter: (() => void) | null = null;
  closed: { code: number } | null = null;
  constructor(readonly ws: WebSocket) {
    ws.on('message', (d) => {
      this.events.push(JSON.parse(d.toString()));
      this.waiter?.();
    });
    ws.on('close', (code) => {
      this.closed = { code };
      this.waiter?.();
    });
  }
  static open(query: string, headers: Record<string, string> = { Authorization: `Bearer ${app.key}` }, base = '/compat/v1'): Promise<Conn> {
    const ws = new WebSocket(`${wsBase}${base}/realtime?${query}`, { headers, maxPayload: 256 * MiB });
    return new Promise((resolve, reject) => {
      ws.once('open', () => resolve(new Conn(ws)));
      ws.once('error', reject);
    });
  }
  send(e: Record<string, unknown>): void {
    this.ws.send(JSON.stringify(e));
  }
  /** The next event (optionally: the next of this type, others skipped). */
  async next(type?: string): Promise<any> {
    for (;;) {
      while (this.events.length) {
        const e = this.events.shift();
        if (!type || e.type === type) return e;
      }
      if (this.closed) throw new Error(`socket closed (${this.closed.code}) waiting for ${type ?? 'an event'}`);
      await new Promise<void>((r) => (this.waiter = r));
      this.waiter = null;
    }
  }
  async error(code: string): Promise<any> {
    const e = await this.next();
    if (e.type !== 'error' || e.error.code !== code) throw new Error(`expected error ${code}, got ${JSON.stringify(e).slice(0, 300)}`);
    return e.error;
  }
  close(): Promise<void> {
    if (this.closed) return Promise.resolve();
    return new Promise((r) => {
      this.ws.once('close', () => r());
      this.ws.close();
    });
  }
}

/** A refused handshake: status and JSON body. */
function refused(url: string, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.on('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(Buffer.concat(chunks).toString()) }));
    });
    ws.on('open', () => reject(new Error('upgrade was accepted')));
    ws.on('error', () => {});
  });
}

/** Speaks with a response and returns the concatenated audio and the done event. */
async function response(c: Conn, create: Record<string, unknown> = {}): Promise<{ audio: Buffer; done: any; transcript: string; events: any[] }> {
  c.send({ type: 'response.create', ...create });
  let b64 = '';
  let transcript = '';
  const events: any[] = [];
  for (;;) {
    const e = await c.next();
    events.push(e);
    if (e.type === 'response.output_audio.delta') b64 += e.delta;
    if (e.type === 'response.output_audio_transcript.done') transcript = e.transcript;
    if (e.type === 'error') throw new Error(JSON.stringify(e.error));
    if (e.type === 'response.done') return { audio: Buffer.from(b64, 'base64'), done: e, transcript, events };
  }
}

/** PCM 24 kHz of TEXT from the compat speech route. */
async function speechPcm(text = TEXT): Promise<Buffer> {
  const r = await fetch(`${app.url}/compat/v1/audio/speech`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'tts-1', voice: '', input: text, response_format: 'pcm16' }) });
  return Buffer.from(await r.arrayBuffer());
}

t.test('handshake: key by header or ?api_key=, refusals in the family envelope before the upgrade', async (t) => {
  const none = await refused(`${wsBase}/compat/v1/realtime?model=gpt-realtime`);
  t.equal(none.status, 401, 'no key → 401');
  t.match(none.body, { error: { code: 401, type: 'authentication_error' } });
  const bad = await refused(`${wsBase}/compat/v1/realtime?model=gpt-realtime&api_key=nope`);
  t.equal(bad.status, 401, 'invalid key → 401');
  t.match(bad.body, { error: { code: 401, type: 'provider_error', message: 'Invalid Token' } });
  const model = await refused(`${wsBase}/compat/v1/realtime?model=nope`, { Authorization: `Bearer ${app.key}` });
  t.equal(model.status, 400, 'unknown model → 400');
  t.match(model.body, { error: { param: 'model' } });
  const header = await refused(`${wsBase}/compat/v1/realtime?model=gpt-realtime`, { Authorization: `Bearer ${app.key}`, 'X-Service-Nope': '1' });
  t.equal(header.status, 400, 'unknown X-Service- header → 400');
  for (const base of ['/compat/v1', '/compat/api/v1', '/compat/openai/v1']) {
    const c = await Conn.open(`model=gpt-realtime&api_key=${app.key}`, {}, base);
    const created = await c.next();
    t.equal(created.type, 'session.created', `${base}: ?api_key= accepted`);
    await c.close();
  }
});

t.test('session.created and session.update: positions, formats, refusals', async (t) => {
  const c = await Conn.open('model=service/s2.1-pro');
  const { session } = await c.next('session.created');
  t.match(session, { type: 'realtime', object: 'realtime.session', model: 'service/s2.1-pro', output_modalities: ['audio'], audio: { input: { turn_detection: null, format: { type: 'audio/pcm', rate: 24000 } }, output: { format: { type: 'audio/pcm', rate: 24000 }, voice: '', speed: 1 } } });
  t.equal(session.audio.input.turn_detection, null, 'session.created shows turn_detection: null');

  c.send({ type: 'session.update', session: { voice: '', speed: 1.5, output_audio_format: 'mp3' } });
  let s = (await c.next()).session;
  t.match(s.audio.output, { speed: 1.5, voice: '', format: { type: 'audio/mpeg', rate: 44100 } }, 'top-level voice/speed/format echoed in the GA position; mp3 → 44100');
  c.send({ type: 'session.update', session: { type: 'realtime', audio: { output: { speed: 0.5, format: { type: 'audio/pcm', rate: 16000 } } } } });
  s = (await c.next()).session;
  t.match(s.audio.output, { speed: 0.5, format: { type: 'audio/pcm', rate: 16000 } }, 'GA position with a rate');
  c.send({ type: 'session.update', session: { audio: { output: { format: 'pcm16' } } } });
  t.same((await c.next()).session.audio.output.format, { type: 'audio/pcm', rate: 24000 }, 'a format without a rate resets to its default (pcm 24000)');
  c.send({ type: 'session.update', session: { audio: { output: { format: { type: 'audio/opus' } } } } });
  t.same((await c.next()).session.audio.output.format, { type: 'audio/opus', rate: 48000 }, 'opus → 48000');
  c.send({ type: 'session.update', session: { audio: { output: { format: { type: 'audio/wav' } } }, turn_detection: null } });
  t.same((await c.next()).session.audio.output.format, { type: 'audio/wav', rate: 44100 }, 'wav → 44100; turn_detection null accepted');

  const refusals: [string, Record<string, unknown>][] = [
    ['invalid_speed', { speed: 5 }],
    ['invalid_speed', { audio: { output: { speed: 0.1 } } }],
    ['unsupported_turn_detection', { turn_detection: { type: 'server_vad' } }],
    ['unsupported_turn_detection', { audio: { input: { turn_detection: { type: 'semantic_vad' } } } }],
    ['unsupported_output_modalities', { output_modalities: ['text'] }],
    ['unsupported_audio_format', { audio: { output: { format: { type: 'audio/pcmu' } } } }],
    ['unsupported_audio_format', { audio: { input: { format: { type: 'audio/pcma' } } } }],
    ['unsupported_audio_format', { output_audio_format: 'g711_ulaw' }],
    ['invalid_value', { audio: { output: { format: { type: 'audio/mpeg', rate: 22050 } } } }],
    ['invalid_value', { voice: 'alloy' }],
  ];
  for (const [code, update] of refusals) {
    c.send({ type: 'session.update', event_id: 'evt_1', session: update });
    const err = await c.error(code);
    t.equal(err.event_id, 'evt_1', `${code} for ${JSON.stringify(update)}, naming the client event`);
  }
  c.send({ type: 'session.update', session: {} });
  t.match((await c.next()).session.audio.output, { speed: 0.5, format: { type: 'audio/wav' } }, 'refused updates changed nothing');
  await c.close();
});

t.test('events: truncate is a silent no-op, others unknown_event_type, malformed frames refused', async (t) => {
  const c = await Conn.open('model=gpt-realtime');
  await c.next('session.created');
  c.send({ type: 'conversation.item.truncate', item_id: 'x', content_index: 0, audio_end_ms: 0 });
  c.send({ type: 'output_audio_buffer.clear' });
  t.equal((await c.error('unknown_event_type')).param, 'type', 'truncate answered nothing; the next event refuses the unknown one');
  c.ws.send('not json');
  await c.error('invalid_json');
  c.send({ type: 'conversation.item.delete', item_id: 'missing' });
  await c.error('item_not_found');
  c.send({ type: 'response.cancel' });
  await c.error('response_cancel_not_active');
  c.send({ type: 'input_audio_buffer.commit' });
  await c.error('input_audio_buffer_commit_empty');
  c.send({ type: 'response.create' });
  await c.error('no_text_to_speak');
  await c.close();
});

t.test('response.create speaks the last text item; one response at a time; instructions win; cancel', async (t) => {
  const c = await Conn.open('model=gpt-realtime');
  await c.next('session.created');
  c.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: 'not this one' }] } });
  t.equal((await c.next()).type, 'conversation.item.added');
  t.equal((await c.next()).type, 'conversation.item.done');
  c.send({ type: 'conversation.item.create', item: { id: 'item_a', type: 'message', role: 'assistant', content: [{ type: 'text', text: TEXT }] } });
  const added = await c.next('conversation.item.added');
  t.match(added.item, { id: 'item_a', role: 'assistant' });
  await c.next('conversation.item.done');

  const r = await response(c);
  t.equal(r.done.response.status, 'completed');
  t.equal(r.transcript, TEXT, 'transcript of the spoken text');
  t.equal(await heard(r.audio, 'pcm', 24000), TEXT, 'the last text item is spoken (pcm 24 kHz)');
  t.same(r.events.map((e) => e.type).filter((x) => x !== 'response.output_audio.delta'), [
    'response.created', 'response.output_item.added', 'response.content_part.added', 'response.output_audio_transcript.delta',
    'response.output_audio.done', 'response.output_audio_transcript.done', 'response.content_part.done', 'response.output_item.done',
    'conversation.item.added', 'conversation.item.done', 'response.done',
  ], 'the response events in order');
  const assistant = r.events.find((e) => e.type === 'conversation.item.added');
  t.match(assistant.item, { role: 'assistant', content: [{ type: 'output_audio', transcript: TEXT }] }, 'the response joins the conversation');

  c.send({ type: 'response.create' });
  c.send({ type: 'response.create', event_id: 'second' });
  let sawBusy = false;
  for (;;) {
    const e = await c.next();
    if (e.type === 'error') {
      t.equal(e.error.code, 'response_already_active', 'second response.create while one is active');
      sawBusy = true;
    }
    if (e.type === 'response.done') break;
  }
  t.ok(sawBusy);

  const ins = await response(c, { response: { instructions: 'from parley' } });
  t.equal(await heard(ins.audio, 'pcm', 24000), 'from parley', 'response.instructions is spoken instead of the conversation');
  const oob = await response(c, { response: { input: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'hello world' }] }] } });
  t.equal(await heard(oob.audio, 'pcm', 24000), 'hello world', 'response.input (out of band) is spoken');

  c.send({ type: 'session.update', session: { audio: { output: { format: { type: 'audio/mpeg' } } } } });
  await c.next('session.updated');
  const mp3 = await response(c);
  t.equal(await heard(mp3.audio, 'mp3'), 'hello world', 'mp3 output decodes to the spoken text (last text: the previous out-of-band input is not kept)');

  c.send({ type: 'response.create', response: { instructions: TEXT.repeat(20) } });
  c.send({ type: 'response.cancel' });
  const cancelled = await c.next('response.done');
  t.equal(cancelled.response.status, 'cancelled', 'response.cancel ends the response as cancelled');

  c.send({ type: 'response.create', response: { output_modalities: ['text'] } });
  await c.error('unsupported_output_modalities');
  const failed = await response(c, { response: { instructions: TEXT, audio: { output: { voice: 'voice_nope' } } } });
  t.match(failed.done.response, { status: 'failed', status_details: { type: 'failed', error: { message: 'Reference not found' } }, output: [] }, 'a refused synthesis ends the response as failed');
  t.notOk(failed.events.some((e) => e.type === 'conversation.item.added'), 'a failed response adds no item');
  await c.close();
});

t.test('STT on the socket: append + commit → transcription completed or failed (audio kept)', async (t) => {
  const pcm = await speechPcm();
  const c = await Conn.open('model=gpt-realtime');
  await c.next('session.created');
  for (let i = 0; i < pcm.length; i += 48000) c.send({ type: 'input_audio_buffer.append', audio: pcm.subarray(i, i + 48000).toString('base64') });
  c.send({ type: 'input_audio_buffer.commit' });
  const committed = await c.next('input_audio_buffer.committed');
  const item = await c.next('conversation.item.added');
  t.equal(item.item.id, committed.item_id, 'the committed audio becomes a user item');
  const done = await c.next('conversation.item.input_audio_transcription.completed');
  t.match(done, { item_id: committed.item_id, content_index: 0, transcript: TEXT, usage: { type: 'duration' } }, 'transcript of the committed audio');
  t.notOk('words' in done, 'no timestamps on the socket');
  const r = await response(c);
  t.equal(await heard(r.audio, 'pcm', 24000), TEXT, 'response.create speaks the transcript of the last audio item');

  c.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(4800).toString('base64') });
  c.send({ type: 'input_audio_buffer.commit' });
  const short = await c.next('input_audio_buffer.committed');
  const failed = await c.next('conversation.item.input_audio_transcription.failed');
  t.match(failed, { item_id: short.item_id, error: { message: /shorter than 1 second/ } }, '0.1 s of audio → failed');
  c.send({ type: 'conversation.item.delete', item_id: short.item_id });
  t.equal((await c.next('conversation.item.deleted')).item_id, short.item_id, 'the failed item (its audio) was kept');

  const wav = Buffer.from(await (await fetch(`${app.url}/compat/v1/audio/speech`, { method: 'POST', headers: { ...app.auth, 'Content-Type': 'application/json' }, body: JSON.stringify({ model: 'tts-1', voice: '', input: TEXT, response_format: 'wav' }) })).arrayBuffer());
  c.send({ type: 'session.update', session: { audio: { input: { format: { type: 'audio/wav' } } } } });
  await c.next('session.updated');
  c.send({ type: 'input_audio_buffer.append', audio: wav.toString('base64') });
  c.send({ type: 'input_audio_buffer.commit' });
  await c.next('input_audio_buffer.committed');
  await c.next('conversation.item.done');
  t.match(await c.next(), { type: 'conversation.item.input_audio_transcription.completed', transcript: TEXT }, 'wav input format: the container is transcribed as sent');

  c.send({ type: 'input_audio_buffer.append', audio: pcm.toString('base64') });
  c.send({ type: 'input_audio_buffer.clear' });
  await c.next('input_audio_buffer.cleared');
  c.send({ type: 'input_audio_buffer.commit' });
  await c.error('input_audio_buffer_commit_empty');
  await c.close();
});

t.test('dedicated transcription sessions: ?intent=transcription and transcription_session.update', async (t) => {
  const pcm = await speechPcm();
  const c = await Conn.open('intent=transcription');
  const created = await c.next();
  t.match(created, { type: 'session.created', session: { type: 'transcription', object: 'realtime.transcription_session', audio: { input: { transcription: { model: 'service/transcribe-1' }, turn_detection: null } } } });
  c.send({ type: 'session.update', session: { type: 'transcription', audio: { input: { format: { type: 'audio/pcm', rate: 24000 }, transcription: { model: 'whisper-1', language: 'en' } } } } });
  t.match((await c.next()).session, { object: 'realtime.transcription_session', audio: { input: { transcription: { model: 'service/transcribe-1', language: 'en' } } } });
  c.send({ type: 'input_audio_buffer.append', audio: pcm.toString('base64') });
  c.send({ type: 'input_audio_buffer.commit' });
  await c.next('input_audio_buffer.committed');
  t.equal((await c.next()).type, 'conversation.item.input_audio_transcription.completed', 'no conversation item in a transcription session');
  c.send({ type: 'response.create', response: { instructions: 'hi' } });
  await c.error('invalid_session_type');
  await c.close();

  const d = await Conn.open('model=gpt-realtime');
  await d.next('session.created');
  d.send({ type: 'transcription_session.update', session: { input_audio_format: 'pcm16', input_audio_transcription: { model: 'gpt-4o-transcribe' } } });
  const updated = await d.next();
  t.match(updated, { type: 'transcription_session.updated', session: { type: 'transcription', object: 'realtime.transcription_session' } });
  d.send({ type: 'transcription_session.update', session: { input_audio_transcription: { model: 'tts-1' } } });
  t.match(await d.error('invalid_value'), { param: 'model' }, 'a speech model as the transcription model is refused');
  await d.close();
});

t.test('native parameters on the handshake apply to speech; commit refuses them', async (t) => {
  const c = await Conn.open('model=gpt-realtime', { Authorization: `Bearer ${app.key}`, 'X-Service-Temperature': '0.3' });
  await c.next('session.created');
  const r = await response(c, { response: { instructions: TEXT } });
  t.equal(await heard(r.audio, 'pcm', 24000), TEXT, 'synthesis with native parameters');
  c.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(48000).toString('base64') });
  c.send({ type: 'input_audio_buffer.commit' });
  await c.error('unsupported_native_options');
  await c.close();
});

t.test('socket limits: 1 MiB text per item, 1024 items, 100 MiB uncommitted audio, 32 MiB frames', async (t) => {
  const c = await Conn.open('model=gpt-realtime');
  await c.next('session.created');
  const item = (text: string) => ({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text }] } });
  c.send(item('x'.repeat(MiB + 1)));
  await c.error('conversation_too_large');
  c.send(item('x'.repeat(MiB)));
  await c.next('conversation.item.done');
  for (let i = 1; i < 1024; i++) c.send(item(`n${i}`));
  for (let i = 1; i < 1024; i++) await c.next('conversation.item.done');
  c.send(item('one too many'));
  t.equal((await c.error('conversation_too_large')).message, 'The conversation holds at most 1024 items: delete some first', 'item 1025 → conversation_too_large');

  const chunk = Buffer.alloc(20 * MiB).toString('base64');
  for (let i = 0; i < 5; i++) c.send({ type: 'input_audio_buffer.append', audio: chunk });
  c.send({ type: 'input_audio_buffer.append', audio: Buffer.alloc(1).toString('base64') });
  await c.error('input_audio_buffer_too_large');
  c.send({ type: 'input_audio_buffer.clear' });
  await c.next('input_audio_buffer.cleared');
  t.pass('the socket stays open after the refused append');

  c.ws.send('x'.repeat(32 * MiB + 1));
  await new Promise<void>((r) => (c.closed ? r() : c.ws.once('close', () => r())));
  t.ok(c.closed, 'a frame over 32 MiB closes the socket');
});

t.test('the openai package\'s own realtime client (OpenAIRealtimeWS) over ws', async (t) => {
  const { port } = new URL(app.url);
  const client = new OpenAI({ apiKey: app.key, baseURL: `${app.url}/compat/v1`, maxRetries: 0 });
  // The client always asks for wss://; the loopback test server speaks plain ws.
  const rt = new OpenAIRealtimeWS({ model: 'gpt-realtime', options: { createConnection: () => netConnect(Number(port), '127.0.0.1') } as never }, client);
  const errors: unknown[] = [];
  rt.on('error', (e) => errors.push(e));
  const created = await new Promise<any>((resolve, reject) => {
    rt.once('session.created', resolve);
    rt.socket.once('error', reject);
    rt.socket.once('close', (code) => reject(new Error(`closed ${code}`)));
  });
  t.equal(created.session.type, 'realtime');
  rt.send({ type: 'conversation.item.create', item: { type: 'message', role: 'user', content: [{ type: 'input_text', text: TEXT }] } });
  let b64 = '';
  rt.on('response.output_audio.delta', (e) => (b64 += e.delta));
  const done = new Promise<any>((resolve) => rt.once('response.done', resolve));
  rt.send({ type: 'response.create' });
  t.equal((await done).response.status, 'completed');
  t.equal(await heard(Buffer.from(b64, 'base64'), 'pcm', 24000), TEXT, 'audio through the official client');
  rt.send({ type: 'session.update', session: { type: 'realtime', audio: { input: { turn_detection: { type: 'server_vad' } } } } });
  await new Promise((r) => rt.once('error', r));
  t.match((errors[0] as { error?: { code?: string } }).error, { code: 'unsupported_turn_detection' }, 'refusals reach the client\'s error handler');
  await new Promise<void>((resolve) => {
    rt.socket.once('close', () => resolve());
    rt.close();
  });
});
