/**
 * Post-call analysis (docs/api/analysis.md): one structured `Generate` call over the transcript fills
 * the summary, the data fields and the criteria of the agent version the session ran. The model
 * is asked for a JSON document of this shape (the schema sent in `structured.json_schema`):
 *
 *   { summary: string,                                          (when the summary is enabled)
 *     data:     { <field>:     { value: <type> | null, rationale: string } },
 *     criteria: { <criterion>: { result: "success" | "failure" | "unknown", rationale: string } } }
 *
 * and its answer is shaped into the entity defensively: a value of the wrong type becomes null,
 * an unknown result becomes `unknown`, a missing rationale an empty string.
 */
import { ServiceError } from '../errors.ts';
import { Role } from '../gen/inference/v1/inference_pb.ts';
import type { InferenceClient } from '../inference/index.ts';

export type DataFieldType = 'boolean' | 'text' | 'number' | 'enum';

export interface AnalysisConfig {
  summary: { enabled: boolean; prompt: string | null; language: string };
  data_fields: { name: string; type: DataFieldType; description: string; enum_options: string[] | null }[];
  criteria: { name: string; description: string }[];
}

export type CriterionResult = 'success' | 'failure' | 'unknown';

/** The analysis entity (docs/api/analysis.md), as the session detail and `call.analyzed` carry it. */
export interface Analysis {
  status: 'completed' | 'skipped' | 'error';
  summary: string | null;
  data: { name: string; type: DataFieldType; value: boolean | number | string | null; rationale: string }[];
  criteria_results: { name: string; result: CriterionResult; rationale: string }[];
}

export const SKIPPED: Analysis = { status: 'skipped', summary: null, data: [], criteria_results: [] };
export const FAILED: Analysis = { status: 'error', summary: null, data: [], criteria_results: [] };

const LANGUAGES: Record<string, string> = {
  en: 'English', zh: 'Chinese', ja: 'Japanese', ko: 'Korean', es: 'Spanish', fr: 'French', de: 'German', pt: 'Portuguese', ru: 'Russian', ar: 'Arabic',
};

/** Analysis disabled: summary off and no data fields or criteria; no model call is made. */
export function analysisDisabled(a: AnalysisConfig): boolean {
  return !a.summary.enabled && a.data_fields.length === 0 && a.criteria.length === 0;
}

function valueSchema(f: AnalysisConfig['data_fields'][number]): Record<string, unknown> {
  switch (f.type) {
    case 'boolean':
      return { type: ['boolean', 'null'] };
    case 'number':
      return { type: ['number', 'null'] };
    case 'enum':
      return { type: ['string', 'null'], enum: [...(f.enum_options ?? []), null] };
    default:
      return { type: ['string', 'null'] };
  }
}

/** The JSON Schema of the model's answer. */
export function analysisSchema(a: AnalysisConfig): Record<string, unknown> {
  const obj = (properties: Record<string, unknown>) => ({ type: 'object', properties, required: Object.keys(properties), additionalProperties: false });
  const data = Object.fromEntries(a.data_fields.map((f) => [f.name, obj({ value: valueSchema(f), rationale: { type: 'string' } })]));
  const criteria = Object.fromEntries(a.criteria.map((c) => [c.name, obj({ result: { type: 'string', enum: ['success', 'failure', 'unknown'] }, rationale: { type: 'string' } })]));
  const props: Record<string, unknown> = {};
  if (a.summary.enabled) props.summary = { type: 'string' };
  props.data = obj(data);
  props.criteria = obj(criteria);
  return obj(props);
}

