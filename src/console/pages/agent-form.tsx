/** The sections of an agent's draft as form fields (the Agent page holds the state and saves). */
import { useState } from 'preact/hooks';
import { speech, type KnowledgeSource, type Tool, type Voice } from '../api.ts';
import type { ConfigEdit, ProfileEdit } from '../config-edit.ts';
import { BlobAudio, Checkbox, NumberField, Problem, Select, TextArea, TextField, useAction } from '../ui.tsx';

const LANGUAGES: [string, string][] = [['en', 'English'], ['ja', 'Japanese'], ['zh', 'Chinese'], ['ko', 'Korean'], ['es', 'Spanish'], ['fr', 'French'], ['de', 'German']];
const SUMMARY_LANGUAGES = ['en', 'zh', 'ja', 'ko', 'es', 'fr', 'de', 'pt', 'ru', 'ar'];
const OVERRIDES = ['first_message', 'system_prompt', 'voice_id', 'language'];

interface Props {
  edit: ConfigEdit;
  set: (path: string, value: unknown) => void;
  profile: ProfileEdit;
  setProfile: (p: ProfileEdit) => void;
  tools: Tool[];
  sources: KnowledgeSource[];
  voices: Voice[];
}

export function ProfileSection({ profile, setProfile }: Pick<Props, 'profile' | 'setProfile'>) {
  const upd = (k: keyof ProfileEdit, v: unknown) => setProfile({ ...profile, [k]: v });
  return (
    <fieldset>
      <legend>Profile</legend>
      <TextField label="Name" name="name" value={profile.name} onInput={(v) => upd('name', v)} />
      <TextArea label="Description" name="description" value={profile.description} onInput={(v) => upd('description', v)} rows={2} />
    </fieldset>
  );
}

export function PublicSection({ profile, setProfile }: Pick<Props, 'profile' | 'setProfile'>) {
  const upd = (k: keyof ProfileEdit, v: unknown) => setProfile({ ...profile, [k]: v });
  return (
    <fieldset>
      <legend>Public access</legend>
      <Checkbox label="Public: browsers may start sessions without an API key" name="public_enabled" checked={profile.public_enabled} onChange={(v) => upd('public_enabled', v)} />
      <TextArea
        label="Allowed origins" name="allowed_origins" rows={3} hint="One origin per line, such as https://shop.example.com"
        value={profile.allowed_origins.join('\n')} onInput={(v) => upd('allowed_origins', v.split('\n').map((s) => s.trim()).filter(Boolean))}
      />
      <p class="muted small" id="overrides-label">Overrides a session may set</p>
      <div role="group" aria-labelledby="overrides-label" class="grid2">
        {OVERRIDES.map((o) => (
          <Checkbox
            key={o} label={o} name={`overrides_allowed.${o}`} checked={profile.overrides_allowed.includes(o)}
            onChange={(v) => upd('overrides_allowed', v ? [...profile.overrides_allowed, o] : profile.overrides_allowed.filter((x) => x !== o))}
          />
        ))}
      </div>
    </fieldset>
  );
}

export function PromptSection({ edit, set }: Props) {
  const p = edit.prompt;
  return (
    <fieldset>
      <legend>Prompt</legend>
      <TextArea label="System prompt" name="prompt.system_prompt" rows={8} value={p.system_prompt} onInput={(v) => set('prompt.system_prompt', v)} hint="Variables: {{name}} from the session, {{system.today}} and the other system variables." />
      <Select label="First message mode" name="prompt.first_message_mode" value={p.first_message_mode} onChange={(v) => set('prompt.first_message_mode', v)}
        options={[['off', 'Off: wait for the caller'], ['fixed', 'Fixed: say the first message'], ['prompt', 'Prompt: the model writes it']]} />
      <TextArea label="First message" name="prompt.first_message" rows={2} value={p.first_message} onInput={(v) => set('prompt.first_message', v)} />
      <TextArea label="First message prompt" name="prompt.first_message_prompt" rows={2} value={p.first_message_prompt} onInput={(v) => set('prompt.first_message_prompt', v)} />
    </fieldset>
  );
}

