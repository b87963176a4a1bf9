-- An id the platform gives each usage record before its first write (D-BILL-1): a batch retried
-- after the store dropped its connection (its commit unknown) skips the records already stored,
-- so a call is billed once. Rows written before this migration have none.
alter table usage add column ref text;
create unique index usage_ref on usage(ref);
