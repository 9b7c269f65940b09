-- Recording rules ("metrics from profiles"), per tenant. `definition` is the rule as JSON
-- (metric name, matchers, group_by, external labels, function filter); `generation` counts
-- its versions for optimistic concurrency.
CREATE TABLE recording_rules (
    tenant     TEXT   NOT NULL,
    id         TEXT   NOT NULL,
    generation BIGINT NOT NULL,
    definition TEXT   NOT NULL,
    PRIMARY KEY (tenant, id)
);

-- How far each rule's series have been evaluated and pushed (rules from the configuration
-- included, which have no row above): every minute before `evaluated_until` is sent.
-- `coarse` lists, as JSON, the stretches pushed at a resolution coarser than a minute
-- (backfill where only the hour tier remains).
CREATE TABLE recording_rule_progress (
    tenant          TEXT   NOT NULL,
    rule_id         TEXT   NOT NULL,
    evaluated_until BIGINT NOT NULL,
    coarse          TEXT   NOT NULL,
    PRIMARY KEY (tenant, rule_id)
);