export function VoiceSection({ edit, set, voices }: Props) {
  const v = edit.voice;
  const known = voices.some((x) => x._id === v.voice_id);
  const [sample, setSample] = useState<Blob | null>(null);
  const play = useAction(async () => setSample(await speech.sample(v.voice_id)));
  return (
    <fieldset>
      <legend>Voice and language</legend>
      <div class="inline-row">
        <Select
          label="Voice" name="voice.voice_id" value={v.voice_id} onChange={(x) => { setSample(null); set('voice.voice_id', x); }}
          options={[...(known ? [] : [[v.voice_id, 'Platform default voice'] as [string, string]]), ...voices.map((x) => [x._id, x.title] as [string, string])]}
          hint={voices.length === 0 ? 'Your voice library is empty: create voices on the Speech page.' : undefined}
        />
        <button type="button" disabled={!known || play.pending} onClick={() => play.run()}>Play voice sample</button>
      </div>
      <Problem error={play.error} />
      <BlobAudio blob={sample} label="Voice sample" autoPlay />
      <Select label="Language" name="voice.speaking_language" value={v.speaking_language} onChange={(x) => set('voice.speaking_language', x)} options={LANGUAGES} />
      <Checkbox label="Expressive speech" name="voice.expressive" checked={v.expressive} onChange={(x) => set('voice.expressive', x)} />
    </fieldset>
  );
}

export function ConversationSection({ edit, set }: Props) {
  const c = edit.conversation;
  const dest = c.transfer_destinations[0];
  return (
    <fieldset>
      <legend>Conversation and turns</legend>
      <div class="grid2">
        <NumberField label="Maximum duration (seconds)" name="conversation.max_duration_seconds" value={c.max_duration_seconds} onInput={(x) => set('conversation.max_duration_seconds', x)} min={60} max={3600} />
        <Select label="Eagerness" name="conversation.eagerness" value={c.eagerness} onChange={(x) => set('conversation.eagerness', x)} options={['relaxed', 'balanced', 'eager']} />
        <Select label="Interruption sensitivity" name="conversation.interruption_sensitivity" value={c.interruption_sensitivity} onChange={(x) => set('conversation.interruption_sensitivity', x)} options={['low', 'balanced', 'high']} />
        <TextField label="Time zone" name="conversation.timezone" value={c.timezone} onInput={(x) => set('conversation.timezone', x)} placeholder="Europe/Paris" hint="Empty: UTC" />
        <NumberField label="Hang up after silence (seconds)" name="conversation.hangup_after_seconds" value={c.hangup_after_seconds} onInput={(x) => set('conversation.hangup_after_seconds', x)} min={10} max={3600} />
      </div>
      <Checkbox label="The caller may interrupt the agent" name="conversation.interruptible" checked={c.interruptible} onChange={(x) => set('conversation.interruptible', x)} />
      <Checkbox label="Re-engage a silent caller" name="conversation.reengage_enabled" checked={c.reengage_enabled} onChange={(x) => set('conversation.reengage_enabled', x)} />
      <Checkbox label="Say goodbye before hanging up on silence" name="conversation.hangup_farewell_enabled" checked={c.hangup_farewell_enabled} onChange={(x) => set('conversation.hangup_farewell_enabled', x)} />
      <Checkbox label="Record audio" name="conversation.record_audio" checked={c.record_audio} onChange={(x) => set('conversation.record_audio', x)} />
      <h3>Call transfer</h3>
      <Checkbox label="Offer a transfer to a person" name="conversation.transfer_destinations" checked={!!dest}
        onChange={(x) => set('conversation.transfer_destinations', x ? [{ type: 'phone', label: '', phone_number: '', mode: 'cold', warm_connect: 'confirm' }] : [])} />
      {dest && (
        <div class="grid2">
          <TextField label="Transfer number" name="conversation.transfer_destinations.0.phone_number" value={dest.phone_number} onInput={(x) => set('conversation.transfer_destinations.0.phone_number', x)} placeholder="+14155550123" />
          <TextField label="Transfer label" name="conversation.transfer_destinations.0.label" value={dest.label} onInput={(x) => set('conversation.transfer_destinations.0.label', x)} />
          <Select label="Transfer mode" name="conversation.transfer_destinations.0.mode" value={dest.mode} onChange={(x) => set('conversation.transfer_destinations.0.mode', x)} options={['cold', 'warm']} />
          <Select label="Warm connect" name="conversation.transfer_destinations.0.warm_connect" value={dest.warm_connect} onChange={(x) => set('conversation.transfer_destinations.0.warm_connect', x)} options={['confirm', 'direct']} />
        </div>
      )}
      <h3>Outbound calls</h3>
      <Checkbox label="Custom outbound settings" name="conversation.outbound" checked={!!c.outbound}
        onChange={(x) => set('conversation.outbound', x ? { amd_enabled: true, voicemail: { action: 'hangup', message: '' } } : null)} />
      {c.outbound && (
        <>
          <Checkbox label="Detect answering machines" name="conversation.outbound.amd_enabled" checked={c.outbound.amd_enabled} onChange={(x) => set('conversation.outbound.amd_enabled', x)} />
          <Select label="On voicemail" name="conversation.outbound.voicemail.action" value={c.outbound.voicemail.action} onChange={(x) => set('conversation.outbound.voicemail.action', x)}
            options={[['hangup', 'Hang up'], ['leave_message', 'Leave the message'], ['leave_prompt_message', 'Leave a message the model writes']]} />
          <TextArea label="Voicemail message" name="conversation.outbound.voicemail.message" rows={2} value={c.outbound.voicemail.message} onInput={(x) => set('conversation.outbound.voicemail.message', x)} />
        </>
      )}
    </fieldset>
  );
}

