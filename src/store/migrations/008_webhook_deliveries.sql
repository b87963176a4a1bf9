-- Post-call webhook deliveries (issue 8). One row per (session, endpoint, event), inserted by
-- the statement that ends the session; the row is the truth, so a delivery survives any node's
-- restart. Workers on every node claim due rows with FOR UPDATE SKIP LOCKED under a lease.
create table webhook_deliveries (
  id text primary key,
  team_id text not null,
  session_id text not null references sessions(id) on delete cascade,
  -- position of the endpoint in the version's webhooks.post_call list
  endpoint_index integer not null,
  url text not null,
  -- the version's SecretBox-sealed signing secret, or null: unsigned
  secret_sealed text,
  event text not null,
  -- order within (session, endpoint): call.ended 1, call.analyzed 2; a row waits for lower ones
  seq integer not null,
  -- the exact bytes of every attempt
  body text not null,
  -- pending | delivering | delivered | failed
  status text not null default 'pending',
  attempts integer not null default 0,
  next_attempt_at timestamptz,
  -- a claim is the worker's until lease_until; an expired lease is claimed again
  lease_until timestamptz,
  claim_id text,
  last_status_code integer,
  last_error text,
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default clock_timestamp(),
  delivered_at timestamptz,
  unique (session_id, endpoint_index, seq)
);
create index webhook_deliveries_due on webhook_deliveries (next_attempt_at) where status = 'pending';
create index webhook_deliveries_leased on webhook_deliveries (lease_until) where status = 'delivering';
