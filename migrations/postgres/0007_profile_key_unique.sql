-- A profile key (tenant, profile id, series, start) is stored once across every ingester:
-- the commit claims it with INSERT ... ON CONFLICT DO NOTHING under this index (a commit
-- racing for the same key waits for the other transaction and then finds it stored), so
-- two ingesters committing the same retried export cannot both store it. The rows
-- themselves carry the claim (no table beside them), so retention, which removes the rows
-- with their segment, frees the key with them; compaction moves rows to the merged segment
-- with an UPDATE of segment_id, which never holds two rows of one key, so the index needs
-- no DEFERRABLE (which SQLite could not match anyway).
--
-- Keys a race stored twice before this migration keep one row (their samples stay stored
-- twice; only the index entry goes).
DELETE FROM profiles a USING profiles b
WHERE a.tenant = b.tenant AND a.profile_id = b.profile_id AND a.series_id = b.series_id
  AND a.start_nanos = b.start_nanos AND a.ctid > b.ctid;
-- The unique index starts with (tenant, profile_id): it serves lookups by id as well.
DROP INDEX profiles_tenant_profile_id;
CREATE UNIQUE INDEX profiles_key ON profiles (tenant, profile_id, series_id, start_nanos);
