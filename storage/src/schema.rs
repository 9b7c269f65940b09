//! Arrow schemas of the Parquet tables. Every file carries [`SCHEMA_VERSION_KEY`] in its
//! key-value metadata so that readers can refuse layouts they do not know.

use std::sync::{Arc, LazyLock};

use arrow::datatypes::{DataType, Field, Fields, Schema, SchemaRef};

use crate::catalog::TableKind;

pub const SCHEMA_VERSION_KEY: &str = "stackhouse.schema_version";
/// The version of every table but `stacks`, whose layout has not changed since version 1.
pub const SCHEMA_VERSION: &str = "1";
/// The version of the `stacks` table written today (see [`crate::stack_table`]).
pub const STACKS_VERSION: &str = "2";

/// Column names of the `samples` table. Rows are sorted by (`series_id`, `time_nanos`).
pub mod samples {
    pub const TIME: &str = "time_nanos";
    pub const SERIES_ID: &str = "series_id";
    pub const STACK_ID: &str = "stack_id";
    pub const VALUE: &str = "value";
    pub const ATTR_SET_ID: &str = "attr_set_id";
    pub const TRACE_ID: &str = "trace_id";
    pub const SPAN_ID: &str = "span_id";
    pub const PROFILE_ID: &str = "profile_id";
}

const ID: DataType = DataType::FixedSizeBinary(16);

fn id(name: &str) -> Field {
    Field::new(name, ID, false)
}

pub static SAMPLES: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new(samples::TIME, DataType::Int64, false),
        Field::new(samples::SERIES_ID, DataType::Int64, false),
        id(samples::STACK_ID),
        Field::new(samples::VALUE, DataType::Int64, false),
        id(samples::ATTR_SET_ID),
        Field::new(samples::TRACE_ID, DataType::FixedSizeBinary(16), true),
        Field::new(samples::SPAN_ID, DataType::FixedSizeBinary(8), true),
        Field::new(samples::PROFILE_ID, DataType::FixedSizeBinary(16), true),
    ]))
});

/// The `rollup_1m` and `rollup_1h` tables: the samples' columns a rollup keeps, under the
/// same names so one filter expression serves both. One row per (series, bucket, stack),
/// `time_nanos` the bucket's start and `value` the sum of its samples' values; rows sorted
/// by (`series_id`, `time_nanos`, `stack_id`). See [`crate::rollup`].
pub static ROLLUP: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new(samples::TIME, DataType::Int64, false),
        Field::new(samples::SERIES_ID, DataType::Int64, false),
        id(samples::STACK_ID),
        Field::new(samples::VALUE, DataType::Int64, false),
    ]))
});

/// The `totals_1m` and `totals_1h` tables: a rollup summed over its stacks, one row per
/// (series, bucket), sorted by (`series_id`, `time_nanos`). A query that needs no stack (a
/// time series) reads these instead of the rollup's rows of every stack.
pub static TOTALS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        Field::new(samples::TIME, DataType::Int64, false),
        Field::new(samples::SERIES_ID, DataType::Int64, false),
        Field::new(samples::VALUE, DataType::Int64, false),
    ]))
});

/// Stack tree nodes as version 1 wrote them, with their ids: `parent_id` is all zeros for
/// a root frame. Still read; compaction rewrites them as version 2.
pub static STACKS_V1: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        id("stack_id"),
        id("parent_id"),
        id("location_id"),
    ]))
});

/// Stack tree nodes in preorder, parents named by rows back ([`crate::stack_table`]).
pub static STACKS: LazyLock<SchemaRef> = LazyLock::new(|| {
    use crate::stack_table::col;
    Arc::new(Schema::new(vec![
        Field::new(col::UP, DataType::UInt32, false),
        Field::new(col::PARENT_ID, ID, true),
        id(col::LOCATION_ID),
    ]))
});

pub static LOCATIONS: LazyLock<SchemaRef> = LazyLock::new(|| {
    let line = Fields::from(vec![
        id("function_id"),
        Field::new("line", DataType::Int64, false),
        Field::new("column", DataType::Int64, false),
    ]);
    Arc::new(Schema::new(vec![
        id("location_id"),
        id("mapping_id"),
        Field::new("address", DataType::UInt64, false),
        Field::new(
            "lines",
            DataType::List(Arc::new(Field::new("item", DataType::Struct(line), false))),
            false,
        ),
    ]))
});

pub static FUNCTIONS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        id("function_id"),
        Field::new("name", DataType::Utf8, false),
        Field::new("system_name", DataType::Utf8, false),
        Field::new("filename", DataType::Utf8, false),
        Field::new("start_line", DataType::Int64, false),
    ]))
});

pub static MAPPINGS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        id("mapping_id"),
        Field::new("memory_start", DataType::UInt64, false),
        Field::new("memory_limit", DataType::UInt64, false),
        Field::new("file_offset", DataType::UInt64, false),
        Field::new("filename", DataType::Utf8, false),
        Field::new("build_id", DataType::Utf8, false),
    ]))
});

/// One row per (set, key): a set of n attributes takes n rows.
pub static ATTRIBUTE_SETS: LazyLock<SchemaRef> = LazyLock::new(|| {
    Arc::new(Schema::new(vec![
        id("attr_set_id"),
        Field::new("key", DataType::Utf8, false),
        Field::new("value", DataType::Utf8, false),
    ]))
});

/// The version written today for `kind`.
pub fn version_of(kind: TableKind) -> &'static str {
    match kind {
        TableKind::Stacks => STACKS_VERSION,
        _ => SCHEMA_VERSION,
    }
}

/// The schema of `kind` at `version`, `None` for a version that never had one.
pub fn schema_at(kind: TableKind, version: &str) -> Option<SchemaRef> {
    match (kind, version) {
        (TableKind::Stacks, "1") => Some(STACKS_V1.clone()),
        (TableKind::Stacks, "2") => Some(STACKS.clone()),
        (_, "1") => Some(schema_of(kind)),
        _ => None,
    }
}

/// The schema written today for `kind`.
pub fn schema_of(kind: TableKind) -> SchemaRef {
    match kind {
        TableKind::Samples => SAMPLES.clone(),
        TableKind::Stacks => STACKS.clone(),
        TableKind::Locations => LOCATIONS.clone(),
        TableKind::Functions => FUNCTIONS.clone(),
        TableKind::Mappings => MAPPINGS.clone(),
        TableKind::AttributeSets => ATTRIBUTE_SETS.clone(),
        TableKind::Rollup1m | TableKind::Rollup1h | TableKind::Rollup1d => ROLLUP.clone(),
        TableKind::Totals1m | TableKind::Totals1h | TableKind::Totals1d => TOTALS.clone(),
    }
}
