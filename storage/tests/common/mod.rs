//! Hand-built batches and catalogs shared by the storage integration tests.
#![allow(dead_code)] // each test binary uses a different part

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use object_store::ObjectStoreExt;
use stackhouse_storage::catalog::{Catalog, SegmentMeta, TableKind, open_catalog};
use stackhouse_storage::model::{
    AttributeSet, Batch, Function, Line, Location, Mapping, ProfileRecord, ProfileType, SampleRow, Series,
    SymbolId,
};
use stackhouse_storage::store::Store;

pub(crate) const TRACE: [u8; 16] = *b"trace-id-0000001";
pub(crate) const SPAN: [u8; 8] = *b"span-001";
pub(crate) const PROFILE: [u8; 16] = *b"profile-id-00001";
/// When the segments the tests write directly are created, by the writer's clock.
pub(crate) const CREATED_AT: i64 = 1_700_000_000_000_000_000;

/// What [`sample_batch`] put in, counted by hand.
pub(crate) const STACK_NODES: usize = 3; // main, main;work, main;work;0x1234
pub(crate) const LOCATIONS: usize = 3;
pub(crate) const FUNCTIONS: usize = 2;
pub(crate) const MAPPINGS: usize = 1;
pub(crate) const ATTR_ROWS: usize = 3; // {thread.name=main, thread.id=1} and {thread.name=worker}

pub(crate) fn cpu() -> ProfileType {
    ProfileType::parse("samples:count:cpu:nanoseconds").unwrap()
}

pub(crate) fn series(service: &str) -> Series {
    Series::new(
        cpu(),
        BTreeMap::from([("service.name".to_string(), service.to_string())]),
        10_000_000,
    )
}

/// Two series, two stacks sharing a prefix, one location without lines, two attribute
/// sets, and samples given out of order (series b first, times descending).
pub(crate) fn sample_batch(tenant: &str) -> Batch {
    let mut b = Batch::new(tenant);
    let mapping = b.add_mapping(Mapping {
        memory_start: 0x1000,
        memory_limit: 0x9000,
        file_offset: 0,
        filename: "/usr/bin/app".into(),
        build_id: "abc123".into(),
    });
    let main = b.add_function(Function {
        name: "main".into(),
        system_name: "_main".into(),
        filename: "main.c".into(),
        start_line: 1,
    });
    let work = b.add_function(Function {
        name: "work".into(),
        filename: "work.c".into(),
        ..Default::default()
    });
    let l_main = b.add_location(Location {
        mapping_id: mapping,
        address: 0x1100,
        lines: vec![Line {
            function_id: main,
            line: 10,
            column: 2,
        }],
    });
    // `work` inlined into `main`: two lines, the last one is the caller.
    let l_work = b.add_location(Location {
        mapping_id: mapping,
        address: 0x1200,
        lines: vec![
            Line {
                function_id: work,
                line: 20,
                column: 0,
            },
            Line {
                function_id: main,
                line: 11,
                column: 0,
            },
        ],
    });
    let l_raw = b.add_location(Location {
        mapping_id: SymbolId::ZERO,
        address: 0x1234,
        lines: vec![],
    });
    let short = b.add_stack(&[l_work, l_main]);
    let long = b.add_stack(&[l_raw, l_work, l_main]);
    let main_thread = b.add_attr_set(AttributeSet::new(vec![
        ("thread.name".into(), "main".into()),
        ("thread.id".into(), "1".into()),
    ]));
    let worker = b.add_attr_set(AttributeSet::new(vec![("thread.name".into(), "worker".into())]));
    let (a, z) = (b.add_series(series("a")), b.add_series(series("b")));
    let row = |time_nanos, series_id, stack_id, value, attr_set_id| SampleRow {
        time_nanos,
        series_id,
        stack_id,
        value,
        attr_set_id,
        trace_id: None,
        span_id: None,
        profile_id: None,
    };
    b.samples = vec![
        row(300, z, long, 7, worker),
        row(100, z, short, 5, SymbolId::ZERO),
        row(200, a, long, 3, main_thread),
        SampleRow {
            trace_id: Some(TRACE),
            span_id: Some(SPAN),
            profile_id: Some(PROFILE),
            ..row(50, a, short, 1, main_thread)
        },
    ];
    b.profiles = vec![ProfileRecord {
        profile_id: PROFILE,
        series_id: a,
        start_nanos: 50,
        end_nanos: 60,
        sample_count: 1,
        resource: BTreeMap::from([("service.name".to_string(), "a".to_string())]),
        attributes: BTreeMap::new(),
    }];
    b
}

/// [`sample_batch`] with profile id `[n; 16]`: batches that are not retries of each other.
pub(crate) fn numbered_batch(tenant: &str, n: u8) -> Batch {
    let mut b = sample_batch(tenant);
    for p in &mut b.profiles {
        p.profile_id = [n; 16];
    }
    for s in b.samples.iter_mut().filter(|s| s.profile_id.is_some()) {
        s.profile_id = Some([n; 16]);
    }
    b
}

pub(crate) fn local_store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("file://{}", dir.path().join("objects").display())).unwrap();
    (dir, store)
}

pub(crate) async fn sqlite_catalog(dir: &tempfile::TempDir) -> Arc<dyn Catalog> {
    open_catalog(&format!("sqlite://{}", dir.path().join("catalog.db").display()))
        .await
        .unwrap()
}

pub(crate) async fn read_object(store: &Store, segment: &SegmentMeta, kind: TableKind) -> Bytes {
    let key = &segment
        .object(kind)
        .unwrap_or_else(|| panic!("segment has a {kind:?} object"))
        .key;
    store
        .object_store()
        .get(&store.path(key))
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap()
}
