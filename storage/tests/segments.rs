//! Segment objects: what `write_segment` puts in Parquet, read back with the `parquet` crate.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::datatypes::Int64Type;
use bytes::Bytes;
use common::*;
use object_store::{ObjectStoreExt, PutPayload};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::Compression;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};
use stackhouse_storage::catalog::{SegmentSeries, TableKind};
use stackhouse_storage::model::{Batch, SampleRow, SymbolId};
use stackhouse_storage::schema::{self, SCHEMA_VERSION, SCHEMA_VERSION_KEY};
use stackhouse_storage::segment::{WrittenSegment, read_symbols, samples_key, symbols_key, write_segment};
use stackhouse_storage::store::{Store, StoreError};
use stackhouse_storage::symbols::SymbolIndex;

/// Every symbol object read back and merged, as a tenant's symbol cache does.
async fn read_all_symbols(store: &Store, written: &WrittenSegment) -> SymbolIndex {
    let mut index = SymbolIndex::default();
    for object in &written.symbols {
        index.merge(read_symbols(store, object).await.unwrap());
    }
    index
}

fn read_all(bytes: Bytes) -> Vec<RecordBatch> {
    ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect()
}

fn i64s(batches: &[RecordBatch], column: &str) -> Vec<i64> {
    batches
        .iter()
        .flat_map(|b| {
            b.column_by_name(column)
                .unwrap()
                .as_primitive::<Int64Type>()
                .values()
                .to_vec()
        })
        .collect()
}

#[tokio::test]
async fn samples_are_sorted_compressed_and_versioned() {
    let (_dir, store) = local_store();
    let batch = sample_batch("acme");
    let (a, b) = (series("a").id, series("b").id);
    let written = write_segment(&store, &batch, "seg-1", 0, CREATED_AT)
        .await
        .unwrap();
    let seg = written.segment;

    assert_eq!(
        (seg.id.as_str(), seg.tenant.as_str(), seg.level),
        ("seg-1", "acme", 0)
    );
    assert_eq!((seg.min_time, seg.max_time), (50, 300));
    let mut expected_series = vec![
        SegmentSeries {
            series_id: a,
            min_time: 50,
            max_time: 200,
            samples: 2,
        },
        SegmentSeries {
            series_id: b,
            min_time: 100,
            max_time: 300,
            samples: 2,
        },
    ];
    expected_series.sort_by_key(|s| s.series_id);
    assert_eq!(seg.series, expected_series);
    assert_eq!(seg.created_at_nanos, CREATED_AT, "the time the writer gave");

    let samples = seg.object(TableKind::Samples).unwrap();
    assert_eq!(samples.key, samples_key("acme", "seg-1"));
    assert_eq!(samples.key, "tenants/acme/segments/seg-1/samples.parquet");
    assert_eq!(samples.rows, 4);
    let bytes = read_object(&store, &seg, TableKind::Samples).await;
    assert_eq!(samples.size_bytes, bytes.len() as u64);

    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes.clone()).unwrap();
    let meta = builder.metadata().clone();
    let kv = meta.file_metadata().key_value_metadata().unwrap();
    assert!(
        kv.iter()
            .any(|kv| kv.key == SCHEMA_VERSION_KEY && kv.value.as_deref() == Some(SCHEMA_VERSION))
    );
    assert_eq!(builder.schema().fields(), schema::SAMPLES.fields());
    // Level 0 is rewritten by compaction: cheap to write, row-group statistics only.
    for column in meta.row_group(0).columns() {
        assert_eq!(column.compression(), Compression::LZ4_RAW, "{column:?}");
        assert!(
            column.statistics().is_some(),
            "statistics on {}",
            column.column_path()
        );
        assert!(
            column.column_index_offset().is_none(),
            "no page statistics on {}",
            column.column_path()
        );
    }

    // Sorted by (series, time): whichever series id is smaller comes first.
    let rows = read_all(bytes);
    let (first, second) = if a < b {
        ((a, [50, 200], [1, 3]), (b, [100, 300], [5, 7]))
    } else {
        ((b, [100, 300], [5, 7]), (a, [50, 200], [1, 3]))
    };
    assert_eq!(
        i64s(&rows, "series_id"),
        vec![first.0, first.0, second.0, second.0]
    );
    assert_eq!(i64s(&rows, "time_nanos"), [first.1, second.1].concat());
    assert_eq!(i64s(&rows, "value"), [first.2, second.2].concat());

    let trace = rows[0].column_by_name("trace_id").unwrap().as_fixed_size_binary();
    let time = rows[0]
        .column_by_name("time_nanos")
        .unwrap()
        .as_primitive::<Int64Type>();
    for i in 0..trace.len() {
        assert_eq!(
            trace.is_valid(i),
            time.value(i) == 50,
            "only the sample at t=50 has a trace id"
        );
    }
    let at_50 = (0..time.len()).find(|&i| time.value(i) == 50).unwrap();
    assert_eq!(trace.value(at_50), TRACE);
    let span = rows[0].column_by_name("span_id").unwrap().as_fixed_size_binary();
    assert_eq!(span.value(at_50), SPAN);
    let stack = rows[0].column_by_name("stack_id").unwrap().as_fixed_size_binary();
    let expected_stack = batch
        .samples
        .iter()
        .find(|s| s.time_nanos == 50)
        .unwrap()
        .stack_id;
    assert_eq!(stack.value(at_50), expected_stack.0);
}

