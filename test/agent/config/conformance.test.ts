/**
 * Service-level conformance suite for the agent draft configuration: every row of the spec's
 * field tables (default present on read; each write constraint's boundary accepted and one
 * step past it rejected with the right `loc`), every PATCH rule by number, the null rules,
 * unknown fields at every level, the content hash, and secret handling.
 */
import t, { type Test } from 'tap';
import { randomBytes } from 'node:crypto';
import { ServiceError, type FieldError } from '../../../src/errors.ts';
import { createSecretBox } from '../../../src/crypto/secrets.ts';
import {
  applyPatch,
  configHash,
  configReadSchema,
  countPromptTokens,
  createDefaultDraft,
  DEFAULT_VOICE_ID,
  parseConfigPatch,
  patchDraft,
  SPEAKING_LANGUAGES,
  SUMMARY_LANGUAGES,
  SYSTEM_VARIABLES,
  toReadShape,
  validateReferences,
  type ConfigRead,
  type StoredDraft,
} from '../../../src/agent-config/index.ts';

const box = createSecretBox(randomBytes(32));
const TOOLS = new Set(['tool_a', 'tool_b', 'tool_c']);
const SOURCES = new Set(['ks_a', 'ks_b', 'ks_c']);
const resolve = {
  toolIds: async (ids: string[]) => new Set(ids.filter((id) => TOOLS.has(id))),
  knowledgeSourceIds: async (ids: string[]) => new Set(ids.filter((id) => SOURCES.has(id))),
};
const deps = { box, resolve };
const AGENT = 'agent_test';
const NOW = '2026-11-25T12:00:00.000Z';

type Path = (string | number)[];
const str = (n: number, c = 'x') => c.repeat(n);

function at(path: Path, value: unknown): Record<string, unknown> {
  return path.reduceRight<unknown>((acc, key) => ({ [key]: acc }), value) as Record<string, unknown>;
}
function get(obj: unknown, path: Path): unknown {
  return path.reduce<unknown>((o, k) => (o as Record<string | number, unknown>)?.[k], obj);
}

/** The read shape, checked against the documented response schema every time. */
function read(draft: StoredDraft): ConfigRead {
  const shape = toReadShape(AGENT, draft, configHash(draft), NOW);
  const checked = configReadSchema.safeParse(shape);
  if (!checked.success) throw new Error(`read shape violates configReadSchema: ${JSON.stringify(checked.error.issues)}`);
  return shape;
}

async function ok(body: unknown, stored: StoredDraft = createDefaultDraft()) {
  const before = structuredClone(stored);
  const r = await patchDraft(stored, body, deps);
  if (JSON.stringify(before) !== JSON.stringify(stored)) throw new Error('a successful patch mutated its input');
  return { ...r, read: read(r.draft) };
}

/** Runs a PATCH that must fail with 422; checks the input draft is untouched; returns the field errors. */
async function fail(t: Test, body: unknown, stored: StoredDraft = createDefaultDraft()): Promise<FieldError[]> {
  const before = structuredClone(stored);
  const hashBefore = configHash(stored);
  let err: unknown;
  try {
    await patchDraft(stored, body, deps);
  } catch (e) {
    err = e;
  }
  if (!(err instanceof ServiceError)) {
    t.fail(`expected a 422 ServiceError, got ${err === undefined ? 'success' : String(err)}`);
    return [];
  }
  t.equal(err.status, 422, 'status 422');
  t.same(stored, before, 'the draft is left unchanged');
  t.equal(configHash(stored), hashBefore, 'and so is its hash');
  return err.fields ?? [];
}

async function rejects(t: Test, body: unknown, loc: Path, opts: { type?: string; msg?: RegExp; stored?: StoredDraft } = {}) {
  const fields = await fail(t, body, opts.stored);
  const hit = fields.find((f) => JSON.stringify(f.loc) === JSON.stringify(loc));
  if (!t.ok(hit, `422 at ${JSON.stringify(loc)}`)) t.comment(`got: ${JSON.stringify(fields)}`);
  if (hit && opts.type) t.equal(hit.type, opts.type);
  if (hit && opts.msg) t.match(hit.msg, opts.msg);
  return fields;
}

// ---------------------------------------------------------------------------------------------
// Field tables: scalar rows

interface Row {
  path: Path;
  def: unknown;
  accept: unknown[];
  reject: (unknown | { bad: unknown; type?: string; msg?: RegExp })[];
}
const bad = (value: unknown, type?: string, msg?: RegExp) => ({ bad: value, type, msg });
const isBad = (r: unknown): r is { bad: unknown; type?: string; msg?: RegExp } => typeof r === 'object' && r !== null && 'bad' in r;
const bool = (path: Path, def: boolean): Row => ({ path, def, accept: [true, false], reject: [bad('true', 'boolean_type'), bad(1, 'boolean_type')] });
const en = (path: Path, def: string, values: readonly string[], wrong: string): Row => ({ path, def, accept: [...values], reject: [bad(wrong, 'enum'), bad('', 'enum')] });

const ROWS: Row[] = [
  // prompt
  {
    path: ['prompt', 'system_prompt'],
    def: '',
    accept: ['', ' a'.repeat(4000), str(100_000, ' ')],
    reject: [bad(' a'.repeat(4001), 'value_error', /^Value error, system_prompt exceeds 4000 tokens \(got 4001\)$/), bad(str(100_001, ' '), 'too_big_string'), bad(5, 'string_type')],
  },
  en(['prompt', 'first_message_mode'], 'prompt', ['off', 'fixed', 'prompt'], 'always'),
  { path: ['prompt', 'first_message'], def: 'Hi! Thanks for calling — how can I help you today?', accept: ['', str(10_000)], reject: [bad(str(10_001), 'too_big_string')] },
  { path: ['prompt', 'first_message_prompt'], def: 'Greet the caller and ask what you can help with.', accept: ['', str(10_000)], reject: [bad(str(10_001), 'too_big_string')] },
  // voice
  { path: ['voice', 'voice_id'], def: DEFAULT_VOICE_ID, accept: [str(256, 'v'), 'v', 'f0e1d2c3b4a5968778695a4b3c2d1e0f'], reject: [bad(str(257, 'v'), 'too_big_string'), bad('', 'too_small_string')] },
  en(['voice', 'speaking_language'], 'en', SPEAKING_LANGUAGES, 'pt'),
  bool(['voice', 'expressive'], false),
  // conversation
  { path: ['conversation', 'max_duration_seconds'], def: 1800, accept: [60, 3600, 1800], reject: [bad(59, 'too_small_number'), bad(3601, 'too_big_number'), bad(60.5, 'int_type'), bad('60', 'number_type')] },
  en(['conversation', 'eagerness'], 'balanced', ['relaxed', 'balanced', 'eager'], 'hasty'),
  bool(['conversation', 'interruptible'], true),
  en(['conversation', 'interruption_sensitivity'], 'balanced', ['low', 'balanced', 'high'], 'medium'),
  bool(['conversation', 'reengage_enabled'], false),
  bool(['conversation', 'record_audio'], true),
  {
    // The 64-character boundary cannot be accepted with a real zone (the longest IANA name is far shorter).
    path: ['conversation', 'timezone'],
    def: '',
    accept: ['', 'UTC', 'Asia/Tokyo', 'America/Argentina/Buenos_Aires', 'US/Eastern'],
    reject: [bad(str(65, 'A'), 'too_big_string'), bad('Mars/Olympus_Mons', 'timezone'), bad('+05:00', 'timezone'), bad('utc ', 'timezone')],
  },
  { path: ['conversation', 'hangup_after_seconds'], def: 60, accept: [10, 3600], reject: [bad(9, 'too_small_number'), bad(3601, 'too_big_number'), bad(10.5, 'int_type')] },
  bool(['conversation', 'hangup_farewell_enabled'], false),
  // tools
  bool(['tools', 'enabled'], true),
  bool(['tools', 'system_tools', 'hang_up_call'], false),
  // knowledge_base
  bool(['knowledge_base', 'enabled'], false),
  // analysis.summary (rule 9 makes the other members default; checked separately)
  bool(['analysis', 'summary', 'enabled'], true),
  { path: ['analysis', 'summary', 'prompt'], def: null, accept: ['', str(1000), null], reject: [bad(str(1001), 'too_big_string')] },
  en(['analysis', 'summary', 'language'], 'en', SUMMARY_LANGUAGES, 'it'),
  // guardrails
  bool(['guardrails', 'focus'], false),
  bool(['guardrails', 'manipulation'], false),
  // llm (extension)
  en(['llm', 'tier'], 'medium', ['instant', 'medium', 'high'], 'low'),
];

