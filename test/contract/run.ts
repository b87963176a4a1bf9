// The contract kit from the command line:
//   npm run contract -- --backend host:port [--speech-model synthetic] [--exact] [--scripted]
// Exit code 0 when every check passes. With --native it starts the native backend
// (synthetic engine) on a free port and checks it with the strict options.
import { parseArgs } from 'node:util';
import { runKit, type KitOptions } from './kit.ts';

const { values } = parseArgs({
  options: {
    backend: { type: 'string' },
    'speech-model': { type: 'string' },
    exact: { type: 'boolean', default: false },
    scripted: { type: 'boolean', default: false },
    native: { type: 'boolean', default: false },
  },
});

let address = values.backend;
let stop: (() => Promise<void>) | null = null;
const opts: KitOptions = { speechModel: values['speech-model'], exactRoundTrip: values.exact, scriptedChat: values.scripted };
if (values.native) {
  const { startBackend } = await import('../../native/server.ts');
  const b = await startBackend({ address: '127.0.0.1:0', engine: 'synthetic' });
  address = b.address;
  stop = () => b.close();
  Object.assign(opts, { exactRoundTrip: true, scriptedChat: true });
}
if (!address) {
  process.stderr.write('usage: npm run contract -- --backend host:port [--speech-model NAME] [--exact] [--scripted] | --native\n');
  process.exit(2);
}
const results = await runKit(address, opts, (r) => process.stdout.write(`${r.ok ? 'ok  ' : 'FAIL'} ${r.name}${r.ok ? '' : `\n     ${r.error}`}\n`)).catch((err: Error) => {
  process.stderr.write(`cannot check ${address}: ${err.message}\n`);
  process.exit(1);
});
await stop?.();
const failed = results.filter((r) => !r.ok).length;
process.stdout.write(`${results.length - failed}/${results.length} checks passed against ${address}\n`);
process.exit(failed ? 1 : 0);
