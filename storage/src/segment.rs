//! A segment's Parquet objects: writing a batch's tables, reading symbol tables back.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{
    Array, ArrayRef, AsArray, FixedSizeBinaryArray, Int64Array, ListArray, RecordBatch, StringArray,
    StructArray, UInt64Array,
};
use arrow::buffer::{NullBuffer, OffsetBuffer};
use arrow::datatypes::{DataType, FieldRef, Fields, Int64Type, SchemaRef, UInt64Type};
use bytes::Bytes;
use object_store::{ObjectStoreExt, PutPayload};
use parquet::arrow::ArrowWriter;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::basic::{Compression, Encoding, ZstdLevel};
use parquet::file::metadata::{KeyValue, SortingColumn};
use parquet::file::properties::{EnabledStatistics, WriterProperties, WriterVersion};
use parquet::schema::types::ColumnPath;

use crate::catalog::{ObjectMeta, SegmentMeta, SegmentSeries, TableKind};
use crate::model::{
    AttributeSet, Batch, Function, IdMap, Line, Location, Mapping, SampleRow, StackNode, SymbolId,
};
use crate::schema::{self, SCHEMA_VERSION_KEY, samples as col};
use crate::stack_table;
use crate::store::{Store, StoreError, blocking};
use crate::symbols::SymbolIndex;

/// Rows per row group: large enough for good compression, small enough that time and series
/// statistics prune most of a large segment.
pub const ROW_GROUP_ROWS: usize = 128 * 1024;

/// Columns looked up by exact value (trace and profile links), hence the bloom filters.
const BLOOM_COLUMNS: [&str; 3] = [col::TRACE_ID, col::SPAN_ID, col::PROFILE_ID];

/// The symbol tables, in the order their objects are listed.
const SYMBOL_KINDS: [TableKind; 5] = [
    TableKind::Stacks,
    TableKind::Locations,
    TableKind::Functions,
    TableKind::Mappings,
    TableKind::AttributeSets,
];

/// Object key of a segment's samples, relative to the store root.
pub fn samples_key(tenant: &str, segment_id: &str) -> String {
    segment_object_key(tenant, segment_id, TableKind::Samples)
}

/// Object key of a segment's table of `kind` (samples or a rollup), relative to the store
/// root: the key ends in the kind's name, e.g. `.../<segment id>/rollup_1m.parquet`.
pub fn segment_object_key(tenant: &str, segment_id: &str, kind: TableKind) -> String {
    format!("tenants/{tenant}/segments/{segment_id}/{}.parquet", kind.as_str())
}

/// Object key of one symbol table written under `id` (the segment that first used the
/// symbols, or a compaction's own id).
pub fn symbols_key(tenant: &str, id: &str, kind: TableKind) -> String {
    format!("tenants/{tenant}/symbols/{id}/{}.parquet", kind.as_str())
}

/// The symbol tables of a batch or of an index, borrowed.
pub struct SymbolTables<'a> {
    pub stacks: &'a IdMap<StackNode>,
    pub locations: &'a IdMap<Location>,
    pub functions: &'a IdMap<Function>,
    pub mappings: &'a IdMap<Mapping>,
    pub attr_sets: &'a IdMap<AttributeSet>,
}

impl<'a> From<&'a Batch> for SymbolTables<'a> {
    fn from(b: &'a Batch) -> Self {
        SymbolTables {
            stacks: &b.stacks,
            locations: &b.locations,
            functions: &b.functions,
            mappings: &b.mappings,
            attr_sets: &b.attr_sets,
        }
    }
}

impl<'a> From<&'a SymbolIndex> for SymbolTables<'a> {
    fn from(b: &'a SymbolIndex) -> Self {
        SymbolTables {
            stacks: &b.stacks,
            locations: &b.locations,
            functions: &b.functions,
            mappings: &b.mappings,
            attr_sets: &b.attr_sets,
        }
    }
}

/// What writing a batch produced: the segment (its samples object) and the symbol objects of
/// the symbols the batch still carried. Neither is visible until the catalog commits them.
#[derive(Debug)]
pub struct WrittenSegment {
    pub segment: SegmentMeta,
    pub symbols: Vec<ObjectMeta>,
}

