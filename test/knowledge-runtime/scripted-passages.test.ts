// The scripted chat model's rule 3b (docs/inference.md): it answers from knowledge passages.
import t from 'tap';
import { create } from '@bufbuild/protobuf';
import { MessageSchema, Role } from '../../src/gen/inference/v1/inference_pb.ts';
import { runScripted } from '../../native/engines/scripted.ts';

const msg = (role: Role, content: string) => create(MessageSchema, { role, content });
const text = (system: string, turn: string) =>
  runScripted({ messages: [msg(Role.SYSTEM, system), msg(Role.USER, turn)], tools: [], toolChoice: '', maxTokens: 0 }).events.map((e) => e.textDelta ?? '').join('');
const SYSTEM = 'Be helpful.\n\nKnowledge passages (from the agent\'s knowledge sources; answer from them when they are relevant):\n<passage>\nShipping takes five days. Parcels go by road.\n</passage>\n<passage>\nReturns are accepted within thirty days.\n</passage>';

t.test('rule 3b: the passage sentence sharing the most words with the turn', async (t) => {
  t.equal(text(SYSTEM, 'How long does shipping take, in days?'), 'Shipping takes five days.');
  t.equal(text(SYSTEM, 'Are returns accepted?'), 'Returns are accepted within thirty days.');
  t.equal(text(SYSTEM, 'Hi'), 'You said: Hi', 'no shared word: the echo');
  t.equal(text('Be helpful. Shipping takes five days.', 'How long does shipping take?'), 'You said: How long does shipping take?', 'only text inside passages counts');
  t.equal(text(SYSTEM, 'Please say "ok"'), 'ok', 'say "…" comes first');
});