t.test('field tables: every scalar row', async (t) => {
  t.equal(countPromptTokens(' a'.repeat(4000)), 4000, 'precondition: the 4,000-token boundary text');
  t.ok(countPromptTokens(str(100_000, ' ')) <= 4000, 'precondition: the 100,000-character text is under the token cap');
  const defaults = read(createDefaultDraft());
  for (const row of ROWS) {
    const name = row.path.join('.');
    await t.test(name, async (t) => {
      t.same(get(defaults, row.path), row.def, `default ${JSON.stringify(row.def)?.slice(0, 60)} is present on read`);
      for (const value of row.accept) {
        const { read: r } = await ok(at(row.path, value));
        t.same(get(r, row.path), value, `accepts ${JSON.stringify(value)?.slice(0, 40)}${typeof value === 'string' && value.length > 40 ? ` (${value.length} chars)` : ''}`);
      }
      for (const entry of row.reject) {
        const { bad: value, type, msg } = isBad(entry) ? entry : { bad: entry, type: undefined, msg: undefined };
        await rejects(t, at(row.path, value), ['body', ...row.path], { type, msg });
      }
      if (row.def !== null) await rejects(t, at(row.path, null), ['body', ...row.path], { type: 'null_forbidden' });
    });
  }
});

t.test('field tables: list and object defaults are present on read', async (t) => {
  const r = read(createDefaultDraft());
  t.same(r.conversation.transfer_destinations, []);
  t.equal(r.conversation.outbound, null);
  t.same(r.tools.tool_ids, []);
  t.same(r.webhooks.post_call, []);
  t.equal(r.webhooks.conversation_init, null);
  t.same(r.knowledge_base.knowledge_source_ids, []);
  t.same(r.analysis.summary, { enabled: true, prompt: null, language: 'en' });
  t.same(r.analysis.data_fields, []);
  t.same(r.analysis.criteria, []);
  t.same(r.llm, { tier: 'medium', custom: null });
  t.match(DEFAULT_VOICE_ID, /^[0-9a-f]{32}$/, 'the default voice id is 32 hex characters');
  t.same(Object.keys(r), ['agent_id', 'config_hash', 'prompt', 'voice', 'conversation', 'tools', 'webhooks', 'knowledge_base', 'analysis', 'guardrails', 'llm', 'updated_at'], 'every top-level field is present');
  t.equal(r.agent_id, AGENT);
  t.match(r.config_hash, /^[0-9a-f]{64}$/);
  t.equal(r.updated_at, NOW);
});

t.test('field tables: transfer destination', async (t) => {
  const p = ['conversation', 'transfer_destinations'];
  const { read: r } = await ok(at(p, [{ phone_number: '+14155550123' }]));
  t.same(r.conversation.transfer_destinations, [{ type: 'phone', label: '', phone_number: '+14155550123', mode: 'cold', warm_connect: 'confirm' }], 'defaults of every member');
  const full = { type: 'phone', label: str(64, 'l'), phone_number: '+81312345678', mode: 'warm', warm_connect: 'direct' };
  t.same((await ok(at(p, [full]))).read.conversation.transfer_destinations, [full], 'label of 64 characters and every member accepted');
  t.same((await ok(at(p, []))).read.conversation.transfer_destinations, []);
  await rejects(t, at(p, [{ phone_number: '+14155550123' }, { phone_number: '+14155550124' }]), ['body', ...p], { type: 'too_big_array' });
  await rejects(t, at(p, [{ ...full, label: str(65, 'l') }]), ['body', ...p, 0, 'label'], { type: 'too_big_string' });
  await rejects(t, at(p, [{ label: 'x' }]), ['body', ...p, 0, 'phone_number'], { type: 'missing' });
  await rejects(t, at(p, [{ phone_number: '4155550123' }]), ['body', ...p, 0, 'phone_number'], { type: 'string_pattern_mismatch' });
  await rejects(t, at(p, [{ phone_number: '+14155550123', type: 'sip' }]), ['body', ...p, 0, 'type']);
  await rejects(t, at(p, [{ phone_number: '+14155550123', mode: 'hot' }]), ['body', ...p, 0, 'mode'], { type: 'enum' });
  await rejects(t, at(p, [{ phone_number: '+14155550123', warm_connect: 'later' }]), ['body', ...p, 0, 'warm_connect'], { type: 'enum' });
  for (const k of ['label', 'mode', 'warm_connect', 'type', 'phone_number']) {
    await rejects(t, at(p, [{ ...full, [k]: null }]), ['body', ...p, 0, k], { type: 'null_forbidden' });
  }
  await rejects(t, at(p, null), ['body', ...p], { type: 'null_forbidden' });
});

