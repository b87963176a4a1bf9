import t from 'tap';
import { createDefaultDraft } from '../../src/agent-config/index.ts';
import { buildPlan } from '../../src/sessions/runtime.ts';
import type { SessionRow } from '../../src/sessions/store.ts';

const row = (over: Partial<SessionRow> = {}): SessionRow => ({
  id: 'sess_1', team_id: 't', agent_id: 'a', agent_name: 'A', version_number: 1, config_hash: 'h', name: null, source: 'api_key',
  direction: 'inbound', status: 'pending', transport: 'websocket', expires_at: new Date(), max_duration_seconds: 600, overrides: {},
  dynamic_variables: {}, secret_variables: null, tool_events: true, end_user_id: null, metadata: {}, record_audio: true, timezone: 'Europe/Paris',
  client_timezone: null, world_context: true, price_per_minute_micros: 0n, charged_micros: 0n, caller_number: null, dialed_number: null,
  dial_status: null, answered_by: null, created_at: new Date('2026-03-01T10:00:00Z'), started_at: null, ended_at: null, ended_reason: null,
  node_id: null, metrics: null, token_hash: '', ...over,
});

t.test('prompts render dynamic and system variables; secret ones never', async (t) => {
  const c = createDefaultDraft();
  c.prompt.system_prompt = 'Help {{name}} on {{system.today}} ({{system.timezone}}, {{system.channel}}, {{system.language}}). {{secret__pin}} {{unknown}}';
  c.prompt.first_message_mode = 'fixed';
  c.prompt.first_message = 'Hi {{name}}!';
  const p = buildPlan(row({ dynamic_variables: { name: 'Ada', secret__pin: '1234' } }), c);
  t.equal(p.systemPrompt, 'Help Ada on 2026-03-01 (Europe/Paris, web_voice, en). {{secret__pin}} {{unknown}}');
  t.same(p.firstMessage, { mode: 'fixed', text: 'Hi Ada!' });
  t.equal(p.maxDurationMs, 600_000);
});

t.test('first message: overrides win over the configured mode', async (t) => {
  const c = createDefaultDraft();
  c.prompt.first_message_mode = 'off';
  t.same(buildPlan(row(), c).firstMessage, { mode: 'off' });
  t.same(buildPlan(row({ overrides: { first_message: 'Yo {{name}}' }, dynamic_variables: { name: 'Bo' } }), c).firstMessage, { mode: 'fixed', text: 'Yo Bo' });
  t.same(buildPlan(row({ overrides: { first_message_prompt: 'Greet.' } }), c).firstMessage, { mode: 'prompt', prompt: 'Greet.' });
  c.prompt.first_message_mode = 'prompt';
  t.same(buildPlan(row(), c).firstMessage, { mode: 'prompt', prompt: c.prompt.first_message_prompt });
});

t.test('language pinning, world context, system prompt override', async (t) => {
  const c = createDefaultDraft();
  c.voice.speaking_language = 'de';
  const p = buildPlan(row({ overrides: { language: 'fr', system_prompt: 'Only this.' } }), c);
  t.equal(p.language, 'fr');
  t.equal(p.systemPrompt, 'Only this.');
  const lines = p.context(Date.parse('2026-03-01T10:07:00Z'));
  t.same(lines, ['Always speak French (fr), whatever language the caller uses.', 'Current date: 2026-03-01. Time zone: Europe/Paris.', 'Current local time: 11:07 (Europe/Paris).']);
  t.same(buildPlan(row({ world_context: false }), c).context(0), ['Always speak German (de), whatever language the caller uses.']);
});

t.test('conversation settings map to timings and switches', async (t) => {
  const c = createDefaultDraft();
  c.conversation.eagerness = 'relaxed';
  c.conversation.interruption_sensitivity = 'low';
  c.conversation.interruptible = false;
  c.conversation.reengage_enabled = true;
  c.conversation.hangup_after_seconds = 60;
  c.conversation.hangup_farewell_enabled = true;
  c.tools.system_tools.hang_up_call = true;
  const p = buildPlan(row({ tool_events: false, overrides: { voice_id: 'v1' } }), c);
  t.match(p, { decideMs: 700, bargeInMs: 500, interruptible: false, hangUpTool: true, toolEvents: false, voiceId: 'v1' });
  t.same(p.reengage, { afterMs: 30_000, nudge: 'Are you still there?', farewell: 'It seems you have stepped away. Goodbye!' });
  c.conversation.eagerness = 'eager';
  c.conversation.interruption_sensitivity = 'high';
  c.conversation.reengage_enabled = false;
  t.match(buildPlan(row(), c), { decideMs: 0, bargeInMs: 0, reengage: null });
});
