-- Phone numbers (issue 9): the numbers a team rents from a carrier, and their daily rental.
create table phone_numbers (
  id text primary key,
  team_id text not null references teams(id) on delete cascade,
  -- E.164
  phone_number text not null,
  -- `sandbox` | `managed` | `sip` (D-PHONE-1)
  provider text not null,
  label text not null default '',
  -- unbinding or deleting the agent leaves the number unbound (it rings busy)
  agent_id text references agents(id) on delete set null,
  -- `provisioning` | `active` | `suspended` | `error` | `released` (`released` is internal)
  status text not null default 'provisioning',
  status_detail text,
  -- the carrier's own handle of the number, when it gives one
  carrier_ref text,
  -- price of one rental day, fixed at purchase, in micro-units
  daily_price_micros bigint not null,
  -- rental is paid up to here; the periodic job charges the next day when it is reached
  paid_through timestamptz not null,
  -- when the job next looks at this number (paid_through, or a retry time while unpaid)
  next_charge_at timestamptz not null,
  -- start of the first unpaid day while the team is out of credit, else null
  unpaid_since timestamptz,
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default clock_timestamp(),
  released_at timestamptz
);
-- A number is held by at most one live row on the whole platform (the 409). Error and
-- released rows hold nothing.
create unique index phone_numbers_held on phone_numbers(phone_number) where status in ('provisioning', 'active', 'suspended');
create index phone_numbers_team_created on phone_numbers(team_id, created_at desc, id desc) where status <> 'released';
create index phone_numbers_due on phone_numbers(next_charge_at) where status in ('active', 'suspended');
create index phone_numbers_provisioning on phone_numbers(created_at) where status = 'provisioning';

-- Live numbers per team, kept beside the credit on the team row so that ONE conditional
-- UPDATE checks the cap and the credit together (concurrent purchases queue on the row and
-- the re-checked condition sees the other purchase's count).
alter table teams add column live_phone_numbers integer not null default 0;
