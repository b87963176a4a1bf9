-- Conversation sessions (issue 7) and their transcript / tool-call items.
-- The columns the session runtime reads and writes are fixed by docs/sessions-contract.md.
create table sessions (
  id text primary key,
  team_id text not null references teams(id) on delete cascade,
  -- no foreign key: deleting an agent keeps its session records
  agent_id text not null,
  agent_name text not null,
  version_number integer not null,
  config_hash text not null,
  name text,
  source text not null,
  direction text not null default 'inbound',
  status text not null default 'pending',
  transport text not null,
  expires_at timestamptz not null,
  max_duration_seconds integer not null,
  -- the overrides in effect (every one was allowed; refused ones fail the request)
  overrides jsonb not null default '{}',
  -- caller variables, without `secret__` ones (those live sealed in secret_variables)
  dynamic_variables jsonb not null default '{}',
  -- SecretBox-sealed JSON object of the `secret__` variables, or null
  secret_variables text,
  tool_events boolean not null default true,
  end_user_id text,
  -- `json`, not `jsonb`: keeps the caller's key order and text verbatim
  metadata json not null default '{}',
  record_audio boolean not null,
  timezone text not null,
  client_timezone text,
  world_context boolean not null default true,
  -- price per started minute at creation, and the net amount the team paid for this session
  price_per_minute_micros bigint not null default 0,
  charged_micros bigint not null default 0,
  caller_number text,
  dialed_number text,
  dial_status text,
  answered_by text,
  created_at timestamptz not null default clock_timestamp(),
  started_at timestamptz,
  ended_at timestamptz,
  ended_reason text,
  node_id text,
  metrics jsonb,
  token_hash text not null
);
create index sessions_team_created on sessions(team_id, created_at desc, id desc);
create index sessions_team_agent_created on sessions(team_id, agent_id, created_at desc, id desc);

create table session_items (
  session_id text not null references sessions(id) on delete cascade,
  seq integer not null,
  type text not null,
  payload jsonb not null,
  created_at timestamptz not null default clock_timestamp(),
  primary key (session_id, seq)
);
