/**
 * Speech: the synthesis playground (text, model, voice, format, prosody; play and download), the
 * voice library (create from uploaded samples, play, delete), transcription of an uploaded file
 * with word timings.
 */
import { useEffect, useState } from 'preact/hooks';
import { ApiError, speech, type Transcription, type Voice } from '../api.ts';
import { useTitle } from '../app.tsx';
import { BlobAudio, ConfirmButton, FileField, Form, NumberField, Problem, Select, TextArea, TextField, When, useAction, useLoad } from '../ui.tsx';

const MODELS: [string, string][] = [['s2.1-pro', 's2.1-pro'], ['s2.1-pro-free', 's2.1-pro-free (free)'], ['s2-pro', 's2-pro'], ['s1', 's1']];
const FORMATS: [string, string][] = [['mp3', 'MP3'], ['wav', 'WAV'], ['opus', 'Opus (Ogg)']];

export default function Speech() {
  useTitle('Speech');
  const voices = useLoad(() => speech.voices(true), []);
  return (
    <>
      <h1>Speech</h1>
      <Playground voices={voices.data ?? []} />
      <Library voices={voices.data} error={voices.error} onChanged={voices.reload} />
      <Transcribe />
    </>
  );
}

function Playground({ voices }: { voices: Voice[] }) {
  const [text, setText] = useState('Hello! This is the Parley speech playground.');
  const [model, setModel] = useState('s2.1-pro');
  const [voice, setVoice] = useState('');
  const [format, setFormat] = useState('mp3');
  const [speed, setSpeed] = useState(1);
  const [volume, setVolume] = useState(0);
  const [audio, setAudio] = useState<Blob | null>(null);
  const [url, setUrl] = useState<string | null>(null);
  useEffect(() => {
    if (!audio) return;
    const u = URL.createObjectURL(audio);
    setUrl(u);
    return () => URL.revokeObjectURL(u);
  }, [audio]);
  const speak = useAction(async () => {
    setAudio(null);
    setAudio(await speech.tts(model, { text, format, ...(voice ? { reference_id: voice } : {}), prosody: { speed, volume } }));
  });
  return (
    <section class="card" aria-labelledby="tts-h">
      <h2 id="tts-h">Synthesis</h2>
      <Form error={speak.error} onSubmit={() => speak.run()} label="Synthesize speech">
        <TextArea label="Text" name="text" rows={3} value={text} onInput={setText} />
        <div class="grid2">
          <Select label="Model" name="model" value={model} onChange={setModel} options={MODELS} />
          <Select label="Voice" name="reference_id" value={voice} onChange={setVoice} options={[['', 'The model\'s default voice'], ...voices.map((v) => [v._id, v.title] as [string, string])]} />
          <Select label="Format" name="format" value={format} onChange={setFormat} options={FORMATS} />
          <NumberField label="Speed" name="prosody.speed" value={speed} onInput={setSpeed} min={0.5} max={2} step={0.1} />
          <NumberField label="Volume (dB)" name="prosody.volume" value={volume} onInput={setVolume} min={-20} max={20} step={1} />
        </div>
        <button type="submit" class="primary" disabled={speak.pending}>Synthesize and play</button>
      </Form>
      {audio && url && (
        <div class="buttons">
          <BlobAudio blob={audio} label="Synthesized speech" autoPlay />
          <a class="button" href={url} download={`speech.${format === 'opus' ? 'ogg' : format}`}>Download</a>
        </div>
      )}
    </section>
  );
}