/// Writes `batch.samples` (sorted by series, time, stack) and every non-empty symbol table
/// of `batch` as Parquet objects, and returns their metadata (not yet committed), created at
/// `created_at_nanos` by the writer's clock.
pub async fn write_segment(
    store: &Store,
    batch: &Batch,
    segment_id: &str,
    level: i32,
    created_at_nanos: i64,
) -> Result<WrittenSegment, StoreError> {
    if batch.samples.is_empty() {
        return Err(StoreError::EmptySegment);
    }
    let table = samples_batch(&batch.samples, &sorted_rows(&batch.samples))?;
    let (segment, symbols) = futures::future::try_join(
        write_samples(store, &batch.tenant, segment_id, level, created_at_nanos, table),
        write_symbols(
            store,
            &batch.tenant,
            segment_id,
            Tier::of_level(level),
            SymbolTables::from(batch),
        ),
    )
    .await?;
    Ok(WrittenSegment { segment, symbols })
}

/// Writes a samples table already sorted by (series, time, stack) as the one object of a new
/// segment.
pub async fn write_samples(
    store: &Store,
    tenant: &str,
    segment_id: &str,
    level: i32,
    created_at_nanos: i64,
    table: RecordBatch,
) -> Result<SegmentMeta, StoreError> {
    let (min_time, max_time, series) = extents(&table).ok_or(StoreError::EmptySegment)?;
    let key = samples_key(tenant, segment_id);
    let object = put_table(store, key, TableKind::Samples, Tier::of_level(level), table).await?;
    Ok(SegmentMeta {
        id: segment_id.to_string(),
        tenant: tenant.to_string(),
        min_time,
        max_time,
        level,
        created_at_nanos,
        objects: vec![object],
        series,
    })
}

/// Writes every non-empty symbol table as an object under `id`.
pub async fn write_symbols(
    store: &Store,
    tenant: &str,
    id: &str,
    tier: Tier,
    tables: SymbolTables<'_>,
) -> Result<Vec<ObjectMeta>, StoreError> {
    let mut encoded = Vec::new();
    for kind in SYMBOL_KINDS {
        let table = symbol_batch(kind, &tables)?;
        if table.num_rows() > 0 {
            encoded.push((kind, table));
        }
    }
    futures::future::try_join_all(
        encoded
            .into_iter()
            .map(|(kind, table)| put_table(store, symbols_key(tenant, id, kind), kind, tier, table)),
    )
    .await
}

/// Reads one symbol object.
pub async fn read_symbols(store: &Store, object: &ObjectMeta) -> Result<SymbolIndex, StoreError> {
    let bytes = fetch(store, &object.key).await?;
    let (kind, key) = (object.kind, object.key.clone());
    let decoded = blocking("decoding symbols", {
        let key = key.clone();
        move || decode_symbols(kind, &key, bytes)
    });
    decoded.await.map_err(|e| e.in_object(&key))
}

/// Reads a samples object whole.
pub async fn read_samples(store: &Store, object: &ObjectMeta) -> Result<Vec<RecordBatch>, StoreError> {
    read_table(store, TableKind::Samples, object).await
}

/// Reads an object holding a table of `kind` whole, refusing any other schema.
pub async fn read_table(
    store: &Store,
    kind: TableKind,
    object: &ObjectMeta,
) -> Result<Vec<RecordBatch>, StoreError> {
    read_columns(store, kind, object, None).await
}

/// Reads the columns named in `columns` (all when `None`) of an object holding a table of
/// `kind`, refusing any other schema.
pub async fn read_columns(
    store: &Store,
    kind: TableKind,
    object: &ObjectMeta,
    columns: Option<&'static [&'static str]>,
) -> Result<Vec<RecordBatch>, StoreError> {
    let bytes = fetch(store, &object.key).await?;
    let key = object.key.clone();
    let decoded = blocking("decoding a table", {
        let key = key.clone();
        move || {
            let mut builder = open_table(kind, &key, bytes)?;
            if let Some(columns) = columns {
                let roots: Vec<usize> = columns
                    .iter()
                    .filter_map(|name| builder.schema().index_of(name).ok())
                    .collect();
                let mask = parquet::arrow::ProjectionMask::roots(builder.parquet_schema(), roots);
                builder = builder.with_projection(mask);
            }
            builder.build()?.map(|b| b.map_err(StoreError::from)).collect()
        }
    });
    decoded.await.map_err(|e| e.in_object(&key))
}

