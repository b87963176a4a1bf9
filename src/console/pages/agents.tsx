/** Agents: the list with search and pages, New agent, delete with confirmation. */
import { useState } from 'preact/hooks';
import { useLocation } from 'preact-iso';
import { agents, type Agent } from '../api.ts';
import { useTitle } from '../app.tsx';
import { ConfirmButton, Form, Loading, Pager, Problem, TextField, TextArea, When, useAction, useLoad } from '../ui.tsx';

const PAGE_SIZE = 20;

export default function Agents() {
  useTitle('Agents');
  const { route } = useLocation();
  const [search, setSearch] = useState('');
  const [query, setQuery] = useState('');
  const [page, setPage] = useState(1);
  const list = useLoad(() => agents.list({ search: query || undefined, page, page_size: PAGE_SIZE }), [query, page]);
  const [creating, setCreating] = useState(false);
  const remove = useAction(async (a: Agent) => {
    await agents.remove(a.agent_id);
    list.reload();
  });
  return (
    <>
      <div class="page-head">
        <h1>Agents</h1>
        <button type="button" class="primary" aria-expanded={creating} onClick={() => setCreating(!creating)}>New agent</button>
      </div>
      {creating && <NewAgent onCreated={(a) => route(`/agents/${a.agent_id}`)} onCancel={() => setCreating(false)} />}
      <form class="inline" role="search" aria-label="Search agents" onSubmit={(e) => { e.preventDefault(); setPage(1); setQuery(search); }}>
        <TextField label="Search by name" name="search" type="search" value={search} onInput={setSearch} />
        <button type="submit">Search</button>
      </form>
      <Problem error={list.error ?? remove.error} />
      {list.loading && !list.data ? <Loading /> : list.data && (
        list.data.items.length === 0 ? (
          <p>{query ? `No agent's name matches “${query}”.` : 'No agents yet: press New agent to create one.'}</p>
        ) : (
          <div class="table-wrap" tabIndex={0}>
            <table class="stack">
              <caption class="visually-hidden">Your agents</caption>
              <thead><tr><th scope="col">Name</th><th scope="col">State</th><th scope="col">Updated</th><th scope="col"><span class="visually-hidden">Actions</span></th></tr></thead>
              <tbody>
                {list.data.items.map((a) => (
                  <tr key={a.agent_id}>
                    <td><a href={`/agents/${a.agent_id}`}>{a.name}</a>{a.description && <div class="muted small">{a.description}</div>}</td>
                    <td><span class={`badge ${a.publication_state}`}>{a.publication_state === 'live' ? 'Published' : 'Draft only'}</span></td>
                    <td><When at={a.updated_at} /></td>
                    <td class="actions">
                      <a href={`/agents/${a.agent_id}/test`}>Test call</a>
                      <ConfirmButton label="Delete" subject={a.name} question={`Delete ${a.name} with its draft and versions?`} confirmLabel="Delete" onConfirm={() => remove.run(a)} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )
      )}
      {list.data && <Pager label="Agents" page={page} pageSize={PAGE_SIZE} total={list.data.total} hasMore={list.data.hasMore} onPage={setPage} />}
    </>
  );
}

function NewAgent({ onCreated, onCancel }: { onCreated: (a: Agent) => void; onCancel: () => void }) {
  const [name, setName] = useState('');
  const [description, setDescription] = useState('');
  const create = useAction(async () => onCreated(await agents.create({ name, ...(description ? { description } : {}) })));
  return (
    <section class="card" aria-labelledby="new-agent">
      <h2 id="new-agent">New agent</h2>
      <Form error={create.error} onSubmit={() => create.run()} label="New agent">
        <TextField label="Name" name="name" value={name} onInput={setName} required focus />
        <TextArea label="Description" name="description" value={description} onInput={setDescription} rows={2} />
        <div class="buttons">
          <button type="submit" class="primary" disabled={create.pending}>Create agent</button>
          <button type="button" onClick={onCancel}>Cancel</button>
        </div>
      </Form>
    </section>
  );
}
