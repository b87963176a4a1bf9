/** Knowledge: upload a text file, the list, the agents using each source, delete (a 409 explained). */
import { useState } from 'preact/hooks';
import { ApiError, knowledge, type KnowledgeSource } from '../api.ts';
import { useTitle } from '../app.tsx';
import { ConfirmButton, FileField, Form, Loading, Pager, Problem, TextArea, TextField, When, useAction, useLoad } from '../ui.tsx';

const PAGE_SIZE = 20;

export default function Knowledge() {
  useTitle('Knowledge');
  const [page, setPage] = useState(1);
  const list = useLoad(() => knowledge.list({ page, page_size: PAGE_SIZE }), [page]);
  return (
    <>
      <h1>Knowledge</h1>
      <Upload onUploaded={() => { setPage(1); list.reload(); }} />
      <h2>Sources</h2>
      <Problem error={list.error} />
      {list.loading && !list.data ? <Loading /> : list.data && (list.data.items.length === 0 ? <p>No knowledge sources yet.</p> : (
        <ul class="plain">
          {list.data.items.map((s) => <Source key={s.knowledge_source_id} source={s} onDeleted={list.reload} />)}
        </ul>
      ))}
      {list.data && <Pager label="Knowledge sources" page={page} pageSize={PAGE_SIZE} total={list.data.total} hasMore={list.data.hasMore} onPage={setPage} />}
    </>
  );
}

function Upload({ onUploaded }: { onUploaded: () => void }) {
  const [file, setFile] = useState<File | null>(null);
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const [done, setDone] = useState<string | null>(null);
  const upload = useAction(async () => {
    if (!file) throw new ApiError(422, 'Choose a text file to upload.', [{ type: 'missing', loc: ['body', 'source'], msg: 'Choose a UTF-8 text file (.txt, .md), up to 1 MB' }]);
    const form = new FormData();
    form.set('source', file, file.name);
    if (name) form.set('name', name);
    if (description) form.set('description', description);
    const s = await knowledge.upload(form);
    setDone(`Uploaded ${s.name}: ${s.chunk_count} passages indexed.`);
    setName('');
    setDescription('');
    onUploaded();
  });
  return (
    <section class="card" aria-labelledby="upload-h">
      <h2 id="upload-h">Upload a text file</h2>
      <Form error={upload.error} onSubmit={() => upload.run()} label="Upload a knowledge source">
        <FileField label="Text file" name="source" accept=".txt,.md,.markdown,text/plain,text/markdown" onChange={(f) => { setDone(null); setFile(f[0] ?? null); }} hint="UTF-8 plain text or Markdown, up to 1 MB" />
        <TextField label="Name" name="name" value={name} onInput={setName} hint="Default: the file's name" />
        <TextArea label="Description" name="description" rows={2} value={description} onInput={setDescription} />
        <button type="submit" class="primary" disabled={upload.pending}>Upload</button>
      </Form>
      {done && <p class="ok" role="status">{done}</p>}
    </section>
  );
}

function Source({ source, onDeleted }: { source: KnowledgeSource; onDeleted: () => void }) {
  const users = useLoad(() => knowledge.agents(source.knowledge_source_id), [source.knowledge_source_id]);
  const remove = useAction(async () => {
    try {
      await knowledge.remove(source.knowledge_source_id);
    } catch (err) {
      if (err instanceof ApiError && err.status === 409) {
        users.reload();
        throw new Error(`${err.message} Remove it from the Knowledge section of the agents listed (and save), then delete it.`);
      }
      throw err;
    }
    onDeleted();
  });
  return (
    <li class="card">
      <h3>{source.name}</h3>
      {source.description && <p>{source.description}</p>}
      <p class="muted small">{source.file_name}, {source.size_bytes.toLocaleString()} bytes, {source.chunk_count} passages, revision {source.revision_number}, uploaded <When at={source.created_at} /></p>
      <p>
        Used by:{' '}
        {users.data ? (users.data.length === 0 ? 'no agent' : users.data.map((a, i) => <span key={a.agent_id}>{i > 0 && ', '}<a href={`/agents/${a.agent_id}`}>{a.name}</a></span>)) : '…'}
      </p>
      <ConfirmButton label="Delete" subject={source.name} question={`Delete ${source.name}?`} confirmLabel="Delete" onConfirm={() => remove.run()} />
      <Problem error={remove.error ?? users.error} />
    </li>
  );
}
