//! The `samples` table of a chosen set of segments as a DataFusion table, and the filter
//! that picks a selection's rows out of it.
//!
//! The provider is built per query over exactly the segments the catalog pruned to, so
//! DataFusion never lists the bucket. Filters reach the Parquet reader as a predicate:
//! row groups and pages are pruned by statistics and bloom filters, and rows are filtered
//! while decoding (`pushdown_filters`), cheapest filters first (`reorder_filters`).

use std::collections::HashSet;
use std::sync::Arc;

use async_trait::async_trait;
use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::Session;
use datafusion::common::{Result as DfResult, ScalarValue};
use datafusion::datasource::listing::PartitionedFile;
use datafusion::datasource::physical_plan::parquet::CachedParquetFileReaderFactory;
use datafusion::datasource::physical_plan::parquet::ParquetRowSelection;
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::utils::disjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, col, lit};
use datafusion::parquet::arrow::arrow_reader::{RowSelection, RowSelector};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use object_store::ObjectMeta;
use stackhouse_storage::catalog::SegmentMeta;
use stackhouse_storage::model::{SymbolId, TimeRange};
use stackhouse_storage::rollup::Resolution;
use stackhouse_storage::schema::{ROLLUP, SAMPLES, samples};
use stackhouse_storage::store::Store;

use super::selection::SeriesGroup;

/// The `samples` objects of some segments, or their rollups of one tier: rollup rows have
/// the samples' columns but the per-sample ones, `time_nanos` being the start of their step.
#[derive(Debug)]
pub struct SamplesTable {
    object_store_url: ObjectStoreUrl,
    /// Each file with its row count, as the catalog recorded it when the file was written.
    files: Vec<(ObjectMeta, u64)>,
    schema: SchemaRef,
    /// Whether a scan of fewer files than partitions may hand each partition a share of a
    /// file's rows (see [`SamplesTable::row_slices`]).
    split_rows: bool,
}

impl SamplesTable {
    /// Over the object of `resolution` of each segment (segments without one are skipped).
    /// `split_rows` allows [`SamplesTable::row_slices`]; the distributed planner ships file
    /// groups to workers without the row selections that slicing attaches, so a worker
    /// would read every slice's file whole, and a cluster's scans must not slice.
    pub fn new(
        store: &Store,
        segments: &[SegmentMeta],
        resolution: Resolution,
        split_rows: bool,
    ) -> DfResult<SamplesTable> {
        let object_store_url = ObjectStoreUrl::parse(store.base_url().as_str())?;
        let files = segments
            .iter()
            .filter_map(|seg| seg.object(resolution.kind()))
            .map(|object| {
                let meta = ObjectMeta {
                    location: store.path(&object.key),
                    // Segments are immutable, so the catalog's size is the object's size.
                    last_modified: Default::default(),
                    size: object.size_bytes,
                    e_tag: None,
                    version: None,
                };
                (meta, object.rows)
            })
            .collect();
        Ok(SamplesTable {
            object_store_url,
            files,
            schema: match resolution {
                Resolution::Raw => SAMPLES.clone(),
                _ => ROLLUP.clone(),
            },
            split_rows,
        })
    }

    /// The files spread over `partitions` groups: row slices when there are fewer files
    /// than partitions (and slicing is allowed), else whole files.
    fn file_groups(&self, partitions: usize) -> Vec<FileGroup> {
        let partitions = partitions.max(1);
        if self.split_rows && self.files.len() < partitions && self.files.iter().all(|(_, rows)| *rows > 0) {
            return self.row_slices(partitions);
        }
        self.whole_files(partitions)
    }

    /// Spreads the files over at most `partitions` groups, largest first, so that the
    /// groups carry similar byte counts.
    fn whole_files(&self, partitions: usize) -> Vec<FileGroup> {
        let partitions = partitions.clamp(1, self.files.len().max(1));
        let mut files: Vec<ObjectMeta> = self.files.iter().map(|(meta, _)| meta.clone()).collect();
        files.sort_by(|a, b| b.size.cmp(&a.size).then_with(|| a.location.cmp(&b.location)));
        let mut groups: Vec<(u64, Vec<PartitionedFile>)> = vec![(0, Vec::new()); partitions];
        for file in files {
            let smallest = groups
                .iter_mut()
                .min_by_key(|(bytes, _)| *bytes)
                .expect("at least one group");
            smallest.0 += file.size;
            smallest.1.push(PartitionedFile::new_from_meta(file));
        }
        groups
            .into_iter()
            .map(|(_, files)| FileGroup::new(files))
            .collect()
    }

