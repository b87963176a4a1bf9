-- Node liveness (docs/api/sessions.md "A node lost"): each platform node writes when it was last
-- alive; the sessions a node held when it stopped beating are ended `node_lost` by another node
-- (or by the same node id when it starts again).
create table nodes (
  id text primary key,
  seen_at timestamptz not null
);
