-- Voice design (issue 22): a voice model saved from a designed candidate speaks with the
-- backend's own voice id for the design (SaveVoice's answer), not by cloning its samples.
alter table voice_models add column backend_voice_id text;

-- Each successful POST /v1/voice-design is metered once (kind voice_designs, amount 1).
alter table usage drop constraint usage_kind_check;
alter table usage add constraint usage_kind_check check (kind in ('tts_characters', 'asr_seconds', 'voice_designs'));