t.test('field tables: tools.tool_ids and knowledge_base.knowledge_source_ids', async (t) => {
  t.same((await ok({ tools: { tool_ids: ['tool_a', 'tool_b'] } })).read.tools.tool_ids, ['tool_a', 'tool_b']);
  t.same((await ok({ knowledge_base: { knowledge_source_ids: ['ks_c'] } })).read.knowledge_base.knowledge_source_ids, ['ks_c']);
  await rejects(t, { tools: { tool_ids: ['tool_a', 'tool_a'] } }, ['body', 'tools', 'tool_ids', 1], { type: 'duplicate' });
  await rejects(t, { tools: { tool_ids: [''] } }, ['body', 'tools', 'tool_ids', 0], { type: 'too_small_string' });
  await rejects(t, { tools: { tool_ids: [null] } }, ['body', 'tools', 'tool_ids', 0], { type: 'null_forbidden' });
  await rejects(t, { tools: { tool_ids: null } }, ['body', 'tools', 'tool_ids'], { type: 'null_forbidden' });
  await rejects(t, { tools: { system_tools: null } }, ['body', 'tools', 'system_tools'], { type: 'null_forbidden' });
  await rejects(t, { knowledge_base: { knowledge_source_ids: null } }, ['body', 'knowledge_base', 'knowledge_source_ids'], { type: 'null_forbidden' });
  const many = Array.from({ length: 101 }, (_, i) => `ks_${i}`);
  await rejects(t, { knowledge_base: { knowledge_source_ids: many } }, ['body', 'knowledge_base', 'knowledge_source_ids'], { type: 'too_big_array' });
});

t.test('field tables: webhooks.post_call write and read shapes', async (t) => {
  const p = ['webhooks', 'post_call'];
  const five = Array.from({ length: 5 }, (_, i) => ({ url: `https://hooks${i}.example.com/in`, ...(i % 2 ? { secret: `s${i}` } : {}) }));
  const { read: r } = await ok(at(p, five));
  t.same(r.webhooks.post_call, five.map((e, i) => ({ url: e.url, has_secret: i % 2 === 1 })), 'five endpoints; read shape {url, has_secret}');
  await rejects(t, at(p, [...five, { url: 'https://hooks5.example.com/in' }]), ['body', ...p], { type: 'too_big_array' });
  const longUrl = `https://example.com/${str(4000 - 'https://example.com/'.length, 'p')}`;
  t.equal(longUrl.length, 4000);
  t.same((await ok(at(p, [{ url: longUrl }]))).read.webhooks.post_call, [{ url: longUrl, has_secret: false }], 'url of 4,000 characters');
  await rejects(t, at(p, [{ url: longUrl + 'p' }]), ['body', ...p, 0, 'url'], { type: 'too_big_string' });
  await rejects(t, at(p, [{ url: '' }]), ['body', ...p, 0, 'url'], { type: 'too_small_string' });
  t.same((await ok(at(p, [{ url: 'https://a.example.com', secret: str(256, 's') }]))).read.webhooks.post_call, [{ url: 'https://a.example.com', has_secret: true }], 'secret of 256');
  await rejects(t, at(p, [{ url: 'https://a.example.com', secret: str(257, 's') }]), ['body', ...p, 0, 'secret'], { type: 'too_big_string' });
  t.same((await ok(at(p, [{ url: 'https://a.example.com', secret: '' }]))).read.webhooks.post_call, [{ url: 'https://a.example.com', has_secret: false }], 'an empty secret is no secret');
  await rejects(t, at(p, [{ secret: 'x' }]), ['body', ...p, 0, 'url'], { type: 'missing' });
  await rejects(t, at(p, [{ url: 'https://a.example.com', secret: null }]), ['body', ...p, 0, 'secret'], { type: 'null_forbidden' });
  await rejects(t, at(p, [{ url: null }]), ['body', ...p, 0, 'url'], { type: 'null_forbidden' });
  await rejects(t, at(p, 'https://a.example.com'), ['body', ...p]);
  // the SSRF rules of the URL check
  for (const url of ['http://127.0.0.1/hook', 'http://localhost:8080/x', 'http://169.254.169.254/latest', 'http://10.0.0.5/', 'http://[::1]/', 'ftp://example.com/x', 'https://user:pw@example.com/', 'not a url']) {
    await rejects(t, at(p, [{ url }]), ['body', ...p, 0, 'url'], { type: 'url' });
  }
  await rejects(t, at(p, { url: 'http://0x7f000001/' }), ['body', ...p, 'url'], { type: 'url' });
});

t.test('field tables: webhooks.conversation_init (extension)', async (t) => {
  const p = ['webhooks', 'conversation_init'];
  const { draft, read: r } = await ok(at(p, { url: 'https://init.example.com/hook' }));
  t.same(r.webhooks.conversation_init, { url: 'https://init.example.com/hook', has_secret: false, timeout_seconds: 5 }, 'read shape with default timeout 5');
  for (const timeout of [1, 8, 2.5]) {
    t.equal((await ok(at(p, { timeout_seconds: timeout }), draft)).read.webhooks.conversation_init?.timeout_seconds, timeout, `timeout ${timeout} accepted`);
  }
  await rejects(t, at(p, { timeout_seconds: 0.9 }), ['body', ...p, 'timeout_seconds'], { type: 'too_small_number', stored: draft });
  await rejects(t, at(p, { timeout_seconds: 8.1 }), ['body', ...p, 'timeout_seconds'], { type: 'too_big_number', stored: draft });
  const withSecret = await ok(at(p, { secret: str(256, 's') }), draft);
  t.same(withSecret.read.webhooks.conversation_init, { url: 'https://init.example.com/hook', has_secret: true, timeout_seconds: 5 }, 'secret of 256 merged in; url kept');
  await rejects(t, at(p, { secret: str(257, 's') }), ['body', ...p, 'secret'], { type: 'too_big_string', stored: draft });
  t.equal((await ok(at(p, { timeout_seconds: 3 }), withSecret.draft)).read.webhooks.conversation_init?.has_secret, true, 'omitted secret keeps the stored one');
  t.equal((await ok(at(p, { secret: '' }), withSecret.draft)).read.webhooks.conversation_init?.has_secret, false, 'an empty secret clears it');
  await rejects(t, at(p, { secret: 'x' }), ['body', ...p, 'url'], { type: 'missing' });
  await rejects(t, at(p, { url: 'http://192.168.1.1/' }), ['body', ...p, 'url'], { type: 'url' });
  await rejects(t, at(p, { url: '' }), ['body', ...p, 'url'], { type: 'too_small_string' });
  await rejects(t, at(p, { url: `https://example.com/${str(3981, 'p')}` }), ['body', ...p, 'url'], { type: 'too_big_string' });
  for (const k of ['url', 'secret', 'timeout_seconds']) await rejects(t, at(p, { [k]: null }), ['body', ...p, k], { type: 'null_forbidden', stored: draft });
});