/// What compaction writes is kept: zstd and the page index, for samples and symbols alike.
#[tokio::test]
async fn compacted_levels_are_zstd_with_page_statistics() {
    let (_dir, store) = local_store();
    let written = write_segment(&store, &sample_batch("acme"), "seg-2", 1, CREATED_AT)
        .await
        .unwrap();
    let mut objects = vec![written.segment.object(TableKind::Samples).unwrap().clone()];
    objects.extend(written.symbols.iter().cloned());
    assert!(objects.len() > 1, "symbol objects were written: {objects:?}");
    for object in &objects {
        let bytes = store
            .object_store()
            .get(&store.path(&object.key))
            .await
            .unwrap()
            .bytes()
            .await
            .unwrap();
        let builder = ParquetRecordBatchReaderBuilder::try_new(bytes).unwrap();
        for column in builder.metadata().row_group(0).columns() {
            assert!(
                matches!(column.compression(), Compression::ZSTD(_)),
                "{}: {column:?}",
                object.key
            );
            assert!(
                column.column_index_offset().is_some(),
                "page statistics on {} of {}",
                column.column_path(),
                object.key
            );
        }
    }
}

#[tokio::test]
async fn id_columns_have_bloom_filters() {
    let (_dir, store) = local_store();
    let seg = write_segment(&store, &sample_batch("acme"), "seg-bloom", 0, CREATED_AT)
        .await
        .unwrap()
        .segment;
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(read_object(&store, &seg, TableKind::Samples).await)
            .unwrap();
    let schema = schema::SAMPLES.clone();
    let bloom = |name: &str| {
        builder
            .get_row_group_column_bloom_filter(0, schema.index_of(name).unwrap())
            .unwrap()
    };

    let trace = bloom("trace_id").expect("trace_id has a bloom filter");
    assert!(trace.check(&TRACE[..]));
    let absent = (0..100u8).filter(|i| trace.check(&[*i; 16][..])).count();
    assert!(absent < 20, "{absent} of 100 absent ids pass the filter");
    assert!(
        bloom("span_id")
            .expect("span_id has a bloom filter")
            .check(&SPAN[..])
    );
    assert!(
        bloom("profile_id")
            .expect("profile_id has a bloom filter")
            .check(&PROFILE[..])
    );
    assert!(
        bloom("value").is_none(),
        "no bloom filter where nobody looks up values"
    );
}

