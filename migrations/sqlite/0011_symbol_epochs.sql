-- Which symbols a tenant's writers may take as stored. A writer leaves out of a segment the
-- symbols its cache says are stored, and commits only while the tenant's epoch is the one
-- its cache was listed at. Collecting symbols no segment refers to any more (after a
-- purge) moves the epoch to an odd number before it lists what is referenced, while
-- writers write every symbol their segments use, and to the next even one in the
-- transaction that drops the unreferenced symbols. No row: epoch 0, nothing to collect.
CREATE TABLE symbol_epochs (
    tenant  TEXT    NOT NULL PRIMARY KEY,
    epoch   BIGINT  NOT NULL,
    -- A purge removed samples: the next symbol merge collects what they alone used.
    collect BOOLEAN NOT NULL
);