async fn fetch(store: &Store, key: &str) -> Result<Bytes, StoreError> {
    Ok(store.object_store().get(&store.path(key)).await?.bytes().await?)
}

/// Sorts a samples table by (series, time, stack), the order segments are written in; a
/// rollup table, whose columns have the same names, too.
pub fn sort_samples(table: &RecordBatch) -> Result<RecordBatch, StoreError> {
    use arrow::compute::{SortColumn, lexsort_to_indices, take_record_batch};
    let column = |name: &str| SortColumn {
        values: table
            .column(table.schema().index_of(name).expect("samples schema"))
            .clone(),
        options: None,
    };
    let indices = lexsort_to_indices(
        &[column(col::SERIES_ID), column(col::TIME), column(col::STACK_ID)],
        None,
    )?;
    Ok(take_record_batch(table, &indices)?)
}

/// Opens a Parquet object, refusing it unless it carries our schema version and the exact
/// schema of its table.
pub fn open_table(
    kind: TableKind,
    key: &str,
    bytes: Bytes,
) -> Result<ParquetRecordBatchReaderBuilder<Bytes>, StoreError> {
    let corrupt = |reason: String| StoreError::Corrupt {
        key: key.to_string(),
        reason,
    };
    let builder = ParquetRecordBatchReaderBuilder::try_new(bytes)?;
    let version = builder
        .metadata()
        .file_metadata()
        .key_value_metadata()
        .and_then(|kvs| kvs.iter().find(|kv| kv.key == SCHEMA_VERSION_KEY))
        .and_then(|kv| kv.value.clone());
    let Some(version) = version else {
        return Err(corrupt(format!("no {SCHEMA_VERSION_KEY} metadata")));
    };
    let Some(expected) = schema::schema_at(kind, &version) else {
        return Err(corrupt(format!(
            "unknown schema version {version:?} of the {} table",
            kind.as_str()
        )));
    };
    if builder.schema().fields() != expected.fields() {
        return Err(corrupt(format!(
            "not the schema of the {} table at version {version}",
            kind.as_str()
        )));
    }
    Ok(builder)
}

/// Time extent and per-series extents of a samples table sorted by (series, time); `None`
/// when it has no rows.
pub(crate) fn extents(table: &RecordBatch) -> Option<(i64, i64, Vec<SegmentSeries>)> {
    let schema = table.schema();
    let column = |name: &str| {
        table
            .column(schema.index_of(name).expect("samples schema"))
            .as_primitive::<Int64Type>()
            .clone()
    };
    let (times, series_ids) = (column(col::TIME), column(col::SERIES_ID));
    let (mut min_time, mut max_time) = (i64::MAX, i64::MIN);
    let mut out: Vec<SegmentSeries> = Vec::new();
    for (&t, &series_id) in times.values().iter().zip(series_ids.values().iter()) {
        min_time = min_time.min(t);
        max_time = max_time.max(t);
        match out.last_mut() {
            Some(last) if last.series_id == series_id => {
                last.max_time = last.max_time.max(t);
                last.min_time = last.min_time.min(t);
                last.samples += 1;
            }
            _ => out.push(SegmentSeries {
                series_id,
                min_time: t,
                max_time: t,
                samples: 1,
            }),
        }
    }
    (!out.is_empty()).then_some((min_time, max_time, out))
}