    /// The files' rows, end to end, cut into `partitions` slices of nearly equal row
    /// counts; a file cut between slices is read by each through a row selection. A
    /// compacted block's 1h tier is one row group, which DataFusion would otherwise decode
    /// on one core (it splits files by byte ranges, which never cut a row group).
    fn row_slices(&self, partitions: usize) -> Vec<FileGroup> {
        let total: u64 = self.files.iter().map(|(_, rows)| rows).sum();
        let mut groups: Vec<Vec<PartitionedFile>> = vec![Vec::new(); partitions];
        // The first row of the whole, in the files' order, that each slice starts at.
        let start_of = |slice: usize| total * slice as u64 / partitions as u64;
        let mut first = 0;
        for (meta, rows) in &self.files {
            let end = first + rows;
            for (slice, group) in groups.iter_mut().enumerate() {
                let (from, to) = (start_of(slice).max(first), start_of(slice + 1).min(end));
                if from >= to {
                    continue;
                }
                let file = PartitionedFile::new_from_meta(meta.clone());
                group.push(if from == first && to == end {
                    file
                } else {
                    file.with_extension(ParquetRowSelection::new(RowSelection::from(vec![
                        RowSelector::skip((from - first) as usize),
                        RowSelector::select((to - from) as usize),
                        RowSelector::skip((end - to) as usize),
                    ])))
                });
            }
            first = end;
        }
        groups
            .into_iter()
            .filter(|g| !g.is_empty())
            .map(FileGroup::new)
            .collect()
    }
}

#[async_trait]
impl TableProvider for SamplesTable {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }

    fn table_type(&self) -> TableType {
        TableType::Base
    }

    async fn scan(
        &self,
        state: &dyn Session,
        projection: Option<&Vec<usize>>,
        _filters: &[Expr],
        limit: Option<usize>,
    ) -> DfResult<Arc<dyn ExecutionPlan>> {
        let schema = self.schema();
        if self.files.is_empty() {
            let projected = match projection {
                Some(p) => Arc::new(schema.project(p)?),
                None => schema,
            };
            return Ok(Arc::new(EmptyExec::new(projected)));
        }
        let runtime = state.runtime_env();
        // Segments never change, so footers cached by path stay valid across queries.
        let reader_factory = CachedParquetFileReaderFactory::new(
            runtime.object_store(&self.object_store_url)?,
            runtime.cache_manager.get_file_metadata_cache(),
        );
        // `filters` are not applied here: DataFusion keeps them in a filter above the scan
        // (they are inexact) and its FilterPushdown pass moves that filter into the
        // ParquetSource as its predicate, as for ListingTable. Setting them here as well
        // would evaluate every filter twice.
        let source = ParquetSource::new(schema)
            .with_table_parquet_options(state.table_options().parquet.clone())
            .with_parquet_file_reader_factory(Arc::new(reader_factory))
            .with_pushdown_filters(true)
            .with_reorder_filters(true)
            .with_enable_page_index(true)
            .with_bloom_filter_on_read(true);
        let config = FileScanConfigBuilder::new(self.object_store_url.clone(), Arc::new(source))
            .with_file_groups(self.file_groups(state.config().target_partitions()))
            .with_projection_indices(projection.cloned())?
            .with_limit(limit)
            .build();
        Ok(DataSourceExec::from_data_source(config))
    }

    fn supports_filters_pushdown(&self, filters: &[&Expr]) -> DfResult<Vec<TableProviderFilterPushDown>> {
        // Statistics pruning is approximate, so DataFusion keeps its own filter as well.
        Ok(vec![TableProviderFilterPushDown::Inexact; filters.len()])
    }
}

/// What the catalog already tells of every segment a query scans, so that the scan need
/// not check it row by row.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Implied {
    /// Every segment's samples lie inside the range.
    pub time: bool,
    /// Every series of every segment is selected, with no sample-attribute rule.
    pub series: bool,
}