t.test('field tables: conversation.outbound (extension)', async (t) => {
  const p = ['conversation', 'outbound'];
  t.same((await ok(at(p, {}))).read.conversation.outbound, { amd_enabled: true, voicemail: { action: 'hangup', message: '' } }, 'a first object takes the defaults');
  const set = await ok(at(p, { amd_enabled: false, voicemail: { action: 'leave_message', message: str(10_000, 'm') } }));
  t.same(set.read.conversation.outbound, { amd_enabled: false, voicemail: { action: 'leave_message', message: str(10_000, 'm') } }, 'message of 10,000');
  t.same((await ok(at(p, { voicemail: { action: 'leave_prompt_message' } }), set.draft)).read.conversation.outbound, { amd_enabled: false, voicemail: { action: 'leave_prompt_message', message: str(10_000, 'm') } }, 'deep merge');
  await rejects(t, at(p, { voicemail: { message: str(10_001, 'm') } }), ['body', ...p, 'voicemail', 'message'], { type: 'too_big_string' });
  await rejects(t, at(p, { voicemail: { action: 'beep' } }), ['body', ...p, 'voicemail', 'action'], { type: 'enum' });
  await rejects(t, at(p, { voicemail: { message: 'Hi {{system.nope}}' } }), ['body', ...p, 'voicemail', 'message'], { type: 'unknown_system_variable' });
  t.equal((await ok(at(p, { voicemail: { message: 'Call {{system.dialed_number}} back' } }))).read.conversation.outbound?.voicemail.message, 'Call {{system.dialed_number}} back');
  for (const k of ['amd_enabled', 'voicemail']) await rejects(t, at(p, { [k]: null }), ['body', ...p, k], { type: 'null_forbidden' });
  await rejects(t, at(p, { voicemail: { action: null } }), ['body', ...p, 'voicemail', 'action'], { type: 'null_forbidden' });
});

t.test('field tables: analysis.data_fields', async (t) => {
  const p = ['analysis', 'data_fields'];
  const { read: r } = await ok(at(p, [{ name: 'a' }]));
  t.same(r.analysis.data_fields, [{ name: 'a', type: 'text', description: '', enum_options: null }], 'defaults of every member');
  const twenty = Array.from({ length: 20 }, (_, i) => ({ name: `f${i}` }));
  t.equal((await ok(at(p, twenty))).read.analysis.data_fields.length, 20, '20 entries');
  await rejects(t, at(p, [...twenty, { name: 'f20' }]), ['body', ...p], { type: 'too_big_array' });
  const longName = 'a' + str(63, 'b');
  t.equal((await ok(at(p, [{ name: longName }]))).read.analysis.data_fields[0].name, longName, 'name of 64 characters');
  for (const name of ['a' + str(64, 'b'), 'A', '1a', '_a', 'a-b', '']) {
    await rejects(t, at(p, [{ name }]), ['body', ...p, 0, 'name'], { type: 'string_pattern_mismatch' });
  }
  await rejects(t, at(p, [{ description: 'x' }]), ['body', ...p, 0, 'name'], { type: 'missing' });
  await rejects(t, at(p, [{ name: 'a' }, { name: 'a' }]), ['body', ...p, 1, 'name'], { type: 'duplicate' });
  for (const type of ['boolean', 'text', 'number']) t.equal((await ok(at(p, [{ name: 'a', type }]))).read.analysis.data_fields[0].type, type);
  await rejects(t, at(p, [{ name: 'a', type: 'date' }]), ['body', ...p, 0, 'type'], { type: 'enum' });
  t.equal((await ok(at(p, [{ name: 'a', description: str(500) }]))).read.analysis.data_fields[0].description.length, 500);
  await rejects(t, at(p, [{ name: 'a', description: str(501) }]), ['body', ...p, 0, 'description'], { type: 'too_big_string' });
  // enum type: 2 to 20 options (docs/api/analysis.md)
  const opts = (n: number) => Array.from({ length: n }, (_, i) => `o${i}`);
  t.same((await ok(at(p, [{ name: 'a', type: 'enum', enum_options: opts(2) }]))).read.analysis.data_fields[0].enum_options, opts(2));
  t.same((await ok(at(p, [{ name: 'a', type: 'enum', enum_options: opts(20) }]))).read.analysis.data_fields[0].enum_options, opts(20));
  for (const options of [opts(1), opts(21), null]) {
    await rejects(t, at(p, [{ name: 'a', type: 'enum', enum_options: options }]), ['body', ...p, 0, 'enum_options']);
  }
  await rejects(t, at(p, [{ name: 'a', type: 'enum' }]), ['body', ...p, 0, 'enum_options']);
  await rejects(t, at(p, [{ name: 'a', type: 'text', enum_options: opts(2) }]), ['body', ...p, 0, 'enum_options']);
  await rejects(t, at(p, [{ name: 'a', type: 'enum', enum_options: ['x', 'x'] }]), ['body', ...p, 0, 'enum_options', 1], { type: 'duplicate' });
  t.equal((await ok(at(p, [{ name: 'a', enum_options: null }]))).read.analysis.data_fields[0].enum_options, null, 'enum_options null is accepted (named exception)');
  for (const k of ['name', 'type', 'description']) await rejects(t, at(p, [{ name: 'a', [k]: null }]), ['body', ...p, 0, k], { type: 'null_forbidden' });
  await rejects(t, at(p, null), ['body', ...p], { type: 'null_forbidden' });
});

t.test('field tables: analysis.criteria', async (t) => {
  const p = ['analysis', 'criteria'];
  t.same((await ok(at(p, [{ name: 'resolved' }]))).read.analysis.criteria, [{ name: 'resolved', description: '' }], 'default description');
  const ten = Array.from({ length: 10 }, (_, i) => ({ name: `c${i}`, description: str(500) }));
  t.equal((await ok(at(p, ten))).read.analysis.criteria.length, 10, '10 entries, descriptions of 500');
  await rejects(t, at(p, [...ten, { name: 'c10' }]), ['body', ...p], { type: 'too_big_array' });
  await rejects(t, at(p, [{ name: 'c', description: str(501) }]), ['body', ...p, 0, 'description'], { type: 'too_big_string' });
  await rejects(t, at(p, [{ name: 'Bad' }]), ['body', ...p, 0, 'name'], { type: 'string_pattern_mismatch' });
  await rejects(t, at(p, [{ name: 'a' + str(64, 'b') }]), ['body', ...p, 0, 'name'], { type: 'string_pattern_mismatch' });
  await rejects(t, at(p, [{ name: 'x' }, { name: 'y' }, { name: 'x' }]), ['body', ...p, 2, 'name'], { type: 'duplicate' });
  await rejects(t, at(p, [{ description: 'd' }]), ['body', ...p, 0, 'name'], { type: 'missing' });
  await rejects(t, at(p, [{ name: 'c', description: null }]), ['body', ...p, 0, 'description'], { type: 'null_forbidden' });
});