pub(crate) async fn put_table(
    store: &Store,
    key: String,
    kind: TableKind,
    tier: Tier,
    table: RecordBatch,
) -> Result<ObjectMeta, StoreError> {
    let rows = table.num_rows() as u64;
    // Encoding is CPU work of up to seconds for large flushes; keep it off the runtime.
    let bytes = blocking("encoding parquet", move || encode(kind, tier, &table)).await?;
    let size_bytes = bytes.len() as u64;
    store
        .object_store()
        .put(&store.path(&key), PutPayload::from(bytes))
        .await?;
    Ok(ObjectMeta {
        kind,
        key,
        size_bytes,
        rows,
    })
}

/// How an object is encoded: cheaply when compaction rewrites it soon, compactly when it
/// is kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tier {
    /// A level-0 segment, written on every flush: LZ4 and row-group statistics only, since
    /// ingest CPU is spent on it and compaction replaces it within minutes.
    Fresh,
    /// Written by compaction and kept: zstd and page statistics (the page index).
    Compacted,
}

impl Tier {
    pub fn of_level(level: i32) -> Tier {
        if level == 0 { Tier::Fresh } else { Tier::Compacted }
    }
}

fn writer_properties(kind: TableKind, tier: Tier, rows: usize) -> WriterProperties {
    let (compression, statistics) = match tier {
        Tier::Fresh => (Compression::LZ4_RAW, EnabledStatistics::Chunk),
        Tier::Compacted => (Compression::ZSTD(ZstdLevel::default()), EnabledStatistics::Page),
    };
    let mut props = WriterProperties::builder()
        // Parquet-rs dictionary-encodes 16-byte ids (FIXED_LEN_BYTE_ARRAY) only when writing
        // format 2.0: in 1.0 files every stack and attribute-set id was stored whole.
        .set_writer_version(WriterVersion::PARQUET_2_0)
        .set_compression(compression)
        .set_max_row_group_row_count(Some(ROW_GROUP_ROWS))
        .set_statistics_enabled(statistics)
        .set_key_value_metadata(Some(vec![KeyValue::new(
            SCHEMA_VERSION_KEY.to_string(),
            schema::version_of(kind).to_string(),
        )]));
    if kind.holds_values() {
        let schema = schema::schema_of(kind);
        let sorted_by = [col::SERIES_ID, col::TIME].map(|name| SortingColumn {
            column_idx: schema
                .index_of(name)
                .expect("samples and rollup schemas have the sort columns") as i32,
            descending: false,
            nulls_first: false,
        });
        props = props.set_sorting_columns(Some(sorted_by.to_vec()));
        // Times ascend within a series: their deltas take a few bits where a dictionary
        // of distinct timestamps overflows its page and falls back to 8 bytes a row.
        let time = ColumnPath::from(col::TIME);
        props = props
            .set_column_dictionary_enabled(time.clone(), false)
            .set_column_encoding(time, Encoding::DELTA_BINARY_PACKED);
    }
    if kind == TableKind::Samples {
        // A filter is allocated for its distinct values when the writer starts it and folded
        // down at the end; sized for a full row group, every small flush zeroed, counted and
        // folded 384 KB of filters.
        let ndv = rows.clamp(1, ROW_GROUP_ROWS) as u64;
        // Link ids rarely repeat within a row group: a dictionary of them, or format 2.0's
        // fallback (DELTA_BYTE_ARRAY), takes more room than the ids themselves.
        for name in BLOOM_COLUMNS {
            let path = ColumnPath::from(name);
            props = props
                .set_column_dictionary_enabled(path.clone(), false)
                .set_column_encoding(path.clone(), Encoding::PLAIN)
                .set_column_bloom_filter_enabled(path.clone(), true)
                .set_column_bloom_filter_max_ndv(path, ndv);
        }
    }
    props.build()
}

fn encode(kind: TableKind, tier: Tier, table: &RecordBatch) -> Result<Bytes, StoreError> {
    let mut buf = Vec::new();
    let mut writer = ArrowWriter::try_new(
        &mut buf,
        table.schema(),
        Some(writer_properties(kind, tier, table.num_rows())),
    )?;
    writer.write(table)?;
    writer.close()?;
    Ok(Bytes::from(buf))
}

