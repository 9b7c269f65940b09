-- Catalog schema. Times are unix nanoseconds (i64). Every row carries a tenant or reaches
-- one through its segment, and every query filters by it.

CREATE TABLE segments (
    id               TEXT    NOT NULL PRIMARY KEY,
    tenant           TEXT    NOT NULL,
    min_time         INTEGER NOT NULL,
    max_time         INTEGER NOT NULL,
    level            INTEGER NOT NULL,
    created_at_nanos INTEGER NOT NULL,
    CHECK (min_time <= max_time)
);
CREATE INDEX segments_tenant_max_time ON segments (tenant, max_time, min_time);
CREATE INDEX segments_tenant_min_time ON segments (tenant, min_time);

-- `position` keeps the order the writer listed objects and series in.
CREATE TABLE segment_objects (
    segment_id TEXT    NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    position   INTEGER NOT NULL,
    kind       TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    size_bytes INTEGER NOT NULL,
    rows       INTEGER NOT NULL,
    PRIMARY KEY (segment_id, key)
);
CREATE INDEX segment_objects_kind ON segment_objects (kind, segment_id);

CREATE TABLE series (
    tenant       TEXT    NOT NULL,
    series_id    INTEGER NOT NULL,
    profile_type TEXT    NOT NULL,
    sample_type  TEXT    NOT NULL,
    sample_unit  TEXT    NOT NULL,
    period_type  TEXT    NOT NULL,
    period_unit  TEXT    NOT NULL,
    labels       TEXT    NOT NULL,
    period       INTEGER NOT NULL,
    PRIMARY KEY (tenant, series_id)
);
CREATE INDEX series_tenant_profile_type ON series (tenant, profile_type);

-- The labels of `series.labels` again, one row each, so label queries and selector
-- pruning run in SQL instead of parsing JSON.
CREATE TABLE series_labels (
    tenant    TEXT    NOT NULL,
    series_id INTEGER NOT NULL,
    name      TEXT    NOT NULL,
    value     TEXT    NOT NULL,
    PRIMARY KEY (tenant, series_id, name),
    FOREIGN KEY (tenant, series_id) REFERENCES series (tenant, series_id) ON DELETE CASCADE
);
CREATE INDEX series_labels_name ON series_labels (tenant, name, value);

CREATE TABLE segment_series (
    segment_id TEXT    NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    tenant     TEXT    NOT NULL,
    series_id  INTEGER NOT NULL,
    position   INTEGER NOT NULL,
    min_time   INTEGER NOT NULL,
    max_time   INTEGER NOT NULL,
    samples    INTEGER NOT NULL,
    PRIMARY KEY (segment_id, series_id),
    FOREIGN KEY (tenant, series_id) REFERENCES series (tenant, series_id)
);
CREATE INDEX segment_series_series ON segment_series (tenant, series_id, max_time, min_time);

CREATE TABLE sample_labels (
    segment_id TEXT NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    PRIMARY KEY (segment_id, name, value)
);
CREATE INDEX sample_labels_name ON sample_labels (name, value);

-- The same profile id may appear in several segments and series, hence no unique key.
CREATE TABLE profiles (
    tenant       TEXT    NOT NULL,
    profile_id   BLOB    NOT NULL,
    segment_id   TEXT    NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
    series_id    INTEGER NOT NULL,
    start_nanos  INTEGER NOT NULL,
    end_nanos    INTEGER NOT NULL,
    sample_count INTEGER NOT NULL,
    FOREIGN KEY (tenant, series_id) REFERENCES series (tenant, series_id)
);
CREATE INDEX profiles_tenant_profile_id ON profiles (tenant, profile_id);
CREATE INDEX profiles_segment ON profiles (segment_id);
