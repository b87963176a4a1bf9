/**
 * Test call: a conversation with the agent's draft (a preview) or its published version, by
 * microphone (the SDK's browser audio: capture resampled to 16 kHz, the agent's audio played
 * with barge-in) or by typing; the agent's state, both sides' live transcript, tool events as they happen, each
 * turn's latency split, End call, and afterwards the call's record.
 */
import { useEffect, useRef, useState } from 'preact/hooks';
import { useRoute } from 'preact-iso';
import { browserMicrophone, browserSpeaker, start, type BrowserMicrophone, type BrowserSpeaker, type Conversation, type TurnMetrics } from '../../client/index.ts';
import { agents, sessions, type PreviewStatus, type TurnMetricsRow } from '../api.ts';
import { AnalysisView } from '../analysis-view.tsx';
import { useTitle } from '../app.tsx';
import { LatencyTable } from '../latency.tsx';
import { Checkbox, Loading, Problem, TextField, useAction, useLoad } from '../ui.tsx';
import { AgentNav } from '../agent-nav.tsx';

type Line =
  | { kind: 'say'; key: string; role: 'user' | 'agent'; text: string; final: boolean }
  | { kind: 'tool'; key: string; text: string };

interface Call {
  convo: Conversation;
  sessionId: string;
  preview: boolean;
  microphone?: BrowserMicrophone;
  speaker?: BrowserSpeaker;
}

/** The SDK's AudioWorklet module as the platform serves it (the console's bundle is elsewhere, under /assets/). */
const WORKLET_URL = '/sdk/parley-audio-worklet.js';