fn id_array<'a>(ids: impl Iterator<Item = &'a SymbolId>) -> ArrayRef {
    let bytes: Vec<u8> = ids.flat_map(|id| id.0).collect();
    Arc::new(FixedSizeBinaryArray::new(16, bytes.into(), None))
}

fn strings<'a>(values: impl Iterator<Item = &'a str>) -> ArrayRef {
    Arc::new(StringArray::from_iter_values(values))
}

fn record_batch(schema: SchemaRef, columns: Vec<ArrayRef>) -> Result<RecordBatch, StoreError> {
    Ok(RecordBatch::try_new(schema, columns)?)
}

/// The order of the rows by (series, time, stack), ties in batch order. The keys are sorted
/// compact and apart from the rows: comparing rows through references reads each row
/// again at every comparison, scattered over a batch of hundreds of megabytes.
fn sorted_rows(samples: &[SampleRow]) -> Vec<u32> {
    let mut keys: Vec<(i64, i64, SymbolId, u32)> = samples
        .iter()
        .enumerate()
        .map(|(i, s)| (s.series_id, s.time_nanos, s.stack_id, i as u32))
        .collect();
    keys.sort_unstable();
    keys.into_iter().map(|(.., i)| i).collect()
}

/// The rows of `samples` in `order` as the samples table, every column filled in one pass.
pub(crate) fn samples_batch(samples: &[SampleRow], order: &[u32]) -> Result<RecordBatch, StoreError> {
    let n = order.len();
    let (mut time, mut series, mut value) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut stack, mut attr_set) = (Vec::with_capacity(n * 16), Vec::with_capacity(n * 16));
    let mut trace = OptionalIds::<16>::new(n);
    let mut span = OptionalIds::<8>::new(n);
    let mut profile = OptionalIds::<16>::new(n);
    for &i in order {
        let s = &samples[i as usize];
        time.push(s.time_nanos);
        series.push(s.series_id);
        value.push(s.value);
        stack.extend_from_slice(&s.stack_id.0);
        attr_set.extend_from_slice(&s.attr_set_id.0);
        trace.push(s.trace_id);
        span.push(s.span_id);
        profile.push(s.profile_id);
    }
    record_batch(
        schema::SAMPLES.clone(),
        vec![
            Arc::new(Int64Array::from(time)),
            Arc::new(Int64Array::from(series)),
            Arc::new(FixedSizeBinaryArray::new(16, stack.into(), None)),
            Arc::new(Int64Array::from(value)),
            Arc::new(FixedSizeBinaryArray::new(16, attr_set.into(), None)),
            trace.finish(),
            span.finish(),
            profile.finish(),
        ],
    )
}

/// A nullable fixed-size id column under construction (nulls hold zeros).
struct OptionalIds<const N: usize> {
    bytes: Vec<u8>,
    valid: Vec<bool>,
}

impl<const N: usize> OptionalIds<N> {
    fn new(rows: usize) -> Self {
        OptionalIds {
            bytes: Vec::with_capacity(rows * N),
            valid: Vec::with_capacity(rows),
        }
    }

    fn push(&mut self, id: Option<[u8; N]>) {
        self.bytes.extend_from_slice(&id.unwrap_or([0; N]));
        self.valid.push(id.is_some());
    }

    fn finish(self) -> ArrayRef {
        let nulls = NullBuffer::from(self.valid);
        let nulls = (nulls.null_count() > 0).then_some(nulls);
        Arc::new(FixedSizeBinaryArray::new(N as i32, self.bytes.into(), nulls))
    }
}

/// Rows sorted by id, so that files are deterministic and min/max statistics prune lookups.
fn sorted<V>(table: &IdMap<V>) -> Vec<(&SymbolId, &V)> {
    let mut rows: Vec<_> = table.iter().collect();
    rows.sort_unstable_by_key(|(id, _)| **id);
    rows
}

/// The `lines` list field of the locations schema and the fields of its struct items.
fn line_fields() -> (FieldRef, Fields) {
    let schema = schema::LOCATIONS.clone();
    let DataType::List(item) = schema
        .field_with_name("lines")
        .expect("locations have lines")
        .data_type()
    else {
        unreachable!("locations.lines is a list")
    };
    let DataType::Struct(fields) = item.data_type() else {
        unreachable!("lines are structs")
    };
    (item.clone(), fields.clone())
}

