/**
 * The post-call analysis worker. Every node runs one; the queue is the `sessions` row itself
 * (`analysis_status`), so a queued analysis survives any restart:
 *
 * - ending a session marks its analysis `queued` (or settles it `skipped`) in the same
 *   statement (`markSessionEnded`);
 * - a poll claims due rows under a lease (`FOR UPDATE SKIP LOCKED`); a dead node's claim is
 *   taken over when the lease expires;
 * - each claim is one structured Generate call; a failure is retried (1 s, then 5 s; 3 attempts
 *   in all), then settled as `error`;
 * - settling writes the entity and queues `call.analyzed` for every post-call endpoint in one
 *   statement, so the webhook worker delivers it after `call.ended`;
 * - stopping the node aborts calls in flight and gives their rows back, due at once.
 */
import { randomBytes } from 'node:crypto';
import type { InferenceClient } from '../inference/index.ts';
import type { Logger } from '../log.ts';
import { claimDueAnalyses, loadAnalysisInput, releaseAnalysis, settleAnalysis } from './store.ts';
import type { Sql } from '../store/db.ts';
import type { SessionRow } from '../sessions/store.ts';
import { LeasePoller } from '../jobs/lease-poller.ts';
import { analysisModel, analyze, FAILED, type AnalysisConfig } from './analyze.ts';

export interface AnalysisWorkerOptions {
  sql: Sql;
  inference: Pick<InferenceClient, 'generate'>;
  log: Logger;
  /** Delay before attempt n+1 after attempt n fails; default `[1000, 5000]`. */
  backoffMs?: number[];
  /** Attempts in all, default 3. */
  maxAttempts?: number;
  /** Per model call, default 60,000. */
  timeoutMs?: number;
  /** How often the queue is polled, default 500. */
  pollMs?: number;
  /** Analyses in flight on this node at most, default 8. */
  concurrency?: number;
  /** Called after an analysis settled (the webhook worker may poll at once). */
  onSettled?: (sessionId: string) => void;
}

export class AnalysisWorker {
  readonly maxAttempts: number;
  private readonly backoffMs: number[];
  private readonly timeoutMs: number;
  private readonly claimId = `an_${randomBytes(9).toString('hex')}`;
  private readonly poller: LeasePoller<SessionRow>;

  constructor(private readonly o: AnalysisWorkerOptions) {
    this.backoffMs = o.backoffMs ?? [1000, 5000];
    this.maxAttempts = o.maxAttempts ?? 3;
    this.timeoutMs = o.timeoutMs ?? 60_000;
    this.poller = new LeasePoller<SessionRow>({
      name: 'analysis',
      log: o.log,
      pollMs: o.pollMs ?? 500,
      concurrency: o.concurrency ?? 8,
      claim: (limit) => claimDueAnalyses(o.sql, { limit, leaseMs: this.timeoutMs + 30_000, claimId: this.claimId }),
      key: (row) => row.id,
      run: (row, signal) => this.run(row, signal),
      failure: (row) => ({ fields: { sessionId: row.id }, msg: 'analysis outcome not recorded' }),
    });
  }

  start(): void {
    this.poller.start();
  }

  /** Claims and starts what is due now; resolves once claimed (not once settled). */
  tick(): Promise<number> {
    return this.poller.tick();
  }

  /** Stops polling, aborts analyses in flight and hands their rows back to the queue. */
  close(): Promise<void> {
    return this.poller.close();
  }

  private async run(row: SessionRow, signal: AbortSignal): Promise<void> {
    const attempts = (row as SessionRow & { analysis_attempts: number }).analysis_attempts;
    const input = await loadAnalysisInput(this.o.sql, row);
    if (!input) {
      await settleAnalysis(this.o.sql, row.id, this.claimId, { status: 'error', analysis: FAILED, error: 'The agent version no longer exists' });
      return;
    }
    try {
      const analysis = await analyze(this.o.inference, {
        model: analysisModel(input.config),
        analysis: input.config.analysis as AnalysisConfig,
        transcript: input.messages,
        signal,
        teamId: row.team_id,
        requestId: row.id,
        timeoutMs: this.timeoutMs,
      });
      if (await settleAnalysis(this.o.sql, row.id, this.claimId, { status: 'completed', analysis, error: null })) {
        this.o.log.info({ sessionId: row.id, attempt: attempts }, 'session analysed');
        this.o.onSettled?.(row.id);
      }
    } catch (err) {
      if (signal.aborted) {
        await releaseAnalysis(this.o.sql, row.id, this.claimId, { delayMs: 0, uncount: true });
        return;
      }
      const last = attempts >= this.maxAttempts;
      this.o.log.warn({ err, sessionId: row.id, attempt: attempts, final: last }, 'analysis attempt failed');
      if (!last) {
        const delayMs = this.backoffMs[Math.min(attempts - 1, this.backoffMs.length - 1)] ?? 0;
        await releaseAnalysis(this.o.sql, row.id, this.claimId, { delayMs });
        return;
      }
      if (await settleAnalysis(this.o.sql, row.id, this.claimId, { status: 'error', analysis: FAILED, error: 'Analysis failed' })) this.o.onSettled?.(row.id);
    }
  }
}
