-- Preview calls (docs/api/preview.md): a session of the agent's draft as it was at creation, from the
-- builder. `preview` marks it; `preview_config` is the draft frozen at creation and
-- `preview_pinned` what publish would have pinned then (tools as they were, knowledge
-- revisions), so the runtime and the analysis read these instead of an `agent_versions` row
-- (previews carry `version_number` 0: no version). Previews are never listed, never readable
-- through /v1/agent/sessions, send no webhooks, and keep no transcript once analysed.
alter table sessions add column preview boolean not null default false;
alter table sessions add column preview_config jsonb;
alter table sessions add column preview_pinned jsonb;