#[tokio::test]
async fn symbols_round_trip() {
    let (_dir, store) = local_store();
    let batch = sample_batch("acme");
    let written = write_segment(&store, &batch, "seg-sym", 0, CREATED_AT)
        .await
        .unwrap();

    let object = |kind| {
        written
            .symbols
            .iter()
            .find(|o| o.kind == kind)
            .unwrap_or_else(|| panic!("{kind:?} object"))
    };
    let rows = |kind| object(kind).rows as usize;
    assert_eq!(rows(TableKind::Stacks), STACK_NODES);
    assert_eq!(rows(TableKind::Locations), LOCATIONS);
    assert_eq!(rows(TableKind::Functions), FUNCTIONS);
    assert_eq!(rows(TableKind::Mappings), MAPPINGS);
    assert_eq!(
        rows(TableKind::AttributeSets),
        ATTR_ROWS,
        "one row per (set, key)"
    );
    assert_eq!(written.symbols.len(), 5, "one object per symbol table");
    assert_eq!(
        object(TableKind::Functions).key,
        symbols_key("acme", "seg-sym", TableKind::Functions)
    );
    assert_eq!(
        object(TableKind::Functions).key,
        "tenants/acme/symbols/seg-sym/functions.parquet"
    );
    let kinds: Vec<_> = written.segment.objects.iter().map(|o| o.kind).collect();
    assert_eq!(kinds, [TableKind::Samples], "the segment holds its samples only");

    // Each object holds its own table and nothing else.
    let functions = read_symbols(&store, object(TableKind::Functions)).await.unwrap();
    assert_eq!(functions.functions, batch.functions);
    assert!(functions.stacks.is_empty() && functions.locations.is_empty());

    let index = read_all_symbols(&store, &written).await;
    assert_eq!(index.stacks, batch.stacks);
    assert_eq!(index.locations, batch.locations);
    assert_eq!(index.functions, batch.functions);
    assert_eq!(index.mappings, batch.mappings);
    assert_eq!(index.attr_sets, batch.attr_sets);
    let raw = index.locations.values().find(|l| l.address == 0x1234).unwrap();
    assert!(raw.lines.is_empty() && raw.mapping_id.is_zero());
}

#[tokio::test]
async fn tables_without_rows_get_no_object() {
    let (_dir, store) = local_store();
    let mut batch = sample_batch("acme");
    batch.mappings.clear();
    batch.attr_sets.clear();
    let written = write_segment(&store, &batch, "seg-partial", 1, CREATED_AT)
        .await
        .unwrap();
    let mut kinds: Vec<_> = written.symbols.iter().map(|o| o.kind.as_str()).collect();
    kinds.sort();
    assert_eq!(kinds, ["functions", "locations", "stacks"]);
    assert_eq!(written.segment.objects.len(), 1, "samples only");
    assert_eq!(written.segment.level, 1);
    let index = read_all_symbols(&store, &written).await;
    assert!(index.mappings.is_empty() && index.attr_sets.is_empty());
    assert_eq!(index.functions.len(), FUNCTIONS);

    let empty = write_segment(&store, &Batch::new("acme"), "seg-empty", 0, CREATED_AT).await;
    // `WrittenSegment` is not `Debug`: show the error or say a segment came back.
    let empty = empty.map(|w| w.segment);
    assert!(matches!(empty, Err(StoreError::EmptySegment)), "{empty:?}");
}

#[tokio::test]
async fn large_segments_split_into_row_groups_in_order() {
    let (_dir, store) = local_store();
    let mut batch = Batch::new("acme");
    let ids: Vec<i64> = (0..3)
        .map(|i| batch.add_series(series(&format!("svc-{i}"))))
        .collect();
    let n: i64 = 300_000;
    // Interleaved series and reversed time, so nothing is sorted on the way in.
    batch.samples = (0..n)
        .rev()
        .map(|t| SampleRow {
            time_nanos: t,
            series_id: ids[(t % 3) as usize],
            stack_id: SymbolId::ZERO,
            value: t,
            attr_set_id: SymbolId::ZERO,
            trace_id: None,
            span_id: None,
            profile_id: None,
        })
        .collect();
    let written = write_segment(&store, &batch, "seg-big", 0, CREATED_AT)
        .await
        .unwrap();
    assert!(written.symbols.is_empty(), "no symbols");
    let seg = written.segment;
    assert_eq!(seg.objects.len(), 1, "samples only");
    assert_eq!(seg.series.iter().map(|s| s.samples).sum::<u64>(), n as u64);

    let bytes = read_object(&store, &seg, TableKind::Samples).await;
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes.clone()).unwrap();
    let groups: Vec<i64> = builder
        .metadata()
        .row_groups()
        .iter()
        .map(|g| g.num_rows())
        .collect();
    assert_eq!(groups, vec![131_072, 131_072, 300_000 - 262_144]);

    let rows = read_all(bytes);
    let (series_col, time) = (i64s(&rows, "series_id"), i64s(&rows, "time_nanos"));
    assert_eq!(series_col.len(), n as usize);
    let keys: Vec<(i64, i64)> = series_col.into_iter().zip(time).collect();
    assert!(
        keys.windows(2).all(|w| w[0] < w[1]),
        "strictly ordered by (series, time)"
    );
    // Series i holds the times t with t % 3 == i, so the smallest series starts at time i.
    let smallest = *ids.iter().min().unwrap();
    let i = ids.iter().position(|&id| id == smallest).unwrap() as i64;
    assert_eq!(keys[0], (smallest, i));
}

