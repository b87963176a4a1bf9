/** Post-call analysis: the structured model call, its durable worker, the entity's read shape. */
import { z } from 'zod';
import type { SessionRow } from '../sessions/store.ts';
import type { Analysis } from './analyze.ts';

export { analyze, analysisDisabled, analysisInstructions, analysisModel, analysisSchema, shapeAnalysis, SKIPPED, FAILED } from './analyze.ts';
export type { Analysis, AnalysisConfig, CriterionResult, DataFieldType, TranscriptMessage } from './analyze.ts';
export { AnalysisWorker, type AnalysisWorkerOptions } from './worker.ts';

/** The analysis of a session detail (docs/api/analysis.md), null until settled. */
export const analysisEntity = z.object({
  status: z.enum(['completed', 'skipped', 'error']),
  summary: z.string().nullable(),
  data: z.array(z.object({
    name: z.string(),
    type: z.enum(['boolean', 'text', 'number', 'enum']),
    value: z.union([z.boolean(), z.number(), z.string()]).nullable().describe('null when the call lacks the information (the rationale says so)'),
    rationale: z.string(),
  })),
  criteria_results: z.array(z.object({ name: z.string(), result: z.enum(['success', 'failure', 'unknown']), rationale: z.string() })),
  finished_at: z.string().nullable().describe('When the analysis settled (the dedupe key of call.analyzed with the session id)'),
});
export type AnalysisView = z.infer<typeof analysisEntity>;

const SETTLED = new Set(['completed', 'skipped', 'error']);

/** The settled analysis of a session row, or null while none exists or it is queued or running. */
export function toAnalysisView(r: SessionRow): AnalysisView | null {
  if (!r.analysis_status || !SETTLED.has(r.analysis_status) || !r.analysis) return null;
  const a = r.analysis as Analysis;
  return { status: a.status, summary: a.summary, data: a.data, criteria_results: a.criteria_results, finished_at: r.analysis_finished_at ? r.analysis_finished_at.toISOString() : null };
}