function Library({ voices, error, onChanged }: { voices: Voice[] | undefined; error: unknown; onChanged: () => void }) {
  const [title, setTitle] = useState('');
  const [files, setFiles] = useState<File[]>([]);
  const [transcript, setTranscript] = useState('');
  const [playing, setPlaying] = useState<{ id: string; blob: Blob } | null>(null);
  const create = useAction(async () => {
    if (files.length === 0) throw new ApiError(422, 'Choose at least one audio sample.', [{ type: 'missing', loc: ['body', 'voices'], msg: 'Choose one to twenty audio files of the voice (at least 1 s each)' }]);
    const form = new FormData();
    form.set('type', 'tts');
    form.set('train_mode', 'fast');
    form.set('title', title);
    for (const f of files) form.append('voices', f, f.name);
    if (transcript) for (const _ of files) form.append('texts', transcript);
    await speech.createVoice(form);
    setTitle('');
    setTranscript('');
    onChanged();
  });
  const play = useAction(async (id: string) => setPlaying({ id, blob: await speech.sample(id) }));
  const remove = useAction(async (id: string) => {
    await speech.removeVoice(id);
    onChanged();
  });
  return (
    <section aria-labelledby="lib-h">
      <h2 id="lib-h">Voice library</h2>
      <div class="card">
        <h3>Create a voice</h3>
        <Form error={create.error} onSubmit={() => create.run()} label="Create a voice">
          <TextField label="Voice name" name="title" value={title} onInput={setTitle} />
          <FileField label="Samples" name="voices" accept="audio/*" multiple onChange={setFiles} hint="One to twenty recordings of the voice, at least 1 s each" />
          <TextField label="What the samples say" name="texts" value={transcript} onInput={setTranscript} hint="Optional transcript (used for every sample)" />
          <button type="submit" class="primary" disabled={create.pending}>Create voice</button>
        </Form>
      </div>
      <Problem error={error ?? play.error ?? remove.error} />
      {voices && (voices.length === 0 ? <p>No voices yet.</p> : (
        <ul class="plain">
          {voices.map((v) => (
            <li class="card" key={v._id}>
              <h3>{v.title}</h3>
              <p class="muted small">{v.visibility}, {v.state}, created <When at={v.created_at} /></p>
              <div class="buttons">
                <button type="button" onClick={() => play.run(v._id)}>Play<span class="visually-hidden"> {v.title}</span></button>
                <ConfirmButton label="Delete" subject={v.title} question={`Delete the voice ${v.title}?`} confirmLabel="Delete" onConfirm={() => remove.run(v._id)} />
              </div>
              {playing?.id === v._id && <BlobAudio blob={playing.blob} label={`Sample of ${v.title}`} autoPlay />}
            </li>
          ))}
        </ul>
      ))}
    </section>
  );
}

function Transcribe() {
  const [file, setFile] = useState<File | null>(null);
  const [language, setLanguage] = useState('');
  const [result, setResult] = useState<Transcription | null>(null);
  const run = useAction(async () => {
    if (!file) throw new ApiError(422, 'Choose an audio file.', [{ type: 'missing', loc: ['body', 'audio'], msg: 'Choose an audio file to transcribe' }]);
    setResult(null);
    const form = new FormData();
    form.set('audio', file, file.name);
    form.set('ignore_timestamps', 'false');
    if (language) form.set('language', language);
    setResult(await speech.asr(form));
  });
  return (
    <section class="card" aria-labelledby="asr-h">
      <h2 id="asr-h">Transcription</h2>
      <Form error={run.error} onSubmit={() => run.run()} label="Transcribe a file">
        <FileField label="Audio file" name="audio" accept="audio/*" onChange={(f) => setFile(f[0] ?? null)} />
        <TextField label="Language" name="language" value={language} onInput={setLanguage} hint="Optional, such as en" />
        <button type="submit" class="primary" disabled={run.pending}>Transcribe</button>
      </Form>
      {result && (
        <>
          <p><strong>Text:</strong> <span aria-label="Transcribed text">{result.text}</span></p>
          <p class="muted small">{result.duration.toFixed(2)} s{result.language ? `, ${result.language}` : ''}</p>
          {result.words && result.words.length > 0 && (
            <div class="table-wrap" tabIndex={0}>
              <table>
                <caption>Word timings</caption>
                <thead><tr><th scope="col">Word</th><th scope="col" class="num">Start (s)</th><th scope="col" class="num">End (s)</th></tr></thead>
                <tbody>{result.words.map((w, i) => <tr key={i}><td>{w.text}</td><td class="num">{w.start.toFixed(2)}</td><td class="num">{w.end.toFixed(2)}</td></tr>)}</tbody>
              </table>
            </div>
          )}
        </>
      )}
    </section>
  );
}
