-- Tenant access tokens, for `serve --auth required`. Only the SHA-256 of a token is kept:
-- a token is 32 random bytes, so a fast hash is enough and a leaked catalog leaks no token.
CREATE TABLE tenant_tokens (
    id                TEXT    PRIMARY KEY,
    tenant            TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    token_sha256      TEXT    NOT NULL UNIQUE,
    created_at_millis INTEGER NOT NULL,
    revoked_at_millis INTEGER
);
CREATE INDEX tenant_tokens_by_tenant ON tenant_tokens (tenant);