export function ToolsSection({ edit, set, tools }: Props) {
  const t = edit.tools;
  return (
    <fieldset>
      <legend>Tools</legend>
      <Checkbox label="Tools enabled" name="tools.enabled" checked={t.enabled} onChange={(x) => set('tools.enabled', x)} />
      <Checkbox label="The agent may hang up (hang_up_call)" name="tools.system_tools.hang_up_call" checked={t.system_tools.hang_up_call} onChange={(x) => set('tools.system_tools.hang_up_call', x)} />
      <p class="muted small" id="tools-label">Workspace tools attached</p>
      {tools.length === 0 ? <p class="muted">No tools in this workspace yet: create them on the <a href="/tools">Tools</a> page.</p> : (
        <div role="group" aria-labelledby="tools-label" class="grid2">
          {tools.map((tool) => (
            <Checkbox key={tool.tool_id} label={tool.name} name={`tools.tool_ids.${tool.tool_id}`} checked={t.tool_ids.includes(tool.tool_id)}
              onChange={(x) => set('tools.tool_ids', x ? [...t.tool_ids, tool.tool_id] : t.tool_ids.filter((id) => id !== tool.tool_id))} />
          ))}
        </div>
      )}
    </fieldset>
  );
}

export function KnowledgeSection({ edit, set, sources }: Props) {
  const k = edit.knowledge_base;
  return (
    <fieldset>
      <legend>Knowledge</legend>
      <Checkbox label="Use knowledge sources in replies" name="knowledge_base.enabled" checked={k.enabled} onChange={(x) => set('knowledge_base.enabled', x)} />
      <p class="muted small" id="sources-label">Knowledge sources attached</p>
      {sources.length === 0 ? <p class="muted">No knowledge sources yet: upload them on the <a href="/knowledge">Knowledge</a> page.</p> : (
        <div role="group" aria-labelledby="sources-label" class="grid2">
          {sources.map((s) => (
            <Checkbox key={s.knowledge_source_id} label={s.name} name={`knowledge_base.knowledge_source_ids.${s.knowledge_source_id}`} checked={k.knowledge_source_ids.includes(s.knowledge_source_id)}
              onChange={(x) => set('knowledge_base.knowledge_source_ids', x ? [...k.knowledge_source_ids, s.knowledge_source_id] : k.knowledge_source_ids.filter((id) => id !== s.knowledge_source_id))} />
          ))}
        </div>
      )}
    </fieldset>
  );
}

