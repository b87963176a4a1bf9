/** The links between an agent's pages. */
export function AgentNav({ id, current }: { id: string; current: 'agent' | 'test' }) {
  return (
    <nav class="subnav" aria-label="Agent">
      <a href={`/agents/${id}`} aria-current={current === 'agent' ? 'page' : undefined}>Agent</a>
      <a href={`/agents/${id}/test`} aria-current={current === 'test' ? 'page' : undefined}>Test call</a>
      <a href={`/sessions?agent_id=${encodeURIComponent(id)}`}>Sessions</a>
    </nav>
  );
}