t.test('field tables: llm.custom (extension)', async (t) => {
  const p = ['llm', 'custom'];
  const first = { base_url: 'https://llm.example.com/v1', model: 'my-model', api_key: 'sk-first' };
  const set = await ok(at(p, first));
  t.same(set.read.llm, { tier: 'medium', custom: { base_url: 'https://llm.example.com/v1', model: 'my-model', api_key: null, has_api_key: true } }, 'read shape hides the key');
  t.equal((await ok(at(p, { ...first, base_url: 'https://llm.example.com/v1/chat/completions' }))).read.llm.custom?.base_url, 'https://llm.example.com/v1', 'a trailing /chat/completions is stripped');
  for (const k of ['api_key', 'base_url', 'model'] as const) {
    const { [k]: _omitted, ...rest } = first;
    await rejects(t, at(p, rest), ['body', ...p, k], { type: 'missing' });
  }
  const longBase = `https://llm.example.com/${str(2000 - 'https://llm.example.com/'.length, 'p')}`;
  t.equal((await ok(at(p, { ...first, base_url: longBase }))).read.llm.custom?.base_url, longBase, 'base_url of 2,000');
  await rejects(t, at(p, { ...first, base_url: longBase + 'p' }), ['body', ...p, 'base_url'], { type: 'too_big_string' });
  await rejects(t, at(p, { ...first, base_url: '' }), ['body', ...p, 'base_url'], { type: 'too_small_string' });
  for (const url of ['http://llm.example.com/v1', 'https://llm.example.com/v1?x=1', 'https://llm.example.com/v1#frag', 'https://10.1.2.3/v1', 'https://localhost/v1']) {
    await rejects(t, at(p, { ...first, base_url: url }), ['body', ...p, 'base_url'], { type: 'url' });
  }
  t.equal((await ok(at(p, { ...first, model: str(256, 'm') }))).read.llm.custom?.model.length, 256);
  await rejects(t, at(p, { ...first, model: str(257, 'm') }), ['body', ...p, 'model'], { type: 'too_big_string' });
  await rejects(t, at(p, { ...first, model: '' }), ['body', ...p, 'model'], { type: 'too_small_string' });
  t.ok((await ok(at(p, { ...first, api_key: str(4096, 'k') }))).read.llm.custom?.has_api_key, 'api_key of 4,096');
  await rejects(t, at(p, { ...first, api_key: str(4097, 'k') }), ['body', ...p, 'api_key'], { type: 'too_big_string' });
  await rejects(t, at(p, { ...first, api_key: '' }), ['body', ...p, 'api_key'], { type: 'too_small_string' });
  // once set: null or omitted api_key keeps the stored key; other members merge
  const kept = await ok(at(p, { model: 'other', api_key: null }), set.draft);
  t.same(kept.read.llm.custom, { base_url: 'https://llm.example.com/v1', model: 'other', api_key: null, has_api_key: true });
  t.same(kept.draft.llm.custom?.api_key, set.draft.llm.custom?.api_key, 'api_key null keeps the stored key');
  t.same((await ok(at(p, { base_url: 'https://llm.example.com/v2' }), set.draft)).draft.llm.custom?.api_key, set.draft.llm.custom?.api_key, 'same origin: omitted key kept');
  await rejects(t, at(p, { base_url: 'https://elsewhere.example.net/v1' }), ['body', ...p, 'api_key'], { type: 'missing', stored: set.draft, msg: /another origin/ });
  t.equal(box.open((await ok(at(p, { base_url: 'https://elsewhere.example.net/v1', api_key: 'sk-new' }), set.draft)).draft.llm.custom!.api_key.sealed), 'sk-new', 'moving origin with a new key');
  // tier and custom coexist; custom null reverts to the tier
  const both = await ok({ llm: { tier: 'high' } }, set.draft);
  t.same(both.read.llm.tier, 'high');
  t.same((await ok({ llm: { custom: null } }, both.draft)).read.llm, { tier: 'high', custom: null }, 'custom null reverts to the platform tier');
  for (const k of ['base_url', 'model']) await rejects(t, at(p, { ...first, [k]: null }), ['body', ...p, k], { type: 'null_forbidden' });
  await rejects(t, { llm: null }, ['body', 'llm'], { type: 'null_forbidden' });
});

t.test('system variables: unknown {{system.x}} → 422 listing the valid names', async (t) => {
  for (const field of ['system_prompt', 'first_message', 'first_message_prompt']) {
    const fields = await rejects(t, { prompt: { [field]: 'Today is {{system.now}}.' } }, ['body', 'prompt', field], { type: 'unknown_system_variable' });
    const msg = fields.find((f) => f.loc[2] === field)?.msg ?? '';
    for (const name of SYSTEM_VARIABLES) t.ok(msg.includes(name), `message lists ${name}`);
    t.match(msg, /\{\{system\.now\}\}/);
  }
  await rejects(t, { prompt: { system_prompt: '{{ system.session_id }}' } }, ['body', 'prompt', 'system_prompt'], { type: 'unknown_system_variable' });
  const known = SYSTEM_VARIABLES.map((n) => `{{${n}}}`).join(' ') + ' {{ system.today }} {{customer_name}} {{system}}';
  t.equal((await ok({ prompt: { system_prompt: known, first_message: known, first_message_prompt: known } })).read.prompt.system_prompt, known, 'every known name, spaced forms and custom variables pass');
});

// ---------------------------------------------------------------------------------------------
// PATCH rules

t.test('rule 1: the body is deep-merged; omitted sections and fields keep their value', async (t) => {
  const base = await ok({ prompt: { system_prompt: 'Be brief.', first_message: 'Hello' }, voice: { speaking_language: 'ja' }, tools: { system_tools: { hang_up_call: true } } });
  const { read: r } = await ok({ prompt: { first_message_mode: 'fixed' }, tools: { enabled: false } }, base.draft);
  t.same(r.prompt, { ...base.read.prompt, first_message_mode: 'fixed' }, 'sibling fields kept');
  t.same(r.voice, base.read.voice, 'omitted section kept');
  t.same(r.tools, { ...base.read.tools, enabled: false }, 'nested object kept');
  const empty = await ok({}, base.draft);
  t.same(empty.read, base.read, 'an empty body changes nothing');
  t.equal(empty.changed, false);
});

t.test('rule 2: the six lists are replaced as a whole', async (t) => {
  const lists: [Path, unknown[], unknown[]][] = [
    [['tools', 'tool_ids'], ['tool_a', 'tool_b'], ['tool_c']],
    [['knowledge_base', 'knowledge_source_ids'], ['ks_a', 'ks_b'], ['ks_c']],
    [['webhooks', 'post_call'], [{ url: 'https://a.example.com' }, { url: 'https://b.example.com' }], [{ url: 'https://c.example.com' }]],
    [['conversation', 'transfer_destinations'], [{ phone_number: '+14155550123' }], [{ phone_number: '+14155550199', label: 'desk' }]],
    [['analysis', 'data_fields'], [{ name: 'a' }, { name: 'b' }], [{ name: 'c' }]],
    [['analysis', 'criteria'], [{ name: 'a' }, { name: 'b' }], [{ name: 'c' }]],
  ];
  for (const [path, first, second] of lists) {
    const one = await ok(at(path, first));
    const two = await ok(at(path, second), one.draft);
    const got = get(two.read, path) as unknown[];
    t.equal(got.length, second.length, `${path.join('.')} replaced, not appended`);
    t.same(get((await ok(at(path, []), two.draft)).read, path), [], `${path.join('.')} cleared with []`);
  }
});

t.test('rule 3: a single post_call object is stored as a one-element list', async (t) => {
  const { read: r, draft } = await ok({ webhooks: { post_call: { url: 'https://one.example.com/hook', secret: 'whsec' } } });
  t.same(r.webhooks.post_call, [{ url: 'https://one.example.com/hook', has_secret: true }]);
  t.ok(Array.isArray(draft.webhooks.post_call));
});