fn symbol_batch(kind: TableKind, batch: &SymbolTables<'_>) -> Result<RecordBatch, StoreError> {
    let schema = schema::schema_of(kind);
    match kind {
        TableKind::Samples
        | TableKind::Rollup1m
        | TableKind::Rollup1h
        | TableKind::Totals1m
        | TableKind::Totals1h
        | TableKind::Rollup1d
        | TableKind::Totals1d => unreachable!("samples and rollups are not symbol tables"),
        TableKind::Stacks => stack_table::encode(batch.stacks),
        TableKind::Locations => {
            let rows = sorted(batch.locations);
            let lines = rows.iter().flat_map(|(_, l)| &l.lines);
            let (item, fields) = line_fields();
            let structs = StructArray::try_new(
                fields,
                vec![
                    id_array(lines.clone().map(|l| &l.function_id)),
                    Arc::new(Int64Array::from_iter_values(lines.clone().map(|l| l.line))),
                    Arc::new(Int64Array::from_iter_values(lines.map(|l| l.column))),
                ],
                None,
            )?;
            let offsets = OffsetBuffer::from_lengths(rows.iter().map(|(_, l)| l.lines.len()));
            let list = ListArray::try_new(item, offsets, Arc::new(structs), None)?;
            record_batch(
                schema,
                vec![
                    id_array(rows.iter().map(|(id, _)| *id)),
                    id_array(rows.iter().map(|(_, l)| &l.mapping_id)),
                    Arc::new(UInt64Array::from_iter_values(rows.iter().map(|(_, l)| l.address))),
                    Arc::new(list),
                ],
            )
        }
        TableKind::Functions => {
            let rows = sorted(batch.functions);
            record_batch(
                schema,
                vec![
                    id_array(rows.iter().map(|(id, _)| *id)),
                    strings(rows.iter().map(|(_, f)| f.name.as_str())),
                    strings(rows.iter().map(|(_, f)| f.system_name.as_str())),
                    strings(rows.iter().map(|(_, f)| f.filename.as_str())),
                    Arc::new(Int64Array::from_iter_values(
                        rows.iter().map(|(_, f)| f.start_line),
                    )),
                ],
            )
        }
        TableKind::Mappings => {
            let rows = sorted(batch.mappings);
            record_batch(
                schema,
                vec![
                    id_array(rows.iter().map(|(id, _)| *id)),
                    Arc::new(UInt64Array::from_iter_values(
                        rows.iter().map(|(_, m)| m.memory_start),
                    )),
                    Arc::new(UInt64Array::from_iter_values(
                        rows.iter().map(|(_, m)| m.memory_limit),
                    )),
                    Arc::new(UInt64Array::from_iter_values(
                        rows.iter().map(|(_, m)| m.file_offset),
                    )),
                    strings(rows.iter().map(|(_, m)| m.filename.as_str())),
                    strings(rows.iter().map(|(_, m)| m.build_id.as_str())),
                ],
            )
        }
        TableKind::AttributeSets => {
            let rows = sorted(batch.attr_sets);
            let pairs: Vec<(&SymbolId, &(String, String))> = rows
                .iter()
                .flat_map(|(id, set)| set.attrs.iter().map(move |kv| (*id, kv)))
                .collect();
            record_batch(
                schema,
                vec![
                    id_array(pairs.iter().map(|(id, _)| *id)),
                    strings(pairs.iter().map(|(_, (k, _))| k.as_str())),
                    strings(pairs.iter().map(|(_, (_, v))| v.as_str())),
                ],
            )
        }
    }
}

fn ids(array: &ArrayRef) -> impl Iterator<Item = SymbolId> + '_ {
    let array = array.as_fixed_size_binary();
    (0..array.len()).map(|i| SymbolId::from_slice(array.value(i)).expect("schema checked: 16 bytes"))
}

