-- Workspace webhook tools and knowledge sources.
create table tools (
  id text primary key,
  team_id text not null references teams(id) on delete cascade,
  workspace_id text not null,
  name text not null,
  description text not null default '',
  tool_type text not null default 'webhook',
  method text not null default 'POST',
  url text not null default '',
  content_type text not null default 'application/json',
  body_template text not null default '',
  arguments jsonb not null default '[]',
  -- [{name, kind, secret, value (plain, non-secret headers only), sealed (secret headers only)}]
  headers jsonb not null default '[]',
  timeout_seconds integer not null default 30,
  error_handling text not null default 'passthrough',
  execution_mode text not null default 'blocking',
  expects_response boolean not null default true,
  mock_responses jsonb not null default '[]',
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default clock_timestamp()
);
create index tools_team_created on tools(team_id, created_at desc, id desc);

create table knowledge_sources (
  id text primary key,
  team_id text not null references teams(id) on delete cascade,
  workspace_id text not null,
  name text not null,
  description text not null default '',
  -- the current (newest) revision, denormalised for reads and lists
  revision_number integer not null,
  file_name text not null,
  size_bytes integer not null,
  chunk_count integer not null,
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default clock_timestamp(),
  -- soft delete: a deleted source is missing to every route, but the revisions stay so
  -- older published versions that pinned one keep their content
  deleted_at timestamptz
);
create index knowledge_sources_team_created on knowledge_sources(team_id, created_at desc, id desc);

create table knowledge_revisions (
  source_id text not null references knowledge_sources(id) on delete cascade,
  revision_number integer not null,
  file_name text not null,
  size_bytes integer not null,
  content text not null,
  chunk_count integer not null,
  created_at timestamptz not null default clock_timestamp(),
  primary key (source_id, revision_number)
);

create table knowledge_chunks (
  source_id text not null,
  revision_number integer not null,
  ordinal integer not null,
  text text not null,
  tsv tsvector generated always as (to_tsvector('simple', text)) stored,
  primary key (source_id, revision_number, ordinal),
  foreign key (source_id, revision_number) references knowledge_revisions(source_id, revision_number) on delete cascade
);
create index knowledge_chunks_tsv on knowledge_chunks using gin(tsv);