t.test('rule 3: post_call holds at most 5 endpoints', async (t) => {
  const six = Array.from({ length: 6 }, (_, i) => ({ url: `https://h${i}.example.com` }));
  await rejects(t, { webhooks: { post_call: six } }, ['body', 'webhooks', 'post_call'], { type: 'too_big_array' });
});

t.test('rule 3: errors in a post_call list point into the list, errors in a single object into the object', async (t) => {
  const fields = await rejects(t, { webhooks: { post_call: [{ url: '' }, { url: 'http://10.0.0.1/' }] } }, ['body', 'webhooks', 'post_call', 0, 'url'], { type: 'too_small_string' });
  t.ok(fields.some((f) => JSON.stringify(f.loc) === JSON.stringify(['body', 'webhooks', 'post_call', 1, 'url']) && f.type === 'url'), 'both entries reported');
  t.notOk(fields.some((f) => f.type === 'object_type'), 'never "expected object" for a list');
  await rejects(t, { webhooks: { post_call: Array.from({ length: 6 }, () => ({ url: '' })) } }, ['body', 'webhooks', 'post_call'], { type: 'too_big_array' });
  await rejects(t, { webhooks: { post_call: { url: '' } } }, ['body', 'webhooks', 'post_call', 'url'], { type: 'too_small_string' });
  await rejects(t, { webhooks: { post_call: [null] } }, ['body', 'webhooks', 'post_call', 0], { type: 'null_forbidden' });
});

t.test('rule 3: post_call null or [] clears every endpoint', async (t) => {
  const set = await ok({ webhooks: { post_call: [{ url: 'https://a.example.com', secret: 's' }, { url: 'https://b.example.com' }] } });
  t.same((await ok({ webhooks: { post_call: null } }, set.draft)).read.webhooks.post_call, [], 'null clears');
  t.same((await ok({ webhooks: { post_call: [] } }, set.draft)).read.webhooks.post_call, [], '[] clears');
});

t.test('rule 3: duplicate post_call URLs are invalid, at the duplicate index', async (t) => {
  const body = { webhooks: { post_call: [{ url: 'https://a.example.com/x' }, { url: 'https://b.example.com/x' }, { url: 'https://A.example.com/x' }] } };
  await rejects(t, body, ['body', 'webhooks', 'post_call', 2, 'url'], { type: 'duplicate' });
});

t.test('rule 3: a post_call secret is write-only, rotated by a new value, absent when omitted', async (t) => {
  const a = await ok({ webhooks: { post_call: [{ url: 'https://a.example.com', secret: 'one' }] } });
  const b = await ok({ webhooks: { post_call: [{ url: 'https://a.example.com', secret: 'two' }] } }, a.draft);
  t.equal(box.open(b.draft.webhooks.post_call[0].secret!.sealed), 'two', 'a new value rotates the secret');
  t.not(b.hash, a.hash);
  const c = await ok({ webhooks: { post_call: [{ url: 'https://a.example.com' }] } }, b.draft);
  t.same(c.read.webhooks.post_call, [{ url: 'https://a.example.com', has_secret: false }], 'an entry without secret has none');
});

t.test('rule 4: ids that do not resolve give 422 with the index in loc', async (t) => {
  const fields = await rejects(t, { tools: { tool_ids: ['tool_a', 'ghost', 'tool_b', 'phantom'] } }, ['body', 'tools', 'tool_ids', 1], { type: 'unresolved_reference' });
  t.ok(fields.some((f) => JSON.stringify(f.loc) === JSON.stringify(['body', 'tools', 'tool_ids', 3])), 'every unresolved id is listed');
  t.equal(fields.length, 2);
  await rejects(t, { knowledge_base: { knowledge_source_ids: ['ks_a', 'gone'] } }, ['body', 'knowledge_base', 'knowledge_source_ids', 1], { type: 'unresolved_reference' });
  // validateReferences on its own, with the store as resolver
  await t.rejects(validateReferences({ tools: { tool_ids: ['nope'] } }, resolve), { code: 'invalid' });
  await t.resolves(validateReferences(createDefaultDraft(), resolve), 'empty lists need no lookup');
  let calls = 0;
  await validateReferences({ tools: {} }, { toolIds: async () => (calls++, new Set()), knowledgeSourceIds: async () => (calls++, new Set()) });
  t.equal(calls, 0, 'lists the body does not send are not looked up');
});

t.test('rule 5: a speaking_language outside the enumeration gives 422', async (t) => {
  for (const lang of ['pt', 'EN', 'en-US', '']) await rejects(t, { voice: { speaking_language: lang } }, ['body', 'voice', 'speaking_language'], { type: 'enum' });
});

t.test('rule 6: a system prompt over 4,000 tokens gives 422 naming the count; the draft is unchanged', async (t) => {
  const base = await ok({ prompt: { system_prompt: 'Short prompt.' } });
  const prompt = ' a'.repeat(5001);
  t.equal(countPromptTokens(prompt), 5001);
  const fields = await rejects(t, { prompt: { system_prompt: prompt } }, ['body', 'prompt', 'system_prompt'], { stored: base.draft });
  t.equal(fields[0].msg, 'Value error, system_prompt exceeds 4000 tokens (got 5001)');
  t.equal(base.draft.prompt.system_prompt, 'Short prompt.');
  t.ok(countPromptTokens('<|endoftext|>') > 1, 'special-token spellings count as text, not an error');
  const run = await rejects(t, { prompt: { system_prompt: str(100_000, 'a') } }, ['body', 'prompt', 'system_prompt']);
  t.equal(run[0].msg, 'Value error, system_prompt exceeds 4000 tokens (got 12500)', 'a 100,000-letter run is counted (in slices, without stalling)');
});

t.test('rule 7: explicit null gives 422 everywhere except the named exceptions', async (t) => {
  for (const section of ['prompt', 'voice', 'conversation', 'tools', 'webhooks', 'knowledge_base', 'analysis', 'guardrails', 'llm']) {
    await rejects(t, { [section]: null }, ['body', section], { type: 'null_forbidden' });
  }
  await rejects(t, null, ['body'], { type: 'null_forbidden' });
  await rejects(t, { analysis: { summary: null } }, ['body', 'analysis', 'summary'], { type: 'null_forbidden' });
  await rejects(t, { prompt: { system_prompt: null, first_message: null } }, ['body', 'prompt', 'first_message'], { type: 'null_forbidden' });
  // scalar fields are covered row by row in "field tables"; the exceptions:
  const set = await ok({
    webhooks: { post_call: [{ url: 'https://a.example.com' }], conversation_init: { url: 'https://init.example.com' } },
    llm: { custom: { base_url: 'https://llm.example.com', model: 'm', api_key: 'k' } },
    conversation: { outbound: { amd_enabled: false } },
    analysis: { summary: { prompt: 'Summarise.' } },
  });
  const cleared = await ok(
    { webhooks: { post_call: null, conversation_init: null }, llm: { custom: null }, conversation: { outbound: null }, analysis: { summary: { prompt: null } } },
    set.draft,
  );
  t.same(cleared.read.webhooks, { post_call: [], conversation_init: null }, 'post_call null clears; conversation_init null removes');
  t.equal(cleared.read.llm.custom, null, 'llm.custom null reverts to the tier');
  t.equal(cleared.read.conversation.outbound, null, 'outbound null is the default behaviour');
  t.equal(cleared.read.analysis.summary.prompt, null, 'summary.prompt is string or null');
  t.equal((await ok({ llm: { custom: { api_key: null } } }, set.draft)).read.llm.custom?.has_api_key, true, 'api_key null keeps the key');
  t.equal(cleared.hash, configHash(createDefaultDraft()), 'clearing everything returns to the default content hash');
});

