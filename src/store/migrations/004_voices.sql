-- Voice models (/model): saved voices a team created from sample recordings.
create table voice_models (
  id text primary key,
  team_id text not null references teams(id) on delete cascade,
  type text not null default 'tts',
  title text not null,
  description text not null default '',
  -- public: listed for every team; unlist: usable and readable by id by any team; private: the team only
  visibility text not null default 'private',
  train_mode text not null default 'fast',
  -- created | training | trained | failed; only trained voices can be synthesized with
  state text not null default 'trained',
  tags jsonb not null default '[]',
  languages jsonb not null default '[]',
  cover_image bytea,
  cover_type text,
  created_at timestamptz not null default clock_timestamp(),
  updated_at timestamptz not null default clock_timestamp()
);
create index voice_models_team_created on voice_models(team_id, created_at desc, id desc);
create index voice_models_public_created on voice_models(created_at desc, id desc) where visibility = 'public';

-- The recordings of a voice, decoded to mono 16-bit little-endian PCM at 24 kHz.
create table voice_samples (
  model_id text not null references voice_models(id) on delete cascade,
  ordinal integer not null,
  title text not null default '',
  text text not null default '',
  sample_rate_hz integer not null,
  duration_ms integer not null,
  pcm bytea not null,
  primary key (model_id, ordinal)
);
