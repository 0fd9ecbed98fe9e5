-- Accepts update a lane's pending count. With pending in the due index's
-- predicate, no such update could be HOT (heap-only: no index entry
-- written, the old version pruned on the page), so every accept wrote an
-- index entry and left a dead tuple. The due index now leaves pending out
-- (Claim still filters on it), and lane pages keep room for new versions.
DROP INDEX IF EXISTS lanes_due;
CREATE INDEX lanes_due ON lanes (next_at) WHERE NOT parked;
ALTER TABLE lanes SET (fillfactor = 50);
