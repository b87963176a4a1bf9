// What the analysis asks the model (schema, instructions) and how its answer is shaped.
import t from 'tap';
import { analysisDisabled, analysisInstructions, analysisSchema, shapeAnalysis, type AnalysisConfig } from '../../src/analysis/index.ts';

const CONFIG: AnalysisConfig = {
  summary: { enabled: true, prompt: 'Say what was ordered.', language: 'ja' },
  data_fields: [
    { name: 'paid', type: 'boolean', description: 'Paid already', enum_options: null },
    { name: 'qty', type: 'number', description: '', enum_options: null },
    { name: 'note', type: 'text', description: '', enum_options: null },
    { name: 'size', type: 'enum', description: '', enum_options: ['s', 'm'] },
  ],
  criteria: [{ name: 'upsold', description: 'Offered a bigger size' }],
};

t.test('the schema types every field; enum values are the options or null', async (t) => {
  const s = analysisSchema(CONFIG) as any;
  t.same(Object.keys(s.properties), ['summary', 'data', 'criteria']);
  t.same(s.properties.data.properties.paid.properties.value, { type: ['boolean', 'null'] });
  t.same(s.properties.data.properties.qty.properties.value, { type: ['number', 'null'] });
  t.same(s.properties.data.properties.note.properties.value, { type: ['string', 'null'] });
  t.same(s.properties.data.properties.size.properties.value, { type: ['string', 'null'], enum: ['s', 'm', null] });
  t.same(s.properties.criteria.properties.upsold.properties.result.enum, ['success', 'failure', 'unknown']);
  t.notOk('summary' in (analysisSchema({ ...CONFIG, summary: { ...CONFIG.summary, enabled: false } }) as any).properties, 'summary off: not asked for');
});

t.test('instructions: the summary language and prompt, each field and criterion', async (t) => {
  const text = analysisInstructions(CONFIG);
  t.match(text, /in Japanese, whatever language/);
  t.match(text, /summary: Say what was ordered\./);
  t.match(text, /- size \(enum: one of s, m\)/);
  t.match(text, /- upsold: Offered a bigger size/);
});

t.test('the answer is shaped: wrong types become null, unknown results unknown', async (t) => {
  const a = shapeAnalysis(CONFIG, {
    summary: 'ok',
    data: { paid: { value: 'yes', rationale: 'r1' }, qty: { value: 3, rationale: 'r2' }, note: { value: null, rationale: 'not said' }, size: { value: 'xl', rationale: 'r4' } },
    criteria: { upsold: { result: 'maybe', rationale: 'r5' } },
  });
  t.same(a, {
    status: 'completed',
    summary: 'ok',
    data: [
      { name: 'paid', type: 'boolean', value: null, rationale: 'r1' },
      { name: 'qty', type: 'number', value: 3, rationale: 'r2' },
      { name: 'note', type: 'text', value: null, rationale: 'not said' },
      { name: 'size', type: 'enum', value: null, rationale: 'r4' },
    ],
    criteria_results: [{ name: 'upsold', result: 'unknown', rationale: 'r5' }],
  });
  t.same(shapeAnalysis(CONFIG, {}).criteria_results, [{ name: 'upsold', result: 'unknown', rationale: '' }], 'a missing criterion is unknown');
});

t.test('disabled: summary off and both lists empty', async (t) => {
  t.ok(analysisDisabled({ summary: { enabled: false, prompt: null, language: 'en' }, data_fields: [], criteria: [] }));
  t.notOk(analysisDisabled({ summary: { enabled: false, prompt: null, language: 'en' }, data_fields: [], criteria: [{ name: 'x', description: '' }] }));
});
