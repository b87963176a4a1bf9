-- Teams, API keys, credit and the agents resource.
create table teams (
  id text primary key,
  name text not null,
  beta_access boolean not null default false,
  -- credit in micro-units of the billing currency (1,000,000 = 1.00)
  credit_micros bigint not null default 0,
  created_at timestamptz not null default clock_timestamp()
);

create table api_keys (
  id text primary key,
  team_id text not null references teams(id) on delete cascade,
  name text not null default '',
  -- short visible prefix of the key, for listing; the key itself is never stored
  prefix text not null,
  -- hex SHA-256 of the full key
  key_hash text not null unique,
  created_at timestamptz not null default clock_timestamp(),
  expires_at timestamptz,
  revoked_at timestamptz
);
create index api_keys_team on api_keys(team_id);

create table credit_ledger (
  id bigserial primary key,
  team_id text not null references teams(id) on delete cascade,
  amount_micros bigint not null,
  reason text not null,
  ref text,
  created_at timestamptz not null default clock_timestamp()
);
create index credit_ledger_team on credit_ledger(team_id, id);

create table agents (
  id text primary key,
  team_id text not null references teams(id) on delete cascade,
  workspace_id text not null,
  name text not null,
  description text not null default '',
  status text not null default 'active',
  public_enabled boolean not null default false,
  allowed_origins jsonb not null default '[]',
  overrides_allowed jsonb not null default '[]',
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default clock_timestamp()
);
create index agents_team_created on agents(team_id, created_at desc, id desc);

create table agent_drafts (
  agent_id text primary key references agents(id) on delete cascade,
  config jsonb not null,
  config_hash text not null,
  updated_at timestamptz not null default clock_timestamp()
);

create table agent_versions (
  agent_id text not null references agents(id) on delete cascade,
  version_number integer not null,
  config jsonb not null,
  config_hash text not null,
  version_title text,
  version_description text,
  published_at timestamptz not null default clock_timestamp(),
  primary key (agent_id, version_number)
);