impl Implied {
    /// `selected` is every series id of `groups`; `ranges` are what the segments are read
    /// over. A rollup row starts its step at or after its samples' step, so the samples'
    /// extent decides for rollups as well when the ranges lie on the step's grid.
    pub fn of(
        segments: &[SegmentMeta],
        ranges: &[TimeRange],
        groups: &[SeriesGroup],
        selected: &HashSet<i64>,
    ) -> Implied {
        let time = match ranges {
            [range] => segments
                .iter()
                .all(|s| range.start <= s.min_time && s.max_time < range.end),
            _ => false,
        };
        // A segment lists every series it holds (`segments_to_scan` keeps none without).
        let series = groups.iter().all(|g| g.attr_set_ids.is_none())
            && segments
                .iter()
                .all(|s| !s.series.is_empty() && s.series.iter().all(|x| selected.contains(&x.series_id)));
        Implied { time, series }
    }
}

/// `time in one of ranges AND (group 1 OR group 2 ...)`, a group being `series_id IN (...)`,
/// and `attr_set_id IN (...)` when it filters sample attributes; without the parts
/// `implied` says every row passes. `None` when no row needs checking. `groups` is not
/// empty.
pub fn selection_filter(ranges: &[TimeRange], groups: &[SeriesGroup], implied: Implied) -> Option<Expr> {
    let groups = groups.iter().map(|g| {
        let series = col(samples::SERIES_ID).in_list(g.series_ids.iter().map(|&id| lit(id)).collect(), false);
        match &g.attr_set_ids {
            Some(ids) => {
                series.and(col(samples::ATTR_SET_ID).in_list(ids.iter().map(id_literal).collect(), false))
            }
            None => series,
        }
    });
    let time = disjunction(ranges.iter().map(|range| {
        col(samples::TIME)
            .gt_eq(lit(range.start))
            .and(col(samples::TIME).lt(lit(range.end)))
    }));
    let series = if implied.series { None } else { disjunction(groups) };
    [time.filter(|_| !implied.time), series]
        .into_iter()
        .flatten()
        .reduce(Expr::and)
}

fn id_literal(id: &SymbolId) -> Expr {
    lit(ScalarValue::FixedSizeBinary(16, Some(id.0.to_vec())))
}

#[cfg(test)]
mod tests {
    use stackhouse_storage::catalog::SegmentSeries;

    use super::*;

    fn segment(min_time: i64, max_time: i64, series: &[i64]) -> SegmentMeta {
        SegmentMeta {
            id: format!("{min_time}"),
            tenant: "t".into(),
            min_time,
            max_time,
            level: 0,
            created_at_nanos: 0,
            objects: vec![],
            series: series
                .iter()
                .map(|&series_id| SegmentSeries {
                    series_id,
                    min_time,
                    max_time,
                    samples: 1,
                })
                .collect(),
        }
    }

    fn table(rows: &[u64], split_rows: bool) -> SamplesTable {
        let files = rows
            .iter()
            .enumerate()
            .map(|(i, &rows)| {
                let meta = ObjectMeta {
                    location: format!("f{i}").into(),
                    last_modified: Default::default(),
                    size: rows * 10,
                    e_tag: None,
                    version: None,
                };
                (meta, rows)
            })
            .collect();
        SamplesTable {
            object_store_url: ObjectStoreUrl::local_filesystem(),
            files,
            schema: SAMPLES.clone(),
            split_rows,
        }
    }

