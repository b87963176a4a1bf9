-- An id the session's record writer gives each transcript / tool item before its first write
-- (docs/reliability.md, "Faults"): a batch retried after the store dropped its connection (its
-- commit unknown) skips the items already stored, so no turn is recorded twice. Items written
-- before this migration, and items other writers append (a transfer's), have none.
alter table session_items add column ref text;
create unique index session_items_ref on session_items(session_id, ref) where ref is not null;