export function WebhooksSection({ edit, set }: Props) {
  const w = edit.webhooks;
  return (
    <fieldset>
      <legend>Post-call webhooks</legend>
      <p class="muted small">Secrets are write-only: they are never shown again. Saving a changed list sends only the secrets typed here, so retype the secret of every endpoint that should keep one.</p>
      {w.post_call.map((e, i) => (
        <div class="list-item" key={i}>
          <TextField label={`Endpoint ${i + 1} URL`} name={`webhooks.post_call.${i}.url`} type="url" value={e.url} onInput={(x) => set(`webhooks.post_call.${i}.url`, x)} />
          <TextField label={`Endpoint ${i + 1} secret`} name={`webhooks.post_call.${i}.secret`} type="password" autoComplete="off" value={e.secret}
            onInput={(x) => set(`webhooks.post_call.${i}.secret`, x)} hint={e.had_secret ? 'Has a secret (hidden)' : 'No secret'} />
          <button type="button" onClick={() => set('webhooks.post_call', w.post_call.filter((_, j) => j !== i))}>Remove endpoint {i + 1}</button>
        </div>
      ))}
      {w.post_call.length < 5 && <button type="button" onClick={() => set('webhooks.post_call', [...w.post_call, { url: '', secret: '', had_secret: false }])}>Add endpoint</button>}
      <h3>Conversation start webhook</h3>
      <Checkbox label="Ask a webhook for variables when a phone call starts" name="webhooks.conversation_init" checked={!!w.conversation_init}
        onChange={(x) => set('webhooks.conversation_init', x ? { url: '', secret: '', has_secret: false, timeout_seconds: 5 } : null)} />
      {w.conversation_init && (
        <div class="grid2">
          <TextField label="Start webhook URL" name="webhooks.conversation_init.url" type="url" value={w.conversation_init.url} onInput={(x) => set('webhooks.conversation_init.url', x)} />
          <TextField label="Start webhook secret" name="webhooks.conversation_init.secret" type="password" autoComplete="off" value={w.conversation_init.secret}
            onInput={(x) => set('webhooks.conversation_init.secret', x)} hint={w.conversation_init.has_secret ? 'Has a secret (hidden); empty keeps it' : 'No secret'} />
          <NumberField label="Start webhook timeout (seconds)" name="webhooks.conversation_init.timeout_seconds" value={w.conversation_init.timeout_seconds} onInput={(x) => set('webhooks.conversation_init.timeout_seconds', x)} min={1} max={8} />
        </div>
      )}
    </fieldset>
  );
}

