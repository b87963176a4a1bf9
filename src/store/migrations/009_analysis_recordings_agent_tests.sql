-- Post-call analysis (docs/api/analysis.md), recordings (docs/api/recordings.md) and agent
-- tests (docs/api/agent-tests.md), issue 8.

-- Analysis lives on the session row. The row is the job: the statement that ends a session
-- sets `analysis_status` to `queued` (or settles it as `skipped`), and the analysis worker on
-- any node claims due rows with FOR UPDATE SKIP LOCKED under a lease, so a queued analysis
-- survives every restart. `analysis` holds the settled entity (null until settled).
alter table sessions add column analysis_status text;
alter table sessions add column analysis jsonb;
alter table sessions add column analysis_attempts integer not null default 0;
alter table sessions add column analysis_due_at timestamptz;
alter table sessions add column analysis_lease_until timestamptz;
alter table sessions add column analysis_claim text;
alter table sessions add column analysis_finished_at timestamptz;
create index sessions_analysis_due on sessions (analysis_due_at) where analysis_status in ('queued', 'running');

-- One row per recorded speaker of a session. `storage` says where the bytes are (`local`:
-- a file under PARLEY_RECORDINGS_DIR; `s3`: an object in the configured bucket), `object_key`
-- the path inside it.
create table session_recordings (
  session_id text not null references sessions(id) on delete cascade,
  -- agent | user
  role text not null,
  -- active | complete | failed
  status text not null default 'active',
  storage text not null,
  object_key text not null,
  content_type text not null default 'audio/wav',
  size_bytes bigint,
  duration_ms integer,
  started_at timestamptz not null default clock_timestamp(),
  ended_at timestamptz,
  error text,
  error_code text,
  primary key (session_id, role)
);

-- Agent tests: a scripted user conversation run as text against an agent, judged by criteria.
create table agent_tests (
  id text primary key,
  team_id text not null references teams(id) on delete cascade,
  workspace_id text not null,
  agent_id text not null,
  name text not null,
  -- ["user turn", ...]
  user_turns jsonb not null,
  -- [{name, description}] or null: the agent's analysis criteria
  criteria jsonb,
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default clock_timestamp()
);
create index agent_tests_team_created on agent_tests (team_id, created_at desc, id desc);

create table agent_test_runs (
  id text primary key,
  test_id text not null references agent_tests(id) on delete cascade,
  team_id text not null,
  agent_id text not null,
  -- null: the draft
  version_number integer,
  config_hash text not null,
  -- pass | fail | error
  verdict text not null,
  transcript jsonb not null,
  criteria_results jsonb not null,
  error text,
  latency_ms integer not null,
  created_at timestamptz not null default clock_timestamp()
);
create index agent_test_runs_test_created on agent_test_runs (test_id, created_at desc, id desc);
