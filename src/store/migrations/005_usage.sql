-- Metered speech usage: characters synthesized and seconds transcribed, per team and call.
-- Each row is settled against the team's credit (a negative credit_ledger entry with
-- ref 'usage:<id>') in the same transaction that records it.
create table usage (
  id bigserial primary key,
  team_id text not null references teams(id) on delete cascade,
  kind text not null check (kind in ('tts_characters', 'asr_seconds')),
  model text not null,
  amount double precision not null check (amount >= 0),
  cost_micros bigint not null default 0,
  created_at timestamptz not null default clock_timestamp()
);
create index usage_team on usage(team_id, created_at);
