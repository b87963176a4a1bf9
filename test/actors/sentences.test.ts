// Where a sentence ends: the one rule (actors/sentences.ts) and the native backend's copy of it.
import t from 'tap';
import { cutSentences, sentenceEnds, splitSentences } from '../../actors/sentences.ts';
import * as native from '../../native/sentences.ts';

t.test('a sentence ends after its terminators and closers, with the whitespace after them', async (t) => {
  t.same(splitSentences('Hello there. How are you? Fine!'), ['Hello there. ', 'How are you? ', 'Fine!']);
  t.same(splitSentences('He said "stop." Then left.'), ['He said "stop." ', 'Then left.'], 'closing quotes stay with their sentence');
  t.same(splitSentences('Wait... what?! Okay'), ['Wait... ', 'what?! ', 'Okay'], 'a run of terminators is one end');
  t.same(splitSentences('line one\nline two'), ['line one\n', 'line two'], 'a line break ends a sentence');
  t.same(splitSentences(''), []);
});

t.test('an ASCII terminator ends a sentence only before whitespace or the end of the text', async (t) => {
  t.same(splitSentences('It costs 3.5 dollars. Really.'), ['It costs 3.5 dollars. ', 'Really.']);
  t.same(splitSentences('See e.g.this one'), ['See e.g.this one']);
});

t.test('full-width terminators end a sentence with text right after them', async (t) => {
  t.same(splitSentences('今天天气很好。明天也好！真的吗？'), ['今天天气很好。', '明天也好！', '真的吗？']);
  t.same(splitSentences('「行こう。」と彼は言った。'), ['「行こう。」', 'と彼は言った。'], 'with closing brackets');
});

t.test('streaming text: the end of what arrived is no sentence end by itself', async (t) => {
  t.same(cutSentences('Hello. How'), ['Hello. ', 'How']);
  t.same(cutSentences('It costs 3.'), ['', 'It costs 3.'], '"3." may become "3.5"');
  t.same(cutSentences('It costs 3. '), ['It costs 3. ', '']);
  t.same(cutSentences('你好。'), ['你好。', ''], 'a full-width end counts at once');
  t.same(sentenceEnds('Hi. There. ', true), [4, 11]);
  t.same(sentenceEnds('Hi. There.'), [4, 10], 'a whole text ends its last sentence');
});

t.test('the native backend keeps the same rule', async (t) => {
  const texts = ['Hello there. How are you? Fine!', 'He said "stop." Then left.', 'It costs 3.5 dollars. Really.', '今天天气很好。明天也好！', 'line one\nline two', 'Wait... what?! Okay', 'It costs 3.', '「行こう。」と彼は言った。'];
  for (const text of texts) {
    t.same(native.splitSentences(text), splitSentences(text), text);
    t.same(native.cutSentences(text), cutSentences(text), text);
  }
  const value = new RegExp(`^(.+?)(?=${native.SENTENCE_END_AHEAD}|$)`, 'u');
  t.same(['It costs 3.5 dollars. Really.', '今天天气很好。明天', 'Paris!'].map((s) => value.exec(s)![1]), ['It costs 3.5 dollars', '今天天气很好', 'Paris'], 'a value stops before a sentence end');
});