t.test('rule 8: changes reach live sessions only after publish (a published snapshot is never touched by PATCH)', async (t) => {
  const published = (await ok({ prompt: { system_prompt: 'v1' } })).draft;
  const snapshot = structuredClone(published);
  const versionHash = configHash(published);
  const next = await ok({ prompt: { system_prompt: 'v2' } }, published);
  t.same(published, snapshot, 'the snapshot the version holds is unchanged');
  t.equal(configHash(published), versionHash);
  t.not(next.hash, versionHash, 'the draft now has unpublished changes');
  t.equal((await ok({ prompt: { system_prompt: 'v1' } }, next.draft)).hash, versionHash, 'editing back makes the draft equal the version again');
});

t.test('rule 9: analysis.summary members omitted from a given summary take their defaults', async (t) => {
  const set = await ok({ analysis: { summary: { enabled: false, prompt: 'Be terse.', language: 'fr' } } });
  t.same((await ok({ analysis: { summary: { enabled: false } } }, set.draft)).read.analysis.summary, { enabled: false, prompt: null, language: 'en' });
  t.same((await ok({ analysis: { summary: {} } }, set.draft)).read.analysis.summary, { enabled: true, prompt: null, language: 'en' });
  t.same((await ok({ analysis: { criteria: [] } }, set.draft)).read.analysis.summary, set.read.analysis.summary, 'an omitted summary object is kept');
});

// ---------------------------------------------------------------------------------------------
// Unknown fields, secrets, hash, purity

t.test('unknown fields at every level give 422 extra_forbidden with the key in loc', async (t) => {
  const cases: [unknown, Path][] = [
    [{ bogus: 1 }, ['body', 'bogus']],
    [{ agent_id: 'x' }, ['body', 'agent_id']],
    [{ config_hash: 'x' }, ['body', 'config_hash']],
    ...['prompt', 'voice', 'conversation', 'tools', 'webhooks', 'knowledge_base', 'analysis', 'guardrails', 'llm'].map((s): [unknown, Path] => [{ [s]: { bogus: 1 } }, ['body', s, 'bogus']]),
    [{ tools: { system_tools: { transfer_call: true } } }, ['body', 'tools', 'system_tools', 'transfer_call']],
    [{ conversation: { outbound: { bogus: 1 } } }, ['body', 'conversation', 'outbound', 'bogus']],
    [{ conversation: { outbound: { voicemail: { bogus: 1 } } } }, ['body', 'conversation', 'outbound', 'voicemail', 'bogus']],
    [{ conversation: { transfer_destinations: [{ phone_number: '+14155550123', bogus: 1 }] } }, ['body', 'conversation', 'transfer_destinations', 0, 'bogus']],
    [{ webhooks: { post_call: { url: 'https://a.example.com', has_secret: true } } }, ['body', 'webhooks', 'post_call', 'has_secret']],
    [{ webhooks: { post_call: [{ url: 'https://a.example.com', bogus: 1 }] } }, ['body', 'webhooks', 'post_call', 0, 'bogus']],
    [{ webhooks: { conversation_init: { url: 'https://a.example.com', has_secret: false } } }, ['body', 'webhooks', 'conversation_init', 'has_secret']],
    [{ analysis: { summary: { bogus: 1 } } }, ['body', 'analysis', 'summary', 'bogus']],
    [{ analysis: { data_fields: [{ name: 'a', bogus: 1 }] } }, ['body', 'analysis', 'data_fields', 0, 'bogus']],
    [{ analysis: { criteria: [{ name: 'a', bogus: 1 }] } }, ['body', 'analysis', 'criteria', 0, 'bogus']],
    [{ llm: { custom: { base_url: 'https://llm.example.com', model: 'm', api_key: 'k', has_api_key: true } } }, ['body', 'llm', 'custom', 'has_api_key']],
  ];
  for (const [body, loc] of cases) await rejects(t, body, loc, { type: 'extra_forbidden' });
});

t.test('secrets never appear in the read shape, the stored form, or any 422 output', async (t) => {
  const MARK = 'TOPSECRET-7f3a';
  const set = await ok({
    webhooks: { post_call: [{ url: 'https://a.example.com', secret: `${MARK}-pc` }], conversation_init: { url: 'https://init.example.com', secret: `${MARK}-init` } },
    llm: { custom: { base_url: 'https://llm.example.com', model: 'm', api_key: `${MARK}-key` } },
  });
  t.notOk(JSON.stringify(set.read).includes(MARK), 'read shape');
  t.notOk(JSON.stringify(set.draft).includes(MARK), 'stored form (what a database dump would show)');
  t.notOk(set.hash.includes(MARK));
  const failing: unknown[] = [
    { webhooks: { post_call: [{ url: 'https://a.example.com', secret: `${MARK}${str(300)}` }] } },
    { webhooks: { post_call: [{ url: 'http://127.0.0.1/', secret: MARK }] } },
    { webhooks: { post_call: { url: 'https://a.example.com', secret: MARK, bogus: MARK } } },
    { webhooks: { post_call: [{ url: 'https://a.example.com', secret: MARK }], bogus: 1 } },
    { webhooks: { conversation_init: { url: 'https://init.example.com', secret: [MARK] } } },
    { llm: { custom: { base_url: 'https://llm.example.com', model: 'm', api_key: `${MARK}${str(4100)}` } } },
    { llm: { custom: { base_url: `https://llm.example.com/?k=${MARK}`, model: 'm', api_key: MARK } } },
    { llm: { custom: { model: 'm', api_key: MARK } } },
    { webhooks: { post_call: MARK } },
  ];
  for (const body of failing) {
    let err: unknown;
    try {
      await patchDraft(createDefaultDraft(), body, deps);
    } catch (e) {
      err = e;
    }
    t.ok(err instanceof ServiceError && err.status === 422, '422');
    const e = err as ServiceError;
    const everything = JSON.stringify({ message: e.message, fields: e.fields, cause: String(e.cause ?? '') });
    t.notOk(everything.includes(MARK), `no secret in ${JSON.stringify(e.fields?.map((f) => f.loc))}`);
  }
});

