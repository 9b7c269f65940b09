//! What Stackhouse has persisted must stay readable and keep its meaning. Content ids are
//! stored in every object and in the catalog, so a change to how they are hashed would
//! silently split one function into two across old and new data; a change to a schema would
//! make old objects unreadable. Both fail here, loudly.
//!
//! `tests/fixtures/schema-v1` holds objects written by the code of schema version 1 from
//! `common::sample_batch`, `tests/fixtures/schema-v2` those of today's code (version 2
//! changed the stacks table only). `STACKHOUSE_REGENERATE_FIXTURES=1` rewrites the newest
//! — only for a deliberate new schema version, in a new directory, keeping the old ones.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use std::collections::BTreeMap;
use std::path::PathBuf;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use stackhouse_storage::catalog::{ObjectMeta, TableKind};
use stackhouse_storage::model::{AttributeSet, Function, Mapping, Series, SymbolId};
use stackhouse_storage::schema::samples as col;
use stackhouse_storage::segment::{read_samples, read_symbols, samples_key, symbols_key, write_segment};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolIndex;

const TENANT: &str = "pinned";
const SEGMENT: &str = "00000000-0000-7000-8000-000000000001";

fn hex(id: SymbolId) -> String {
    id.to_hex()
}

#[test]
fn symbol_ids_are_pinned() {
    let function = Function {
        name: "main".into(),
        system_name: "_main".into(),
        filename: "main.c".into(),
        start_line: 1,
    };
    let mapping = Mapping {
        memory_start: 0x1000,
        memory_limit: 0x9000,
        file_offset: 0,
        filename: "/usr/bin/app".into(),
        build_id: "abc123".into(),
    };
    let attrs = AttributeSet::new(vec![
        ("thread.name".into(), "main".into()),
        ("thread.id".into(), "1".into()),
    ]);
    let batch = common::sample_batch(TENANT);
    let mut stacks: Vec<String> = batch.stacks.keys().map(|id| hex(*id)).collect();
    stacks.sort();
    let mut locations: Vec<String> = batch.locations.keys().map(|id| hex(*id)).collect();
    locations.sort();
    let ids = BTreeMap::from([
        ("function", vec![hex(function.id())]),
        ("mapping", vec![hex(mapping.id())]),
        ("attribute set", vec![hex(attrs.id())]),
        ("locations", locations),
        ("stacks", stacks),
        (
            "series",
            vec![
                Series::id_of(&common::cpu(), &common::series("a").labels).to_string(),
                Series::id_of(&common::cpu(), &common::series("b").labels).to_string(),
            ],
        ),
    ]);
    let pinned = BTreeMap::from([
        ("function", vec![PINNED_FUNCTION.to_string()]),
        ("mapping", vec![PINNED_MAPPING.to_string()]),
        ("attribute set", vec![PINNED_ATTRS.to_string()]),
        (
            "locations",
            PINNED_LOCATIONS.iter().map(|s| s.to_string()).collect(),
        ),
        ("stacks", PINNED_STACKS.iter().map(|s| s.to_string()).collect()),
        ("series", PINNED_SERIES.iter().map(|s| s.to_string()).collect()),
    ]);
    assert_eq!(
        ids, pinned,
        "content ids changed: data stored before this change would no longer match data stored after it"
    );
}

// Written down from the code of schema version 1 (xxh3-128 over tagged, length-prefixed
// fields; series: xxh3-64 over the profile type and labels).
const PINNED_FUNCTION: &str = "fd05161269cb093af1a605746f4efcb0";
const PINNED_MAPPING: &str = "1ddfc41b8b8a3e0bcce126617f91011f";
const PINNED_ATTRS: &str = "183e49b6ffbade3ace81af17898bbc71";
const PINNED_LOCATIONS: [&str; 3] = [
    "492bd4da5f498c94eeba20436c975ac0",
    "a647adf3369ba999a5c47c0457895a50",
    "c2a6d7cc03c833dd0b5617afd2d2eb68",
];
const PINNED_STACKS: [&str; 3] = [
    "228cc0ba29d42c66b122292550d6f932",
    "6510d4cc47ee17053296140ed2609eac",
    "cbd5ac504d37339f6582d5f6aa1bf194",
];
const PINNED_SERIES: [&str; 2] = ["351939402440810944", "7686280944722316592"];

