// The native backend opens each connection's HTTP/2 receive window wide (CONNECTION_WINDOW_BYTES):
// the platform streams every caller's audio over a few connections, and HTTP/2's 64 KB default
// made it wait for window updates while recognition fell behind the audio.
import http2 from 'node:http2';
import t from 'tap';
import { CONNECTION_WINDOW_BYTES, STREAM_WINDOW_BYTES, startBackend } from '../../native/server.ts';

t.test('a client of the native backend may send CONNECTION_WINDOW_BYTES on a connection before a window update', async (t) => {
  const backend = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
  const session = http2.connect(`http://${backend.address}`);
  t.teardown(async () => {
    session.destroy();
    await backend.close();
  });
  await new Promise<void>((resolve, reject) => {
    session.once('remoteSettings', () => resolve());
    session.once('error', reject);
  });
  // The window update follows the server's SETTINGS frame: wait until the client has read it.
  for (let i = 0; i < 100 && (session.state.remoteWindowSize ?? 0) <= 65_535; i++) await new Promise((r) => setTimeout(r, 10));
  t.equal(session.state.remoteWindowSize, CONNECTION_WINDOW_BYTES, 'the connection window the client sees');
  // Each stream's window: STREAM_WINDOW_BYTES, for the one TranscribeStreams call that carries
  // every session's caller audio (docs/inference.md).
  for (let i = 0; i < 100 && session.remoteSettings.initialWindowSize !== STREAM_WINDOW_BYTES; i++) await new Promise((r) => setTimeout(r, 10));
  t.equal(session.remoteSettings.initialWindowSize, STREAM_WINDOW_BYTES, 'each stream may carry STREAM_WINDOW_BYTES before a window update');
});