    /// Each group as (file, first row, rows) per piece, a whole file as its full range.
    fn pieces(groups: &[FileGroup], rows: &[u64]) -> Vec<Vec<(String, usize, usize)>> {
        groups
            .iter()
            .map(|g| {
                g.iter()
                    .map(|f| {
                        let name = f.object_meta.location.to_string();
                        let file_rows = rows[name[1..].parse::<usize>().unwrap()] as usize;
                        let Some(selection) = f.extension::<ParquetRowSelection>() else {
                            return (name, 0, file_rows);
                        };
                        let selectors: Vec<RowSelector> = selection.selection().iter().copied().collect();
                        let covered: usize = selectors.iter().map(|s| s.row_count).sum();
                        assert_eq!(covered, file_rows, "a selection covers its whole file");
                        let chosen: Vec<_> = selectors.iter().filter(|s| !s.skip).collect();
                        assert_eq!(chosen.len(), 1, "{selectors:?}");
                        let first = selectors.iter().take_while(|s| s.skip).map(|s| s.row_count).sum();
                        (name, first, chosen[0].row_count)
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn fewer_files_than_partitions_are_cut_into_row_slices() {
        let rows = [81_027];
        let groups = table(&rows, true).file_groups(2);
        assert_eq!(
            pieces(&groups, &rows),
            [
                vec![("f0".into(), 0, 40_513)],
                vec![("f0".into(), 40_513, 40_514)]
            ]
        );

        // 150 rows over 3 partitions: 50 each, the second file read whole.
        let rows = [100, 50];
        let groups = table(&rows, true).file_groups(3);
        assert_eq!(
            pieces(&groups, &rows),
            [
                vec![("f0".into(), 0, 50)],
                vec![("f0".into(), 50, 50)],
                vec![("f1".into(), 0, 50)]
            ]
        );

        // A slice may end inside one file and go on into the next.
        let rows = [3, 3];
        let groups = table(&rows, true).file_groups(4);
        let got = pieces(&groups, &rows);
        let mut read: Vec<(String, usize, usize)> = got.iter().flatten().cloned().collect();
        read.sort();
        // Every row of every file is read by exactly one slice.
        for (file, n) in [("f0", 3), ("f1", 3)] {
            let mut next = 0;
            for (_, first, len) in read.iter().filter(|(f, ..)| f == file) {
                assert_eq!(*first, next, "{got:?}");
                next += len;
            }
            assert_eq!(next, n, "{got:?}");
        }
        assert_eq!(got.len(), 4, "{got:?}");
        assert!(
            got.iter().all(|g| g.iter().map(|p| p.2).sum::<usize>() <= 2),
            "{got:?}"
        );
    }

    #[test]
    fn files_stay_whole_when_enough_or_when_slicing_is_off() {
        let rows = [10, 20, 30];
        for (partitions, split) in [(2, true), (3, true), (4, false)] {
            let groups = table(&rows, split).file_groups(partitions);
            let got = pieces(&groups, &rows);
            assert_eq!(got.len(), partitions.min(rows.len()), "{got:?}");
            let mut files: Vec<_> = got.into_iter().flatten().collect();
            files.sort();
            assert_eq!(
                files,
                [("f0".into(), 0, 10), ("f1".into(), 0, 20), ("f2".into(), 0, 30)]
            );
        }
    }

    #[test]
    fn filter_combines_time_series_and_attributes() {
        let range = TimeRange { start: 5, end: 10 };
        let groups = [
            SeriesGroup {
                series_ids: vec![1, 2],
                attr_set_ids: None,
            },
            SeriesGroup {
                series_ids: vec![3],
                attr_set_ids: Some(vec![SymbolId::ZERO]),
            },
        ];
        let filter = selection_filter(&[range], &groups, Implied::default())
            .unwrap()
            .to_string();
        assert!(filter.contains("time_nanos >= Int64(5)"), "{filter}");
        assert!(filter.contains("time_nanos < Int64(10)"), "{filter}");
        assert!(filter.contains("series_id IN ([Int64(1), Int64(2)])"), "{filter}");
        assert!(filter.contains(" OR "), "{filter}");
        assert!(filter.contains("attr_set_id IN"), "{filter}");
    }

    #[test]
    fn what_the_segments_imply_is_not_checked_per_row() {
        let range = TimeRange { start: 5, end: 10 };
        let all = [SeriesGroup {
            series_ids: vec![1, 2],
            attr_set_ids: None,
        }];
        let selected = HashSet::from([1, 2]);
        let inside = [segment(5, 9, &[1]), segment(6, 7, &[1, 2])];
        assert_eq!(
            Implied::of(&inside, &[range], &all, &selected),
            Implied {
                time: true,
                series: true
            }
        );
        assert_eq!(
            selection_filter(&[range], &all, Implied::of(&inside, &[range], &all, &selected)),
            None
        );
        // A sample at the end of the range is outside it.
        let at_end = [segment(5, 10, &[1])];
        let implied = Implied::of(&at_end, &[range], &all, &selected);
        assert!(!implied.time && implied.series);
        let filter = selection_filter(&[range], &all, implied).unwrap().to_string();
        assert!(
            filter.contains("time_nanos") && !filter.contains("series_id"),
            "{filter}"
        );
        // A series not selected, or an attribute rule, keeps the series filter.
        let other = [segment(5, 9, &[1, 3])];
        assert!(!Implied::of(&other, &[range], &all, &selected).series);
        let with_attrs = [SeriesGroup {
            series_ids: vec![1],
            attr_set_ids: Some(vec![SymbolId::ZERO]),
        }];
        assert!(!Implied::of(&inside[..1], &[range], &with_attrs, &HashSet::from([1])).series);
        let before = [segment(4, 9, &[1])];
        assert!(!Implied::of(&before, &[range], &all, &selected).time);
    }
}
