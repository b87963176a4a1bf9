-- Phone calls (issue 9, "Calls"): outbound limits and idempotency of POST /v1/agent/phone-calls.
-- Sessions of calls live in `sessions` (source `phone`, direction, caller/dialed number, dial status).

-- Outbound call attempts per team and UTC day: the daily limit (refused attempts count).
create table phone_call_days (
  team_id text not null references teams(id) on delete cascade,
  day date not null,
  attempts integer not null default 0,
  primary key (team_id, day)
);

-- `Idempotency-Key` of POST /v1/agent/phone-calls: replayed for 24 h. `response` is null while
-- the first request is still being handled (a concurrent retry gets 409).
create table phone_call_requests (
  team_id text not null references teams(id) on delete cascade,
  key text not null,
  body_hash text not null,
  status integer,
  response jsonb,
  created_at timestamptz not null default clock_timestamp(),
  primary key (team_id, key)
);

-- Calls in progress (ringing or live) per team: the concurrency limit.
create index sessions_outbound_live on sessions(team_id) where source = 'phone' and direction = 'outbound' and status in ('pending', 'active');
