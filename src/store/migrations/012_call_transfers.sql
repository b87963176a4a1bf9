-- Transfer minutes (docs/api/phone.md "Transfers": billed separately; issue 9): one row per
-- handed-off call (cold transfer or warm merge), from the handoff to the end of the human leg,
-- charged per started minute at PARLEY_TRANSFER_PRICE_PER_MINUTE fixed at the handoff. The
-- charge is a `transfer_usage` credit_ledger entry whose ref is the row's id.
create table call_transfers (
  id text primary key,
  team_id text not null references teams(id) on delete cascade,
  session_id text not null references sessions(id) on delete cascade,
  -- `cold` | `warm`
  mode text not null,
  -- E.164 of the human the call went to
  destination text not null,
  started_at timestamptz not null,
  ended_at timestamptz,
  minutes integer not null default 0,
  price_per_minute_micros bigint not null,
  cost_micros bigint not null default 0
);
create index call_transfers_session on call_transfers(session_id);
create index call_transfers_team on call_transfers(team_id, started_at);
