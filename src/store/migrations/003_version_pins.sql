-- What a published version pins besides its config: frozen copies of its tools and the
-- knowledge-source revisions it was published with.
alter table agent_versions add column pinned jsonb not null default '{}';
