import { basename } from 'node:path';
import { z } from 'zod';
import { splitSentences } from '../../actors/sentences.ts';
import { ServiceError, notFound, type FieldError } from '../errors.ts';
import type { Principal } from '../auth/principal.ts';
import { issuesToFields } from '../validation.ts';
import { newId } from '../ids.ts';
import type { Sql } from '../store/db.ts';
import {
  agentsUsingKnowledgeSource, currentKnowledgeRevisions, deleteKnowledgeSource, getKnowledgeSource, insertKnowledgeSource,
  listKnowledgeSources, searchKnowledge, updateKnowledgeSource,
  type KnowledgeHit, type KnowledgeRef, type KnowledgeSourceRow, type KnowledgeUpload,
} from './store.ts';
import type { PageRequest } from '../store/paginate.ts';
import { AgentService } from '../agents/service.ts';

/** Largest accepted file: 1 MB (1,048,576 bytes) of text (docs/api/knowledge.md). */
export const KNOWLEDGE_MAX_BYTES = 1024 * 1024;
/** The route's body limit: the file plus room for the multipart framing and text fields. Past it → 413. */
export const KNOWLEDGE_BODY_LIMIT = KNOWLEDGE_MAX_BYTES + 64 * 1024;
const TEXT_EXTENSIONS = /\.(md|markdown|txt)$/i;
export const NOT_TEXT = 'Knowledge source must be UTF-8 plain text';
export const EMPTY = 'Knowledge source file is empty';
export const TOO_LARGE = `Knowledge source exceeds 1 MB (${KNOWLEDGE_MAX_BYTES} bytes)`;

const nameSchema = z.string().min(1).max(120);
const descriptionSchema = z.string().max(2000);

/** The form's text fields (the `source` file is checked by hand: zod has no multipart file type). */
const formText = z.strictObject({ name: nameSchema.optional(), description: descriptionSchema.optional() });

/** For the OpenAPI document: the multipart form of create and update. */
export const knowledgeCreateForm = z.object({
  source: z.string().meta({ format: 'binary', description: 'UTF-8 plain text (.md, .markdown or .txt), 1 byte to 1 MB' }),
  name: nameSchema.optional().meta({ description: 'Defaults to the file name' }),
  description: descriptionSchema.optional(),
});
export const knowledgePatchForm = knowledgeCreateForm.partial();
export const knowledgeListQuery = z.strictObject({ search: z.string().max(200).optional() });

export const knowledgeSummary = z.object({
  knowledge_source_id: z.string(),
  workspace_id: z.string(),
  name: z.string(),
  description: z.string(),
  file_name: z.string(),
  size_bytes: z.number().int(),
  chunk_count: z.number().int(),
  revision_number: z.number().int(),
  created_at: z.string(),
  updated_at: z.string(),
});
export const knowledgeEntity = knowledgeSummary.extend({ content: z.string() });
export const knowledgeAgentsBody = z.object({ agents: z.array(z.object({ agent_id: z.string(), name: z.string() })), total: z.number().int() });
export type KnowledgeSummary = z.infer<typeof knowledgeSummary>;
export type KnowledgeEntity = z.infer<typeof knowledgeEntity>;

