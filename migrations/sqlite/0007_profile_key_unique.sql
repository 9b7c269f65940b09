-- A profile key (tenant, profile id, series, start) is stored once across every ingester:
-- the commit claims it with INSERT ... ON CONFLICT DO NOTHING under this index, so two
-- ingesters committing the same retried export cannot both store it. The rows themselves
-- carry the claim (no table beside them), so retention, which removes the rows with their
-- segment, frees the key with them; compaction moves rows to the merged segment with an
-- UPDATE of segment_id, which never holds two rows of one key, so SQLite's immediate
-- uniqueness check never fires during a swap.
--
-- Keys a race stored twice before this migration keep their first row (their samples stay
-- stored twice; only the index entry goes).
DELETE FROM profiles WHERE rowid NOT IN (
    SELECT MIN(rowid) FROM profiles GROUP BY tenant, profile_id, series_id, start_nanos
);
-- The unique index starts with (tenant, profile_id): it serves lookups by id as well.
DROP INDEX profiles_tenant_profile_id;
CREATE UNIQUE INDEX profiles_key ON profiles (tenant, profile_id, series_id, start_nanos);