fn decode_symbols(kind: TableKind, key: &str, bytes: Bytes) -> Result<SymbolIndex, StoreError> {
    let mut index = SymbolIndex::default();
    // Attribute sets span several rows; gather them before building the sets.
    let mut attrs: BTreeMap<SymbolId, Vec<(String, String)>> = BTreeMap::new();
    let mut stacks = stack_table::Decoder::default();
    let builder = open_table(kind, key, bytes)?;
    let stacks_v1 = kind == TableKind::Stacks && builder.schema().fields() == schema::STACKS_V1.fields();
    for table in builder.build()? {
        let table = table?;
        let c = table.columns();
        match kind {
            TableKind::Samples
            | TableKind::Rollup1m
            | TableKind::Rollup1h
            | TableKind::Totals1m
            | TableKind::Totals1h
            | TableKind::Rollup1d
            | TableKind::Totals1d => {
                return Err(StoreError::Corrupt {
                    key: key.to_string(),
                    reason: format!("listed as a symbols object but holds {}", kind.as_str()),
                });
            }
            TableKind::Stacks if !stacks_v1 => stacks.read(&table, key, &mut index.stacks)?,
            TableKind::Stacks => {
                for ((id, parent_id), location_id) in ids(&c[0]).zip(ids(&c[1])).zip(ids(&c[2])) {
                    index.stacks.insert(
                        id,
                        StackNode {
                            parent_id,
                            location_id,
                        },
                    );
                }
            }
            TableKind::Locations => {
                let (mapping_ids, addresses) = (ids(&c[1]), c[2].as_primitive::<UInt64Type>());
                let list = c[3].as_list::<i32>();
                let lines = list.values().as_struct();
                let function_ids: Vec<SymbolId> = ids(lines.column(0)).collect();
                let (line_nos, columns) = (
                    lines.column(1).as_primitive::<Int64Type>(),
                    lines.column(2).as_primitive::<Int64Type>(),
                );
                let offsets = list.value_offsets().windows(2);
                for (i, ((id, mapping_id), range)) in ids(&c[0]).zip(mapping_ids).zip(offsets).enumerate() {
                    let lines = (range[0] as usize..range[1] as usize)
                        .map(|j| Line {
                            function_id: function_ids[j],
                            line: line_nos.value(j),
                            column: columns.value(j),
                        })
                        .collect();
                    index.locations.insert(
                        id,
                        Location {
                            mapping_id,
                            address: addresses.value(i),
                            lines,
                        },
                    );
                }
            }
            TableKind::Functions => {
                let [name, system_name, filename] = [1, 2, 3].map(|i| c[i].as_string::<i32>());
                let start_line = c[4].as_primitive::<Int64Type>();
                for (i, id) in ids(&c[0]).enumerate() {
                    let function = Function {
                        name: name.value(i).to_string(),
                        system_name: system_name.value(i).to_string(),
                        filename: filename.value(i).to_string(),
                        start_line: start_line.value(i),
                    };
                    index.functions.insert(id, function);
                }
            }
            TableKind::Mappings => {
                let [start, limit, offset] = [1, 2, 3].map(|i| c[i].as_primitive::<UInt64Type>());
                let [filename, build_id] = [4, 5].map(|i| c[i].as_string::<i32>());
                for (i, id) in ids(&c[0]).enumerate() {
                    let mapping = Mapping {
                        memory_start: start.value(i),
                        memory_limit: limit.value(i),
                        file_offset: offset.value(i),
                        filename: filename.value(i).to_string(),
                        build_id: build_id.value(i).to_string(),
                    };
                    index.mappings.insert(id, mapping);
                }
            }
            TableKind::AttributeSets => {
                let [key, value] = [1, 2].map(|i| c[i].as_string::<i32>());
                for (i, id) in ids(&c[0]).enumerate() {
                    attrs
                        .entry(id)
                        .or_default()
                        .push((key.value(i).to_string(), value.value(i).to_string()));
                }
            }
        }
    }
    index
        .attr_sets
        .extend(attrs.into_iter().map(|(id, kvs)| (id, AttributeSet::new(kvs))));
    Ok(index)
}