export function toKnowledgeSummary(r: KnowledgeSourceRow): KnowledgeSummary {
  return {
    knowledge_source_id: r.id,
    workspace_id: r.workspace_id,
    name: r.name,
    description: r.description,
    file_name: r.file_name,
    size_bytes: r.size_bytes,
    chunk_count: r.chunk_count,
    revision_number: r.revision_number,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

export function toKnowledgeEntity(r: KnowledgeSourceRow): KnowledgeEntity {
  return { ...toKnowledgeSummary(r), content: r.content ?? '' };
}

/** A parsed upload form: text fields validated, the file not yet judged. */
export interface KnowledgeForm {
  name?: string;
  description?: string;
  file?: { fileName: string; data: Buffer };
}

/** An upload form as the transport parsed it: text fields and files by name. */
export interface UploadForm {
  fields: Record<string, string | string[]>;
  files: Record<string, { filename?: string; data: Buffer }[]>;
}

/**
 * Reads the upload form. Field-level problems (unknown fields, a `source` that is not a
 * file, a missing `source` on create, lengths) → 422 at `['body', field]`.
 */
export function readKnowledgeForm({ fields, files }: UploadForm, requireSource: boolean): KnowledgeForm {
  const errors: FieldError[] = [];
  const text: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(fields)) {
    if (k === 'source') errors.push({ type: 'file_type', loc: ['body', 'source'], msg: 'Input should be a file', ctx: {} });
    else text[k] = v; // a repeated field arrives as an array and fails as a non-string
  }
  let file: UploadForm['files'][string][number] | undefined;
  for (const [k, list] of Object.entries(files)) {
    if (k !== 'source') {
      if (k === 'name' || k === 'description') errors.push({ type: 'string_type', loc: ['body', k], msg: 'Input should be a valid string', ctx: { expected: 'string' } });
      else errors.push({ type: 'extra_forbidden', loc: ['body', k], msg: 'Extra inputs are not permitted', ctx: {} });
      continue;
    }
    if (list.length > 1) errors.push({ type: 'value_error', loc: ['body', 'source'], msg: 'Exactly one file is allowed', ctx: {} });
    file = list[0];
  }
  const parsed = formText.safeParse(text, { reportInput: true });
  if (!parsed.success) errors.push(...issuesToFields('body', parsed.error.issues));
  if (requireSource && !file && !('source' in fields)) errors.push({ type: 'missing', loc: ['body', 'source'], msg: 'Field required', ctx: {} });
  if (errors.length) throw new ServiceError('invalid', 'Validation failed', { fields: errors });
  const out: KnowledgeForm = { ...parsed.data! };
  if (file) out.file = { fileName: basename((file.filename ?? '').replace(/\\/g, '/')).slice(0, 255), data: file.data };
  return out;
}

const decoder = new TextDecoder('utf-8', { fatal: true });

/** Judges the file (400s: empty, too large, not UTF-8 plain text) and cuts it into passages. */
export function toUpload(file: { fileName: string; data: Buffer }): KnowledgeUpload {
  if (file.data.length === 0) throw new ServiceError('bad_request', EMPTY);
  if (file.data.length > KNOWLEDGE_MAX_BYTES) throw new ServiceError('bad_request', TOO_LARGE);
  if (!TEXT_EXTENSIONS.test(file.fileName)) throw new ServiceError('bad_request', NOT_TEXT);
  let content: string;
  try {
    content = decoder.decode(file.data); // a leading BOM is dropped
  } catch {
    throw new ServiceError('bad_request', NOT_TEXT);
  }
  if (content.includes('\0')) throw new ServiceError('bad_request', NOT_TEXT);
  return { fileName: file.fileName, sizeBytes: file.data.length, content, chunks: chunkText(content) };
}

/**
 * Cuts text into passages for full-text search: paragraphs (blank-line separated) packed
 * greedily up to `max` characters; a paragraph longer than `max` is cut at sentence ends,
 * and a sentence longer than `max` at the last space before `max` (or at `max`). Passages
 * therefore run up to `max` characters and usually past `min` unless the text ends.
 */
export function chunkText(text: string, max = 800): string[] {
  const units: { text: string; sep: string }[] = [];
  for (const para of text.replace(/\r\n?/g, '\n').split(/\n[ \t]*\n/)) {
    const p = para.trim();
    if (!p) continue;
    if (p.length <= max) {
      units.push({ text: p, sep: '\n\n' });
      continue;
    }
    let first = true;
    for (const sentence of splitSentences(p)) {
      for (const piece of hardSplit(sentence.trim(), max)) {
        if (!piece) continue;
        units.push({ text: piece, sep: first ? '\n\n' : ' ' });
        first = false;
      }
    }
  }
  const chunks: string[] = [];
  let cur = '';
  for (const u of units) {
    if (cur && cur.length + u.sep.length + u.text.length > max) {
      chunks.push(cur);
      cur = '';
    }
    cur = cur ? cur + u.sep + u.text : u.text;
  }
  if (cur) chunks.push(cur);
  return chunks;
}

function hardSplit(s: string, max: number): string[] {
  const out: string[] = [];
  let rest = s;
  while (rest.length > max) {
    let cut = rest.lastIndexOf(' ', max);
    if (cut < max / 2) cut = max;
    const code = rest.charCodeAt(cut - 1);
    if (code >= 0xd800 && code <= 0xdbff) cut -= 1; // never split a surrogate pair
    out.push(rest.slice(0, cut).trim());
    rest = rest.slice(cut).trim();
  }
  if (rest) out.push(rest);
  return out;
}

/** Knowledge sources, independent of HTTP. */
export class KnowledgeService {
  constructor(private readonly sql: Sql) {}

  async create(p: Principal, form: KnowledgeForm): Promise<KnowledgeEntity> {
    AgentService.requireBeta(p);
    const upload = toUpload(form.file!);
    const name = form.name ?? (upload.fileName.slice(0, 120) || 'untitled');
    const row = await insertKnowledgeSource(this.sql, { id: newId('ks'), teamId: p.teamId, name, description: form.description ?? '', upload });
    return toKnowledgeEntity(row);
  }

  async get(p: Principal, id: string): Promise<KnowledgeSourceRow> {
    const row = await getKnowledgeSource(this.sql, p.teamId, id);
    if (!row) throw notFound('Knowledge source');
    return row;
  }

  list(p: Principal, f: { search?: string }, page: PageRequest) {
    return listKnowledgeSources(this.sql, p.teamId, f, page);
  }

  async update(p: Principal, id: string, form: KnowledgeForm): Promise<KnowledgeEntity> {
    const upload = form.file ? toUpload(form.file) : undefined;
    const row = await updateKnowledgeSource(this.sql, p.teamId, id, { name: form.name, description: form.description, upload });
    if (!row) throw notFound('Knowledge source');
    return toKnowledgeEntity(row);
  }

  async delete(p: Principal, id: string): Promise<void> {
    const r = await deleteKnowledgeSource(this.sql, p.teamId, id);
    if (r.deleted) return;
    if (r.missing) throw notFound('Knowledge source');
    throw new ServiceError('conflict', `Knowledge source is attached to ${r.attached} agent(s). Detach it first.`);
  }

  async agents(p: Principal, id: string): Promise<{ agents: { agent_id: string; name: string }[]; total: number }> {
    await this.get(p, id);
    const agents = await agentsUsingKnowledgeSource(this.sql, p.teamId, id);
    return { agents, total: agents.length };
  }

  /** The revisions publish pins for the team's live sources in `ids`. */
  currentRevisions(teamId: string, ids: readonly string[]): Promise<KnowledgeRef[]> {
    return currentKnowledgeRevisions(this.sql, teamId, ids);
  }

  /** Best passages for `query` among the pinned revisions (see `searchKnowledge`). */
  search(refs: readonly KnowledgeRef[], query: string, limit = 5): Promise<KnowledgeHit[]> {
    return searchKnowledge(this.sql, refs, query, limit);
  }
}
