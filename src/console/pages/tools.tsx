/** Tools: the workspace's webhook and client tools. */
import { useState } from 'preact/hooks';
import { tools } from '../api.ts';
import { useTitle } from '../app.tsx';
import { Loading, Pager, Problem, TextField, useLoad } from '../ui.tsx';

const PAGE_SIZE = 20;

export default function Tools() {
  useTitle('Tools');
  const [search, setSearch] = useState('');
  const [query, setQuery] = useState('');
  const [page, setPage] = useState(1);
  const list = useLoad(() => tools.list({ search: query || undefined, page, page_size: PAGE_SIZE }), [query, page]);
  return (
    <>
      <div class="page-head">
        <h1>Tools</h1>
        <a class="button primary" href="/tools/new">New tool</a>
      </div>
      <form class="inline" role="search" aria-label="Search tools" onSubmit={(e) => { e.preventDefault(); setPage(1); setQuery(search); }}>
        <TextField label="Search by name" name="search" type="search" value={search} onInput={setSearch} />
        <button type="submit">Search</button>
      </form>
      <Problem error={list.error} />
      {list.loading && !list.data ? <Loading /> : list.data && (list.data.items.length === 0 ? <p>{query ? 'No tool matches.' : 'No tools yet: press New tool to create one.'}</p> : (
        <div class="table-wrap" tabIndex={0}>
          <table class="stack">
            <caption class="visually-hidden">Workspace tools</caption>
            <thead><tr><th scope="col">Name</th><th scope="col">Type</th><th scope="col">Request</th><th scope="col" class="num">Agents</th></tr></thead>
            <tbody>
              {list.data.items.map((tool) => (
                <tr key={tool.tool_id}>
                  <td><a href={`/tools/${tool.tool_id}`}>{tool.name}</a>{tool.description && <div class="muted small">{tool.description}</div>}</td>
                  <td>{tool.tool_type}</td>
                  <td>{tool.tool_type === 'webhook' ? <code>{tool.method} {tool.url}</code> : '—'}</td>
                  <td class="num">{tool.used_by}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ))}
      {list.data && <Pager label="Tools" page={page} pageSize={PAGE_SIZE} total={list.data.total} hasMore={list.data.hasMore} onPage={setPage} />}
    </>
  );
}
