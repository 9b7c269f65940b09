-- Tenants a token may read besides its own (`X-Scope-OrgID: a|b` reads over several
-- tenants), joined by `|`, which no tenant name contains; empty for none. Writes and
-- administration stay with the token's own tenant.
ALTER TABLE tenant_tokens ADD COLUMN reads TEXT NOT NULL DEFAULT '';