/** The instructions (system message) of the analysis call. */
export function analysisInstructions(a: AnalysisConfig): string {
  const language = LANGUAGES[a.summary.language] ?? a.summary.language;
  const lines = [
    'You analyse a finished conversation between a voice agent (assistant) and a caller (user).',
    `Write every text you produce (summary and rationales) in ${language}, whatever language the conversation used.`,
    'Answer with one JSON document that matches the given schema, and nothing else.',
  ];
  if (a.summary.enabled) lines.push(`summary: ${a.summary.prompt ?? 'Summarise the conversation in a few sentences: what the caller wanted and what happened.'}`);
  if (a.data_fields.length) {
    lines.push('data: for each field, extract its value from the conversation; use null when the conversation does not contain it, and say why in the rationale.');
    for (const f of a.data_fields) lines.push(`- ${f.name} (${f.type}${f.type === 'enum' ? `: one of ${(f.enum_options ?? []).join(', ')}` : ''}): ${f.description}`);
  }
  if (a.criteria.length) {
    lines.push('criteria: judge each criterion as success, failure, or unknown when the evidence is ambiguous or insufficient; explain in the rationale.');
    for (const c of a.criteria) lines.push(`- ${c.name}: ${c.description}`);
  }
  return lines.join('\n');
}

const str = (v: unknown) => (typeof v === 'string' ? v : '');
const rec = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});

function shapeValue(f: AnalysisConfig['data_fields'][number], v: unknown): boolean | number | string | null {
  if (v === null || v === undefined) return null;
  switch (f.type) {
    case 'boolean':
      return typeof v === 'boolean' ? v : null;
    case 'number':
      return typeof v === 'number' && Number.isFinite(v) ? v : null;
    case 'enum':
      return typeof v === 'string' && (f.enum_options ?? []).includes(v) ? v : null;
    default:
      return typeof v === 'string' ? v : null;
  }
}

/** Shapes the model's JSON answer into the entity (in the configured order). */
export function shapeAnalysis(a: AnalysisConfig, answer: unknown): Analysis {
  const doc = rec(answer);
  const data = rec(doc.data);
  const criteria = rec(doc.criteria);
  return {
    status: 'completed',
    summary: a.summary.enabled ? str(doc.summary) || null : null,
    data: a.data_fields.map((f) => {
      const d = rec(data[f.name]);
      return { name: f.name, type: f.type, value: shapeValue(f, d.value), rationale: str(d.rationale) };
    }),
    criteria_results: a.criteria.map((c) => {
      const r = rec(criteria[c.name]);
      const result = r.result === 'success' || r.result === 'failure' ? r.result : 'unknown';
      return { name: c.name, result, rationale: str(r.rationale) };
    }),
  };
}

export interface TranscriptMessage {
  role: 'user' | 'assistant';
  content: string;
}

/**
 * Runs the analysis over a transcript with one structured Generate call. Throws a
 * ServiceError (`upstream`) when the model's answer is not a JSON object; inference errors
 * propagate as they are (503 when the backend is down).
 */
export async function analyze(
  inference: Pick<InferenceClient, 'generate'>,
  o: { model: string; analysis: AnalysisConfig; transcript: TranscriptMessage[]; signal?: AbortSignal; teamId?: string; requestId?: string; timeoutMs?: number },
): Promise<Analysis> {
  const messages = [
    { role: Role.SYSTEM, content: analysisInstructions(o.analysis) },
    ...o.transcript.map((m) => ({ role: m.role === 'user' ? Role.USER : Role.ASSISTANT, content: m.content })),
  ];
  let text = '';
  const req = { model: o.model, messages, structured: { name: 'call_analysis', jsonSchema: JSON.stringify(analysisSchema(o.analysis)) }, temperature: 0 };
  for await (const r of inference.generate(req, { signal: o.signal, teamId: o.teamId, requestId: o.requestId, timeoutMs: o.timeoutMs })) {
    if (r.event.case === 'textDelta') text += r.event.value;
  }
  let answer: unknown;
  try {
    answer = JSON.parse(text);
  } catch (cause) {
    throw new ServiceError('upstream', 'The analysis model did not answer with JSON', { cause });
  }
  if (!answer || typeof answer !== 'object' || Array.isArray(answer)) throw new ServiceError('upstream', 'The analysis model did not answer with a JSON object');
  return shapeAnalysis(o.analysis, answer);
}

/** The chat model id for an agent's LLM tier (custom LLM endpoints are not used for analysis). */
export function analysisModel(config: { llm?: { tier?: string } }): string {
  return `llm-${config.llm?.tier ?? 'medium'}`;
}
