-- Compaction, retention and cleanup. Symbol objects belong to the tenant rather than to the
-- segment that happened to write them, so compacting segments never touches symbols.

CREATE TABLE symbol_objects (
    tenant           TEXT    NOT NULL,
    key              TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    size_bytes       INTEGER NOT NULL,
    rows             INTEGER NOT NULL,
    created_at_nanos INTEGER NOT NULL,
    PRIMARY KEY (tenant, key)
);
CREATE INDEX symbol_objects_created ON symbol_objects (tenant, created_at_nanos, key);
-- Cleanup asks by key alone whether anything still refers to an object.
CREATE INDEX symbol_objects_key ON symbol_objects (key);
CREATE INDEX segment_objects_key ON segment_objects (key);

-- Symbol objects that earlier versions listed under their segment move to the tenant.
INSERT OR IGNORE INTO symbol_objects (tenant, key, kind, size_bytes, rows, created_at_nanos)
SELECT s.tenant, o.key, o.kind, o.size_bytes, o.rows, s.created_at_nanos
FROM segment_objects o JOIN segments s ON s.id = o.segment_id
WHERE o.kind <> 'samples';
DELETE FROM segment_objects WHERE kind <> 'samples';

-- Objects no longer listed, deleted from storage once queries that listed them are done.
CREATE TABLE pending_deletions (
    key                TEXT    NOT NULL PRIMARY KEY,
    tenant             TEXT    NOT NULL,
    delete_after_nanos INTEGER NOT NULL
);
CREATE INDEX pending_deletions_due ON pending_deletions (delete_after_nanos, key);

-- One compactor or retention worker at a time per lease name.
CREATE TABLE leases (
    name             TEXT    NOT NULL PRIMARY KEY,
    holder           TEXT    NOT NULL,
    expires_at_nanos INTEGER NOT NULL
);