export function AnalysisSection({ edit, set }: Props) {
  const a = edit.analysis;
  return (
    <fieldset>
      <legend>Analysis</legend>
      <Checkbox label="Write a summary" name="analysis.summary.enabled" checked={a.summary.enabled} onChange={(x) => set('analysis.summary.enabled', x)} />
      <div class="grid2">
        <Select label="Summary language" name="analysis.summary.language" value={a.summary.language} onChange={(x) => set('analysis.summary.language', x)} options={SUMMARY_LANGUAGES} />
        <TextField label="Summary prompt" name="analysis.summary.prompt" value={a.summary.prompt ?? ''} onInput={(x) => set('analysis.summary.prompt', x === '' ? null : x)} />
      </div>
      <h3>Data fields</h3>
      {a.data_fields.map((f, i) => (
        <div class="list-item grid2" key={i}>
          <TextField label={`Field ${i + 1} name`} name={`analysis.data_fields.${i}.name`} value={f.name} onInput={(x) => set(`analysis.data_fields.${i}.name`, x)} />
          <Select label={`Field ${i + 1} type`} name={`analysis.data_fields.${i}.type`} value={f.type}
            onChange={(x) => set(`analysis.data_fields.${i}`, { ...f, type: x, enum_options: x === 'enum' ? (f.enum_options ?? []) : null })} options={['text', 'number', 'boolean', 'enum']} />
          <TextField label={`Field ${i + 1} description`} name={`analysis.data_fields.${i}.description`} value={f.description} onInput={(x) => set(`analysis.data_fields.${i}.description`, x)} />
          {f.type === 'enum' && (
            <TextField label={`Field ${i + 1} options`} name={`analysis.data_fields.${i}.enum_options`} value={(f.enum_options ?? []).join(', ')} hint="Comma-separated"
              onInput={(x) => set(`analysis.data_fields.${i}.enum_options`, x.split(',').map((s) => s.trim()).filter(Boolean))} />
          )}
          <div><button type="button" onClick={() => set('analysis.data_fields', a.data_fields.filter((_, j) => j !== i))}>Remove field {i + 1}</button></div>
        </div>
      ))}
      <button type="button" onClick={() => set('analysis.data_fields', [...a.data_fields, { name: '', type: 'text', description: '', enum_options: null }])}>Add data field</button>
      <h3>Criteria</h3>
      {a.criteria.map((c, i) => (
        <div class="list-item grid2" key={i}>
          <TextField label={`Criterion ${i + 1} name`} name={`analysis.criteria.${i}.name`} value={c.name} onInput={(x) => set(`analysis.criteria.${i}.name`, x)} />
          <TextField label={`Criterion ${i + 1} description`} name={`analysis.criteria.${i}.description`} value={c.description} onInput={(x) => set(`analysis.criteria.${i}.description`, x)} />
          <div><button type="button" onClick={() => set('analysis.criteria', a.criteria.filter((_, j) => j !== i))}>Remove criterion {i + 1}</button></div>
        </div>
      ))}
      <button type="button" onClick={() => set('analysis.criteria', [...a.criteria, { name: '', description: '' }])}>Add criterion</button>
    </fieldset>
  );
}

export function LlmSection({ edit, set }: Props) {
  const l = edit.llm;
  return (
    <fieldset>
      <legend>Language model</legend>
      <Select label="Model tier" name="llm.tier" value={l.tier} onChange={(x) => set('llm.tier', x)} options={['instant', 'medium', 'high']} />
      <Checkbox label="Focus: stay on the agent's topic" name="guardrails.focus" checked={edit.guardrails.focus} onChange={(x) => set('guardrails.focus', x)} />
      <Checkbox label="Resist manipulation" name="guardrails.manipulation" checked={edit.guardrails.manipulation} onChange={(x) => set('guardrails.manipulation', x)} />
      <Checkbox label="Use a custom LLM (OpenAI-compatible endpoint)" name="llm.custom" checked={!!l.custom}
        onChange={(x) => set('llm.custom', x ? { base_url: '', model: '', api_key: '', has_api_key: false } : null)} />
      {l.custom && (
        <div class="grid2">
          <TextField label="Base URL" name="llm.custom.base_url" type="url" value={l.custom.base_url} onInput={(x) => set('llm.custom.base_url', x)} placeholder="https://llm.example.com/v1" />
          <TextField label="Model" name="llm.custom.model" value={l.custom.model} onInput={(x) => set('llm.custom.model', x)} />
          <TextField label="LLM API key" name="llm.custom.api_key" type="password" autoComplete="off" value={l.custom.api_key} onInput={(x) => set('llm.custom.api_key', x)}
            hint={l.custom.has_api_key ? 'Set (hidden); empty keeps it' : 'Write-only'} />
        </div>
      )}
    </fieldset>
  );
}
