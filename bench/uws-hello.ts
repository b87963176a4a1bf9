// A bare uWebSockets.js hello-world: the ceiling bench/http.ts compares Parley against.
import uws from 'uWebSockets.js';

const app = uws.App().get('/*', (res) => {
  res.cork(() => {
    res.writeHeader('Content-Type', 'application/json');
    res.end('{"status":"ok"}');
  });
});
app.listen('127.0.0.1', Number(process.env.PORT ?? 0), (token) => {
  if (!token) process.exit(1);
  process.stdout.write(`listening on http://127.0.0.1:${uws.us_socket_local_port(token)}\n`);
});
