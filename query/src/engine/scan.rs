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
use datafusion::datasource::physical_plan::{FileGroup, FileScanConfigBuilder, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::datasource::{TableProvider, TableType};
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::logical_expr::utils::disjunction;
use datafusion::logical_expr::{Expr, TableProviderFilterPushDown, col, lit};
use datafusion::physical_plan::ExecutionPlan;
use datafusion::physical_plan::empty::EmptyExec;
use object_store::ObjectMeta;
use stackhouse_storage::catalog::{SegmentMeta, TableKind};
use stackhouse_storage::model::{SymbolId, TimeRange};
use stackhouse_storage::schema::{self, samples};
use stackhouse_storage::store::Store;

use super::selection::SeriesGroup;

/// The `samples` objects of some segments, or their rollups of one tier: rollup rows have
/// the samples' columns but the per-sample ones, `time_nanos` being the start of their step.
#[derive(Debug)]
pub(crate) struct SamplesTable {
    object_store_url: ObjectStoreUrl,
    files: Vec<ObjectMeta>,
    schema: SchemaRef,
}

impl SamplesTable {
    /// Over the object of `kind` (samples, a rollup or its totals) of each segment
    /// (segments without one are skipped).
    pub(crate) fn new(store: &Store, segments: &[SegmentMeta], kind: TableKind) -> DfResult<SamplesTable> {
        let object_store_url = ObjectStoreUrl::parse(store.base_url().as_str())?;
        let files = segments
            .iter()
            .filter_map(|seg| seg.object(kind))
            .map(|object| ObjectMeta {
                location: store.path(&object.key),
                // Segments are immutable, so the catalog's size is the object's size.
                last_modified: Default::default(),
                size: object.size_bytes,
                e_tag: None,
                version: None,
            })
            .collect();
        Ok(SamplesTable {
            object_store_url,
            files,
            schema: schema::schema_of(kind),
        })
    }

    /// Spreads the files over at most `partitions` groups, largest first, so that the
    /// groups carry similar byte counts.
    fn file_groups(&self, partitions: usize) -> Vec<FileGroup> {
        let partitions = partitions.clamp(1, self.files.len().max(1));
        let mut files = self.files.clone();
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
pub(crate) struct Implied {
    /// Every segment's samples lie inside the range.
    pub time: bool,
    /// Every series of every segment is selected, with no sample-attribute rule.
    pub series: bool,
}

impl Implied {
    /// `selected` is every series id of `groups`; `ranges` are what the segments are read
    /// over. A rollup row starts its step at or after its samples' step, so the samples'
    /// extent decides for rollups as well when the ranges lie on the step's grid.
    pub(crate) fn of(
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
pub(crate) fn selection_filter(
    ranges: &[TimeRange],
    groups: &[SeriesGroup],
    implied: Implied,
) -> Option<Expr> {
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