export default function TestCall() {
  const { params } = useRoute();
  const id = params.id!;
  const agent = useLoad(() => agents.get(id), [id]);
  useTitle(agent.data ? `Test call · ${agent.data.name}` : 'Test call');
  const [target, setTarget] = useState<'draft' | 'published'>('draft');
  const [call, setCall] = useState<Call | null>(null);
  const [state, setState] = useState('idle');
  const [lines, setLines] = useState<Line[]>([]);
  const [turns, setTurns] = useState<TurnMetricsRow[]>([]);
  const [ended, setEnded] = useState<{ reason: string; sessionId: string; preview: boolean } | null>(null);
  const [message, setMessage] = useState('');
  const [problem, setProblem] = useState<unknown>(null);
  const callRef = useRef<Call | null>(null);
  // Leaving the page ends a call in progress.
  useEffect(() => () => void callRef.current?.convo.hangup(), []);

  const [playedMs, setPlayedMs] = useState(0);
  const [muted, setMuted] = useState(false);
  // How much of the agent's audio was heard, while a call with audio is on.
  useEffect(() => {
    if (!call?.speaker) return;
    const timer = setInterval(() => setPlayedMs(call.speaker!.playedMs), 250);
    return () => clearInterval(timer);
  }, [call]);

  const begin = useAction(async (withMicrophone: boolean) => {
    // Created before the first await: browsers start audio (and ask for the microphone) only
    // within the click that asked for it.
    const microphone = withMicrophone ? browserMicrophone({ workletUrl: WORKLET_URL }) : undefined;
    const speaker = withMicrophone ? browserSpeaker({ workletUrl: WORKLET_URL }) : undefined;
    setPlayedMs(0);
    setMuted(false);
    setLines([]);
    setTurns([]);
    setEnded(null);
    setProblem(null);
    const preview = target === 'draft';
    let convo: Conversation;
    let session: Awaited<ReturnType<typeof sessions.create>>;
    try {
      session = preview ? await agents.preview(id) : await sessions.create(id);
      convo = await start(session, { microphone, speaker });
    } catch (err) {
      speaker?.close();
      throw err;
    }
    const c: Call = { convo, sessionId: session.session_id, preview, microphone, speaker };
    callRef.current = c;
    setCall(c);
    setState(convo.state);
    convo.on('state', setState);
    convo.on('transcript', (tr) => setLines((ls) => {
      const key = `${tr.role}:${tr.segmentId}`;
      const line: Line = { kind: 'say', key, role: tr.role, text: tr.text, final: tr.final };
      const i = ls.findIndex((l) => l.key === key);
      return i < 0 ? [...ls, line] : ls.map((l, j) => (j === i ? line : l));
    }));
    const tool = (what: string) => (e: { callId: string; toolName: string; input?: string; output?: string; error?: string }) =>
      setLines((ls) => [...ls, { kind: 'tool', key: `tool:${e.callId}:${what}`, text: `Tool ${e.toolName} ${what}${e.input ? ` with ${e.input}` : ''}${e.output ? `: ${e.output}` : ''}${e.error ? `: ${e.error}` : ''}` }]);
    convo.on('toolCallStarted', tool('started'));
    convo.on('toolCallCompleted', tool('completed'));
    convo.on('toolCallFailed', tool('failed'));
    convo.on('turnMetrics', (m: TurnMetrics) => setTurns((ts) => [...ts, {
      turn_id: m.turnId, recognition_ms: m.recognitionMs, decide_ms: m.decideMs, model_ms: m.modelMs, synthesis_ms: m.synthesisMs, total_ms: m.totalMs, platform_ms: m.platformMs,
    }]));
    convo.on('error', (e) => setProblem(new Error(`The agent reported an error (${e.code}); the call goes on.`)));
    void convo.ended.then((e) => {
      callRef.current = null;
      setCall(null);
      setState('ended');
      setEnded({ reason: e.reason, sessionId: c.sessionId, preview });
    });
  });

  const send = () => {
    const text = message.trim();
    if (!call || !text) return;
    call.convo.sendUserMessage(text);
    // Typed turns are not echoed by the platform: the transcript shows them as sent.
    setLines((ls) => [...ls, { kind: 'say', key: `typed:${ls.length}`, role: 'user', text, final: true }]);
    setMessage('');
  };

  if (agent.error) return <Problem error={agent.error} />;
  if (!agent.data) return <Loading />;
  const published = agent.data.publication_state === 'live';
  return (
    <>
      <h1>Test call: {agent.data.name}</h1>
      <AgentNav id={id} current="test" />
      {!call && (
        <section class="card" aria-labelledby="start-h">
          <h2 id="start-h">Start a call</h2>
          <fieldset>
            <legend>Talk to</legend>
            <div class="field check">
              <input type="radio" id="target-draft" name="target" checked={target === 'draft'} onChange={() => setTarget('draft')} />
              <label for="target-draft">The draft (preview: not kept in Sessions)</label>
            </div>
            <div class="field check">
              <input type="radio" id="target-published" name="target" checked={target === 'published'} disabled={!published} onChange={() => setTarget('published')} />
              <label for="target-published">The published version{published ? '' : ' (publish first)'}</label>
            </div>
          </fieldset>
          <div class="buttons">
            <button type="button" class="primary" disabled={begin.pending} onClick={() => begin.run(true)}>Start call with microphone</button>
            <button type="button" disabled={begin.pending} onClick={() => begin.run(false)}>Start call by typing</button>
          </div>
          <p class="muted small">With the microphone the browser asks for permission, and you hear the agent; by typing, you read its replies.</p>
          <Problem error={begin.error} />
        </section>
      )}
      {(call || ended) && (
        <div class="call">
          <section aria-labelledby="conv-h">
            <h2 id="conv-h">Conversation</h2>
            <p>Agent: <span class="state" role="status" aria-live="polite">{state}</span></p>
            {call?.microphone && (
              <div class="buttons">
                <Checkbox label="Mute microphone" name="muted" checked={muted} onChange={(v) => { call.microphone!.muted = v; setMuted(v); }} />
                <span class="muted small" aria-label="Agent audio heard">Heard {(playedMs / 1000).toFixed(1)} s of the agent</span>
              </div>
            )}
            <ol class="transcript" aria-label="Transcript" aria-live="polite" tabIndex={0}>
              {lines.map((l) => (l.kind === 'tool'
                ? <li key={l.key} class="tool">{l.text}</li>
                : <li key={l.key} class={l.final ? '' : 'interim'}><span class="speaker">{l.role === 'user' ? 'You' : 'Agent'}:</span>{l.text}</li>))}
            </ol>
            {call && (
              <form class="inline" aria-label="Type to the agent" onSubmit={(e) => { e.preventDefault(); send(); }}>
                <TextField label="Message" name="message" value={message} onInput={(v) => { setMessage(v); call.convo.sendActivity(); }} autoComplete="off" />
                <button type="submit" class="primary">Send</button>
                <button type="button" class="danger" onClick={() => void call.convo.hangup()}>End call</button>
              </form>
            )}
            <Problem error={problem} />
          </section>
          <section aria-labelledby="lat-h">
            <h2 id="lat-h">Latency</h2>
            {turns.length === 0 ? <p class="muted">Each turn's split appears as the agent starts answering.</p> : <LatencyTable turns={turns} caption="Per turn, as it happened" />}
          </section>
        </div>
      )}
      {ended && <AfterCall agentId={id} ended={ended} />}
    </>
  );
}

function AfterCall({ agentId, ended }: { agentId: string; ended: { reason: string; sessionId: string; preview: boolean } }) {
  const [status, setStatus] = useState<PreviewStatus | null>(null);
  // A preview keeps no record in Sessions: its analysis is read from the preview itself, once settled.
  useEffect(() => {
    if (!ended.preview) return;
    let stop = false;
    const poll = async () => {
      for (let i = 0; i < 30 && !stop; i++) {
        const s = await agents.previewStatus(agentId, ended.sessionId).catch(() => null);
        if (s) setStatus(s);
        if (s && s.analysis_status !== 'queued' && s.analysis_status !== 'running') return;
        await new Promise((r) => setTimeout(r, 1000));
      }
    };
    void poll();
    return () => { stop = true; };
  }, [ended.sessionId]);
  return (
    <section class="card" aria-labelledby="after-h">
      <h2 id="after-h">Call ended</h2>
      <p>The call ended: {ended.reason.replace(/_/g, ' ')}.</p>
      {ended.preview ? (
        <>
          <p>Preview calls are not kept in Sessions; their analysis is shown here once it is ready.</p>
          {status?.analysis ? <AnalysisView analysis={status.analysis} /> : status && <p class="muted">Analysis: {status.analysis_status ?? 'none (nothing was said)'}</p>}
        </>
      ) : (
        <p><a href={`/sessions/${ended.sessionId}`}>Open the call's record</a></p>
      )}
    </section>
  );
}
