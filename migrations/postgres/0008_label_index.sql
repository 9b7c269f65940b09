-- Label listings over long ranges without probing every series: per UTC day, the hull
-- (first and last sample time) of each label name and each (name, value) over the series
-- extents of compacted segments (level 1 and up), and each (name, value)'s hull over all
-- days. A range that spans two or more days is answered exactly from the day rows: a day
-- at an edge holds a row in the range iff its last time (first day) or first time (last
-- day) is; a span or day row whose hull lies across the whole range is checked against the
-- segments themselves. Level-0 segments, the few not compacted yet, are always read as
-- they are. The catalog keeps the rows in step on every swap (storage/src/catalog/
-- label_index.rs); times are unix nanoseconds, never negative.
CREATE TABLE label_value_days (
    tenant   TEXT   NOT NULL,
    name     TEXT   NOT NULL,
    day      BIGINT NOT NULL,
    value    TEXT   NOT NULL,
    min_time BIGINT NOT NULL,
    max_time BIGINT NOT NULL,
    PRIMARY KEY (tenant, name, day, value)
);
CREATE INDEX label_value_days_value ON label_value_days (tenant, name, value, day);

CREATE TABLE label_name_days (
    tenant   TEXT   NOT NULL,
    day      BIGINT NOT NULL,
    name     TEXT   NOT NULL,
    min_time BIGINT NOT NULL,
    max_time BIGINT NOT NULL,
    PRIMARY KEY (tenant, day, name)
);

CREATE TABLE label_values (
    tenant   TEXT   NOT NULL,
    name     TEXT   NOT NULL,
    value    TEXT   NOT NULL,
    min_time BIGINT NOT NULL,
    max_time BIGINT NOT NULL,
    PRIMARY KEY (tenant, name, value)
);

-- The rows of what is stored already.
WITH RECURSIVE piece (tenant, series_id, day, min_time, last) AS (
    SELECT ss.tenant, ss.series_id, ss.min_time / 86400000000000, ss.min_time, ss.max_time
    FROM segment_series ss JOIN segments g ON g.id = ss.segment_id
    WHERE g.level >= 1
    UNION ALL
    SELECT tenant, series_id, day + 1, (day + 1) * 86400000000000, last
    FROM piece WHERE day < last / 86400000000000
)
INSERT INTO label_value_days (tenant, name, value, day, min_time, max_time)
SELECT p.tenant, sl.name, sl.value, p.day, MIN(p.min_time),
       MAX(CASE WHEN p.day < p.last / 86400000000000 THEN p.day * 86400000000000 + 86399999999999 ELSE p.last END)
FROM piece p JOIN series_labels sl ON sl.tenant = p.tenant AND sl.series_id = p.series_id
GROUP BY p.tenant, sl.name, sl.value, p.day;

INSERT INTO label_name_days (tenant, day, name, min_time, max_time)
SELECT tenant, day, name, MIN(min_time), MAX(max_time) FROM label_value_days GROUP BY tenant, day, name;

INSERT INTO label_values (tenant, name, value, min_time, max_time)
SELECT tenant, name, value, MIN(min_time), MAX(max_time) FROM label_value_days GROUP BY tenant, name, value;