#[tokio::test]
async fn unversioned_symbol_objects_are_refused() {
    let (_dir, store) = local_store();
    let batch = sample_batch("acme");
    let written = write_segment(&store, &batch, "seg-bad", 0, CREATED_AT)
        .await
        .unwrap();
    // Replace the functions object by one with the right schema but no version metadata.
    let table = RecordBatch::new_empty(schema::FUNCTIONS.clone());
    let mut buf = Vec::new();
    let mut writer = ArrowWriter::try_new(&mut buf, table.schema(), None).unwrap();
    writer.write(&table).unwrap();
    writer.close().unwrap();
    let key = "tenants/acme/symbols/seg-bad/functions-unversioned.parquet".to_string();
    store
        .object_store()
        .put(&store.path(&key), PutPayload::from(buf))
        .await
        .unwrap();
    let mut functions = written
        .symbols
        .iter()
        .find(|o| o.kind == TableKind::Functions)
        .unwrap()
        .clone();
    functions.key = key.clone();

    match read_symbols(&store, &functions).await {
        Err(StoreError::Corrupt { key: k, .. }) => assert_eq!(k, key),
        other => panic!("expected a corrupt-object error, got {other:?}"),
    }
}

/// Bytes of one column over every row group of a Parquet object, and whether each of its
/// chunks starts with a dictionary page.
fn column_chunks(bytes: &Bytes, column: &str) -> (i64, Vec<bool>) {
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes.clone()).unwrap();
    let mut size = 0;
    let mut dictionaries = Vec::new();
    for group in builder.metadata().row_groups() {
        let chunk = group
            .columns()
            .iter()
            .find(|c| c.column_path().string() == column)
            .unwrap_or_else(|| panic!("no column {column}"));
        size += chunk.compressed_size();
        dictionaries.push(chunk.dictionary_page_offset().is_some());
    }
    (size, dictionaries)
}

#[tokio::test]
async fn repeated_ids_are_stored_once_per_row_group() {
    let (_dir, store) = local_store();
    let mut batch = Batch::new("acme");
    let series_id = batch.add_series(series("svc"));
    // Random-looking 16-byte ids, as content hashes are: 40 stacks, 3 attribute sets, a
    // trace id of its own for every tenth sample.
    let mut rng = SmallRng::seed_from_u64(7);
    let mut id = || rng.random::<[u8; 16]>();
    let stacks: Vec<SymbolId> = (0..40).map(|_| SymbolId(id())).collect();
    let sets: Vec<SymbolId> = (0..3).map(|_| SymbolId(id())).collect();
    let n = 200_000usize;
    batch.samples = (0..n)
        .map(|i| {
            let pick = id();
            SampleRow {
                time_nanos: i as i64 * 15_700_000,
                series_id,
                stack_id: stacks[pick[0] as usize % stacks.len()],
                value: 1,
                attr_set_id: sets[pick[1] as usize % sets.len()],
                trace_id: (i % 10 == 0).then_some(pick),
                span_id: None,
                profile_id: None,
            }
        })
        .collect();

    for level in [0, 1] {
        let written = write_segment(&store, &batch, &format!("seg-{level}"), level, CREATED_AT)
            .await
            .unwrap();
        let bytes = read_object(&store, &written.segment, TableKind::Samples).await;
        // A 40-id dictionary makes each row a 6-bit index; stored whole, 16 random bytes
        // that compression cannot shorten below a back-reference (2–3 bytes) per row.
        for (column, distinct) in [("stack_id", 40), ("attr_set_id", 3)] {
            let (size, dictionaries) = column_chunks(&bytes, column);
            assert!(
                dictionaries.iter().all(|&d| d),
                "level {level}: {column} ({distinct} distinct ids) is not dictionary-encoded in every row group: {dictionaries:?}"
            );
            assert!(
                (size as f64) < n as f64,
                "level {level}: {column} takes {size} bytes for {n} rows of {distinct} distinct ids"
            );
        }
        // Trace ids rarely repeat: a dictionary of them would only add its indices.
        let (_, dictionaries) = column_chunks(&bytes, "trace_id");
        assert!(
            dictionaries.iter().all(|&d| !d),
            "level {level}: trace_id dictionary-encoded"
        );
        assert_eq!(
            i64s(&read_all(bytes), "time_nanos").len(),
            n,
            "level {level}: every row reads back"
        );
    }
}