fn fixture_store(name: &str) -> (PathBuf, Store) {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/{name}"));
    let store = Store::open(&format!("file://{}", dir.display())).unwrap();
    (dir, store)
}

fn object(store_dir: &std::path::Path, kind: TableKind, key: String) -> ObjectMeta {
    let size_bytes = std::fs::metadata(store_dir.join(&key))
        .unwrap_or_else(|e| panic!("fixture object {key} is missing: {e}"))
        .len();
    ObjectMeta {
        kind,
        key,
        size_bytes,
        rows: 0,
    }
}

fn i64s(batches: &[RecordBatch], column: &str) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            b.column_by_name(column)
                .unwrap_or_else(|| panic!("no column {column}"))
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        })
        .collect()
}

fn ids(batches: &[RecordBatch], column: &str) -> Vec<SymbolId> {
    batches
        .iter()
        .flat_map(|b| {
            let array = b
                .column_by_name(column)
                .unwrap_or_else(|| panic!("no column {column}"))
                .as_fixed_size_binary()
                .clone();
            (0..array.len())
                .map(|i| SymbolId::from_slice(array.value(i)).unwrap())
                .collect::<Vec<_>>()
        })
        .collect()
}

#[tokio::test]
async fn a_segment_of_schema_v1_still_reads() {
    segment_still_reads("schema-v1").await;
}

#[tokio::test]
async fn a_segment_of_schema_v2_still_reads() {
    segment_still_reads("schema-v2").await;
}

/// Schema v2 as written since 2380b47: Parquet format 2.0 (data pages v2, dictionary-encoded
/// ids). The `schema-v2` fixture is the same schema in format 1.0, written before.
#[tokio::test]
async fn a_segment_of_schema_v2_in_parquet_format_2_still_reads() {
    segment_still_reads(NEWEST).await;
}

/// The fixture today's writer produces; `STACKHOUSE_REGENERATE_FIXTURES=1` rewrites it.
const NEWEST: &str = "schema-v2-parquet2";

/// The objects of fixture `name` read back as the batch they were written from.
async fn segment_still_reads(name: &str) {
    let (dir, store) = fixture_store(name);
    let batch = common::sample_batch(TENANT);
    if name == NEWEST && std::env::var_os("STACKHOUSE_REGENERATE_FIXTURES").is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        write_segment(&store, &batch, SEGMENT, 0, common::CREATED_AT)
            .await
            .unwrap();
    }

    let samples = object(&dir, TableKind::Samples, samples_key(TENANT, SEGMENT));
    let read = read_samples(&store, &samples).await.unwrap();
    let mut expected = batch.samples.clone();
    expected.sort_by_key(|s| (s.series_id, s.time_nanos, s.stack_id));
    assert_eq!(
        i64s(&read, col::TIME),
        expected.iter().map(|s| s.time_nanos).collect::<Vec<_>>()
    );
    assert_eq!(
        i64s(&read, col::SERIES_ID),
        expected.iter().map(|s| s.series_id).collect::<Vec<_>>()
    );
    assert_eq!(
        i64s(&read, col::VALUE),
        expected.iter().map(|s| s.value).collect::<Vec<_>>()
    );
    assert_eq!(
        ids(&read, col::STACK_ID),
        expected.iter().map(|s| s.stack_id).collect::<Vec<_>>()
    );
    assert_eq!(
        ids(&read, col::ATTR_SET_ID),
        expected.iter().map(|s| s.attr_set_id).collect::<Vec<_>>()
    );

    let mut symbols = SymbolIndex::default();
    for kind in [
        TableKind::Stacks,
        TableKind::Locations,
        TableKind::Functions,
        TableKind::Mappings,
        TableKind::AttributeSets,
    ] {
        let meta = object(&dir, kind, symbols_key(TENANT, SEGMENT, kind));
        symbols.merge(read_symbols(&store, &meta).await.unwrap());
    }
    // The ids in the old objects are the ids today's code computes for the same content.
    assert_eq!(symbols.stacks, batch.stacks, "stacks");
    assert_eq!(symbols.locations, batch.locations, "locations");
    assert_eq!(symbols.functions, batch.functions, "functions");
    assert_eq!(symbols.mappings, batch.mappings, "mappings");
    assert_eq!(symbols.attr_sets, batch.attr_sets, "attribute sets");
}
