// Worker thread for the espeak engine: runs espeak-ng (WASM) synchronously, away from the
// gRPC event loop. Plain JavaScript so it loads in a worker without a TypeScript loader.
// Messages in: {id, text, voice, wpm, pitch?}; out: {id, wav, phonemeLines} or {id, error}.
import { parentPort } from 'node:worker_threads';
import fs from 'node:fs';
import ESpeakNg from 'espeak-ng';

const wasm = await WebAssembly.compile(fs.readFileSync(new URL('espeak-ng.wasm', import.meta.resolve('espeak-ng'))));

parentPort.on('message', async ({ id, text, voice, wpm, pitch }) => {
  const lines = [];
  try {
    const es = await ESpeakNg({
      arguments: ['-v', voice, '-s', String(wpm), ...(pitch === undefined ? [] : ['-p', String(pitch)]), '-x', '-w', '/out.wav', '-f', '/in.txt'],
      print: (s) => lines.push(s),
      printErr: () => {},
      preRun: [(m) => m.FS.writeFile('/in.txt', text)],
      instantiateWasm(imports, done) {
        WebAssembly.instantiate(wasm, imports).then((inst) => done(inst, wasm));
        return {};
      },
    });
    const wav = es.FS.readFile('/out.wav');
    parentPort.postMessage({ id, wav, phonemeLines: lines }, [wav.buffer]);
  } catch (err) {
    parentPort.postMessage({ id, error: String(err && err.message ? err.message : err) });
  }
});
parentPort.postMessage({ ready: true });
