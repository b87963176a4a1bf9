// Worker thread of the synthetic engine: runs the modem's encoder and whole-recording
// decoder off the gRPC event loop. Jobs: {id, op: 'encode', text, sampleRateHz, speed}
// → {id, pcm, sampleRateHz, words, chars}; {id, op: 'decode', pcm, sampleRateHz} →
// {id, decoded: Decoded | null}.
import { parentPort } from 'node:worker_threads';
import { decodeAudio, encodeText } from './synthetic/modem.ts';

type Job = { id: number; op: 'encode'; text: string; sampleRateHz?: number; speed: number } | { id: number; op: 'decode'; pcm: Int16Array; sampleRateHz: number };

const port = parentPort!;
port.on('message', (job: Job) => {
  try {
    if (job.op === 'encode') {
      const e = encodeText(job.text, { sampleRateHz: job.sampleRateHz, speed: job.speed });
      port.postMessage({ id: job.id, pcm: e.pcm, sampleRateHz: e.sampleRateHz, words: e.words, chars: e.chars }, [e.pcm.buffer as ArrayBuffer]);
    } else {
      port.postMessage({ id: job.id, decoded: decodeAudio(job.pcm, job.sampleRateHz) });
    }
  } catch (err) {
    port.postMessage({ id: job.id, error: err instanceof Error ? err.message : String(err) });
  }
});
port.postMessage({ ready: true });
