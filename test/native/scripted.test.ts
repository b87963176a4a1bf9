// The scripted chat model's documented rules (docs/inference.md, "The scripted chat model").
import t from 'tap';
import { create, type MessageInitShape } from '@bufbuild/protobuf';
import { MessageSchema, Role, ToolSchema, type Message } from '../../src/gen/inference/v1/inference_pb.ts';
import { runScripted } from '../../native/engines/scripted.ts';

const msg = (role: Role, content: string, extra: MessageInitShape<typeof MessageSchema> = {}) => create(MessageSchema, { ...(extra as object), role, content });
const user = (c: string) => msg(Role.USER, c);
const weather = create(ToolSchema, {
  name: 'get_weather',
  parametersJsonSchema: JSON.stringify({
    type: 'object',
    properties: { city: { type: 'string' }, days: { type: 'integer' }, metric: { type: 'boolean' }, unit: { enum: ['C', 'F'] } },
    required: ['city'],
  }),
});
const run = (messages: Message[], extra: Partial<Parameters<typeof runScripted>[0]> = {}) =>
  runScripted({ messages, tools: [], toolChoice: '', maxTokens: 0, ...extra });
const text = (r: ReturnType<typeof runScripted>) => r.events.map((e) => e.textDelta ?? '').join('');

t.test('replies', async (t) => {
  t.equal(text(run([msg(Role.SYSTEM, 'Be nice.')])), 'Hello! How can I help you?', 'no user turn: greeting');
  t.equal(text(run([user('How are you')])), 'You said: How are you', 'echo');
  t.equal(text(run([user('Please say "Bonjour à tous!" now')])), 'Bonjour à tous!', 'say "…"');
  t.equal(text(run([user('say: goodbye then')])), 'goodbye then', 'say: …');
  t.same(run([user('one two three four five six')]).events.map((e) => e.textDelta), ['You ', 'said: ', 'one ', 'two ', 'three ', 'four ', 'five ', 'six'], 'word by word');
  const cut = run([user('one two three four five six')], { maxTokens: 3 });
  t.equal(cut.finish, 'length', 'max_tokens cuts the reply');
});

t.test('tool calls take their arguments from the user turn', async (t) => {
  const r = run([user('Get weather for city is "New York", days: 3, metric = yes and unit is f.')], { tools: [weather] });
  t.equal(r.finish, 'tool_calls');
  t.same(r.events[0].toolCall && { ...r.events[0].toolCall, args: JSON.parse(r.events[0].toolCall.argumentsJson), argumentsJson: undefined }, { id: 'call_1', name: 'get_weather', args: { city: 'New York', days: 3, metric: true, unit: 'F' }, argumentsJson: undefined });
  t.equal(text(run([user('what about get weather tomorrow')], { tools: [weather] })), 'To use get_weather I need city.', 'a missing required argument is asked for');
  t.equal(text(run([user('get weather, city: Paris')], { tools: [weather], toolChoice: 'none' })), 'You said: get weather, city: Paris', 'tool_choice none');
  const forced = run([user('hello')], { tools: [weather], toolChoice: 'required' });
  t.equal(forced.events[0].toolCall?.name, 'get_weather', 'tool_choice required forces a call');
  const after = run([user('get weather city: Oslo'), msg(Role.ASSISTANT, '', { toolCalls: [{ id: 'call_1', name: 'get_weather', argumentsJson: '{}' }] }), msg(Role.TOOL, '{"temp":3}', { name: 'get_weather', toolCallId: 'call_1' })], { tools: [weather] });
  t.equal(text(after), 'get_weather returned: {"temp":3}', 'a tool result is reported');
  const second = run([msg(Role.ASSISTANT, '', { toolCalls: [{ id: 'call_1', name: 'x', argumentsJson: '{}' }] }), user('get weather city: Rome')], { tools: [weather] });
  t.equal(second.events[0].toolCall?.id, 'call_2', 'call ids count earlier calls');
});

t.test('structured mode fills the schema', async (t) => {
  const schema = {
    type: 'object',
    properties: {
      summary: { type: 'string' },
      data: {
        type: 'object',
        properties: {
          age: { type: 'object', properties: { value: { type: ['integer', 'null'] }, rationale: { type: 'string' } } },
          email: { type: 'object', properties: { value: { type: ['string', 'null'] }, rationale: { type: 'string' } } },
        },
      },
      criteria: { type: 'object', properties: { polite: { type: 'object', properties: { result: { enum: ['success', 'failure', 'unknown'] }, rationale: { type: 'string' } } } } },
    },
  };
  const r = runScripted({ messages: [user('Hi, my age is 42.'), msg(Role.ASSISTANT, 'Thanks!')], tools: [], toolChoice: '', maxTokens: 0, structuredSchema: JSON.stringify(schema) });
  const doc = JSON.parse(text(r));
  t.equal(doc.summary, '1 user turns. The user said: Hi, my age is 42.');
  t.same(doc.data.age, { value: 42, rationale: 'The conversation mentions age.' });
  t.same(doc.data.email, { value: null, rationale: 'The conversation does not mention email.' });
  t.same(doc.criteria.polite, { result: 'unknown', rationale: 'The conversation does not mention polite.' });
});
