-- Per-tenant settings (Grafana's settings.v1 API): the Profiles Drilldown app keeps its
-- plugin settings here as one JSON string.
CREATE TABLE settings (
    tenant            TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    value             TEXT    NOT NULL,
    modified_at_millis BIGINT NOT NULL,
    PRIMARY KEY (tenant, name)
);
