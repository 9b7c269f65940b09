-- Deletion requests: the samples of the series `selector` matches in [from_nanos, to_nanos),
-- hidden from reads from the moment the row is committed; `state` is pending, purging,
-- purged or cancelled; a pending request may be cancelled until `cancel_until_millis`.
CREATE TABLE delete_requests (
    tenant              TEXT    NOT NULL,
    id                  TEXT    NOT NULL,
    selector            TEXT    NOT NULL,
    from_nanos          BIGINT  NOT NULL,
    to_nanos            BIGINT  NOT NULL,
    created_at_millis   BIGINT  NOT NULL,
    cancel_until_millis BIGINT  NOT NULL,
    state               TEXT    NOT NULL,
    matched_series      BIGINT  NOT NULL,
    matched_samples     BIGINT  NOT NULL,
    PRIMARY KEY (tenant, id)
);

-- Tokens that may also administer their tenant: deletion requests.
ALTER TABLE tenant_tokens ADD COLUMN admin BOOLEAN NOT NULL DEFAULT FALSE;