t.test('config_hash changes exactly when content changes', async (t) => {
  const a = await ok({ prompt: { system_prompt: 'Hello' }, webhooks: { post_call: [{ url: 'https://a.example.com', secret: 'k1' }] } });
  const again = await ok({ prompt: { system_prompt: 'Hello' }, webhooks: { post_call: [{ url: 'https://a.example.com', secret: 'k1' }] } });
  t.equal(again.hash, a.hash, 'the same patch twice gives the same hash (re-sealing the same secret does not change it)');
  t.not(again.draft.webhooks.post_call[0].secret?.sealed, a.draft.webhooks.post_call[0].secret?.sealed, 'although the sealed values differ');
  const reapplied = await ok({ prompt: { system_prompt: 'Hello' } }, a.draft);
  t.equal(reapplied.hash, a.hash, 'a patch that sets the current values keeps the hash');
  t.equal(reapplied.changed, false);
  const rotated = await ok({ webhooks: { post_call: [{ url: 'https://a.example.com', secret: 'k2' }] } }, a.draft);
  t.not(rotated.hash, a.hash, 'rotating a secret changes the hash');
  t.equal(rotated.changed, true);
  const dropped = await ok({ webhooks: { post_call: [{ url: 'https://a.example.com' }] } }, a.draft);
  t.not(dropped.hash, a.hash, 'removing a secret changes the hash');
  t.not((await ok({ voice: { expressive: true } }, a.draft)).hash, a.hash, 'any field change changes the hash');
  t.not((await ok({ tools: { tool_ids: ['tool_b', 'tool_a'] } })).hash, (await ok({ tools: { tool_ids: ['tool_a', 'tool_b'] } })).hash, 'list order is content');
  const keyOrder = await ok({ guardrails: { manipulation: true, focus: true } });
  t.equal(keyOrder.hash, (await ok({ guardrails: { focus: true, manipulation: true } })).hash, 'key order is not content');
  const shuffled = Object.fromEntries(Object.entries(a.draft).reverse()) as StoredDraft;
  t.equal(configHash(shuffled), a.hash, 'the canonical form sorts keys');
  const otherBox = createSecretBox(randomBytes(32));
  const resealed = structuredClone(a.draft);
  resealed.webhooks.post_call[0].secret = { sealed: box.seal('k1'), fingerprint: box.fingerprint('k1') };
  t.equal(configHash(resealed), a.hash, 're-sealing the same secret keeps the hash');
  t.not(otherBox.fingerprint('k1'), box.fingerprint('k1'));
  t.equal(toReadShape(AGENT, a.draft, a.hash, NOW).config_hash, a.hash);
  const secretInit = await ok({ webhooks: { conversation_init: { url: 'https://i.example.com', secret: 'x1' } } });
  t.not((await ok({ webhooks: { conversation_init: { secret: 'x2' } } }, secretInit.draft)).hash, secretInit.hash, 'rotating the init secret');
  t.equal((await ok({ webhooks: { conversation_init: { secret: 'x1' } } }, secretInit.draft)).hash, secretInit.hash, 'sending the same init secret again');
  const llmA = await ok({ llm: { custom: { base_url: 'https://llm.example.com', model: 'm', api_key: 'ka' } } });
  t.not((await ok({ llm: { custom: { api_key: 'kb' } } }, llmA.draft)).hash, llmA.hash, 'rotating the LLM key');
});

t.test('a failed patch leaves the input object deep-equal to before', async (t) => {
  const stored = (await ok({
    prompt: { system_prompt: 'Keep me' },
    tools: { tool_ids: ['tool_a'] },
    webhooks: { post_call: [{ url: 'https://a.example.com', secret: 's' }] },
    llm: { custom: { base_url: 'https://llm.example.com', model: 'm', api_key: 'k' } },
  })).draft;
  // schema failure after valid sections, reference failure, merge-time failure
  await fail(t, { prompt: { system_prompt: 'Changed' }, voice: { speaking_language: 'xx' } }, stored);
  await fail(t, { prompt: { system_prompt: 'Changed' }, tools: { tool_ids: ['ghost'] } }, stored);
  await fail(t, { prompt: { system_prompt: 'Changed' }, llm: { custom: { base_url: 'https://other.example.org' } } }, stored);
  await fail(t, { prompt: { system_prompt: 'Changed' }, webhooks: { conversation_init: { timeout_seconds: 3 } } }, stored);
  t.equal(stored.prompt.system_prompt, 'Keep me');
  // applyPatch itself never mutates, even on success
  const before = structuredClone(stored);
  const patch = parseConfigPatch({ prompt: { system_prompt: 'New' }, tools: { tool_ids: ['tool_b'] }, analysis: { data_fields: [{ name: 'x' }] } });
  const next = applyPatch(stored, patch, box);
  t.same(stored, before, 'input untouched');
  next.tools.tool_ids.push('mutated');
  next.analysis.data_fields[0].name = 'mutated';
  t.same(patch.tools?.tool_ids, ['tool_b'], 'the result shares no lists with the patch');
  t.equal(patch.analysis?.data_fields?.[0].name, 'x');
});

t.test('patchDraft `at`: 422 locations inside a nested config (agent creation)', async (t) => {
  let err: unknown;
  try {
    await patchDraft(createDefaultDraft(), { voice: { speaking_language: 'xx' }, tools: { tool_ids: ['ghost'] } }, deps, { at: ['config'] });
  } catch (e) {
    err = e;
  }
  t.ok(err instanceof ServiceError);
  t.same((err as ServiceError).fields?.map((f) => f.loc), [['body', 'config', 'voice', 'speaking_language']]);
  try {
    await patchDraft(createDefaultDraft(), { tools: { tool_ids: ['ghost'] } }, deps, { at: ['config'] });
  } catch (e) {
    err = e;
  }
  t.same((err as ServiceError).fields?.map((f) => f.loc), [['body', 'config', 'tools', 'tool_ids', 0]]);
});

t.test('an injected URL check is used instead of the default', async (t) => {
  const seen: string[] = [];
  const checkUrl = (raw: string) => (seen.push(raw), raw.includes('blocked') ? { ok: false as const, reason: 'blocked by policy' } : { ok: true as const, url: new URL(raw) });
  const localDeps = { ...deps, checkUrl };
  const r = await patchDraft(createDefaultDraft(), { webhooks: { post_call: { url: 'http://127.0.0.1:9000/hook' } } }, localDeps);
  t.same(toReadShape(AGENT, r.draft, r.hash, NOW).webhooks.post_call, [{ url: 'http://127.0.0.1:9000/hook', has_secret: false }], 'an allow-listing checker lets a local endpoint through');
  await t.rejects(patchDraft(createDefaultDraft(), { webhooks: { post_call: { url: 'https://blocked.example.com' } } }, localDeps), { code: 'invalid', fields: [{ loc: ['body', 'webhooks', 'post_call', 'url'], msg: 'Value error, blocked by policy' }] });
  t.ok(seen.length >= 2);
});
