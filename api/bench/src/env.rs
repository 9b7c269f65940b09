//! One throwaway store: local files and a SQLite catalog in a temporary directory, with the
//! writer, compactor and query engine the server would use.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use stackhouse_query::{FlamegraphQuery, Scope};
use stackhouse_query::{QueryConfig, QueryEngine};
use stackhouse_storage::catalog::{Catalog, TableKind, open_catalog};
use stackhouse_storage::compaction::{CompactMode, CompactionConfig, CompactionReport, Compactor};
use stackhouse_storage::model::{ProfileType, TimeRange};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{Writer, WriterConfig};

pub(crate) const TENANT: &str = "bench";

pub(crate) struct Env {
    dir: Dir,
    pub store: Store,
    pub catalog: Arc<dyn Catalog>,
}

/// Where a store lives: a temporary directory removed with it (unless
/// `STACKHOUSE_BENCH_KEEP` is set), or one kept between runs.
enum Dir {
    Temporary(tempfile::TempDir),
    Kept(std::path::PathBuf),
}

impl Dir {
    fn path(&self) -> &std::path::Path {
        match self {
            Dir::Temporary(dir) => dir.path(),
            Dir::Kept(path) => path,
        }
    }
}

impl Env {
    pub(crate) async fn open() -> anyhow::Result<Env> {
        let mut dir = tempfile::tempdir().context("creating a temporary directory")?;
        // For looking at a store's files after the run (column sizes, alternative encodings).
        if std::env::var_os("STACKHOUSE_BENCH_KEEP").is_some() {
            dir.disable_cleanup(true);
            eprintln!("bench: keeping the store in {}", dir.path().display());
        }
        Env::open_dir(Dir::Temporary(dir)).await
    }

    /// The store in `path`, created there if it is not yet, and kept after the run.
    pub(crate) async fn open_kept(path: &std::path::Path) -> anyhow::Result<Env> {
        std::fs::create_dir_all(path).with_context(|| format!("creating {}", path.display()))?;
        Env::open_dir(Dir::Kept(path.to_path_buf())).await
    }

    async fn open_dir(dir: Dir) -> anyhow::Result<Env> {
        let store = Store::open(dir.path().join("objects").to_str().context("utf-8 store path")?)
            .context("opening the store")?;
        let url = format!("sqlite://{}?mode=rwc", dir.path().join("catalog.db").display());
        let catalog = open_catalog(&url).await.context("opening the catalog")?;
        Ok(Env { dir, store, catalog })
    }

    /// The directory of the store and catalog.
    pub(crate) fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// `serve` flags for a server over this store and catalog.
    pub(crate) fn serve_flags(&self) -> Vec<String> {
        let dir = self.path();
        vec![
            "--data-dir".into(),
            dir.display().to_string(),
            "--storage".into(),
            format!("file://{}", dir.join("objects").display()),
            "--catalog".into(),
            format!("sqlite://{}", dir.join("catalog.db").display()),
        ]
    }

    pub(crate) fn writer(&self, flush_interval: Duration) -> Writer {
        self.writer_with(WriterConfig {
            flush_interval,
            ..WriterConfig::default()
        })
    }

    pub(crate) fn writer_with(&self, config: WriterConfig) -> Writer {
        let symbols = Arc::new(SymbolCache::new(self.store.clone(), self.catalog.clone()));
        Writer::start(self.store.clone(), self.catalog.clone(), symbols, config)
    }

    /// The compactor the server would run over this store, with the default settings.
    pub(crate) fn compactor(&self) -> Compactor {
        Compactor::new(
            self.store.clone(),
            self.catalog.clone(),
            CompactionConfig::default(),
            stackhouse_storage::clock::system(),
        )
    }

    pub(crate) async fn compact(&self) -> anyhow::Result<CompactionReport> {
        self.compactor()
            .compact_tenant(TENANT, CompactMode::Full)
            .await
            .context("compacting")
    }

    /// A fresh engine (and symbol cache), as a query replica started now would have.
    pub(crate) fn engine(&self, memory_limit: usize) -> QueryEngine {
        self.engine_with(memory_limit, None)
    }

    /// [`Env::engine`] reading the rollup tiers where they answer exactly (`rollups`, the
    /// default) or raw samples only.
    pub(crate) fn engine_with_rollups(&self, memory_limit: usize, rollups: bool) -> QueryEngine {
        self.engine_config(memory_limit, None, rollups)
    }

    /// [`Env::engine`] handing large scans to `cluster`'s workers.
    pub(crate) fn engine_with(
        &self,
        memory_limit: usize,
        cluster: Option<stackhouse_query::cluster::ClusterConfig>,
    ) -> QueryEngine {
        self.engine_config(memory_limit, cluster, QueryConfig::default().rollups)
    }

    fn engine_config(
        &self,
        memory_limit: usize,
        cluster: Option<stackhouse_query::cluster::ClusterConfig>,
        rollups: bool,
    ) -> QueryEngine {
        let symbols = Arc::new(SymbolCache::new(self.store.clone(), self.catalog.clone()));
        QueryEngine::new(
            self.store.clone(),
            self.catalog.clone(),
            symbols,
            QueryConfig {
                memory_limit_bytes: Some(memory_limit),
                cluster,
                rollups,
                ..QueryConfig::default()
            },
        )
    }

    /// Bytes and objects of every table, symbols included.
    pub(crate) async fn stored(&self) -> anyhow::Result<(u64, u64, u64)> {
        let stats = self.catalog.stats(TENANT).await.context("catalog stats")?;
        let bytes = stats.tables.values().map(|t| t.bytes).sum();
        let objects = stats.tables.values().map(|t| t.objects).sum();
        Ok((bytes, objects, stats.segments))
    }

    /// Where the stored bytes go: MiB per table, and per column of the samples objects
    /// (compressed column chunks, read from the Parquet footers).
    pub(crate) async fn breakdown(&self) -> anyhow::Result<String> {
        use super::report::mib;
        use datafusion::parquet::file::reader::{FileReader, SerializedFileReader};
        let stats = self.catalog.stats(TENANT).await.context("catalog stats")?;
        let tables: Vec<String> = stats
            .tables
            .iter()
            .map(|(kind, t)| format!("{kind} {:.2}", mib(t.bytes)))
            .collect();
        let mut columns: std::collections::BTreeMap<String, u64> = Default::default();
        for path in self.sample_files(TimeRange::ALL).await? {
            let file = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
            let reader =
                SerializedFileReader::new(file).with_context(|| format!("reading the footer of {path}"))?;
            for group in reader.metadata().row_groups() {
                for chunk in group.columns() {
                    *columns.entry(chunk.column_path().string()).or_default() +=
                        chunk.compressed_size() as u64;
                }
            }
        }
        let columns: Vec<String> = columns
            .iter()
            .map(|(name, bytes)| format!("{name} {:.2}", mib(*bytes)))
            .collect();
        Ok(format!(
            "tables (MiB): {}; samples columns (MiB): {}",
            tables.join(", "),
            columns.join(", ")
        ))
    }

    /// Absolute paths of the committed samples objects of the segments in `range`.
    pub(crate) async fn sample_files(&self, range: TimeRange) -> anyhow::Result<Vec<String>> {
        let segments = self.catalog.segments(TENANT, range).await?;
        Ok(segments
            .iter()
            .filter_map(|s| s.object(TableKind::Samples))
            .map(|o| format!("/{}", self.store.path(&o.key)))
            .collect())
    }
}

pub(crate) fn cpu_type() -> ProfileType {
    ProfileType::parse("samples:count:cpu:nanoseconds").expect("static profile type")
}

/// The middle quarter of `range`: the fleet samples evenly over time, so it holds about a
/// quarter of the rows, and its edges cut the hour block, so it reads raw samples there.
pub(crate) fn middle_quarter(range: TimeRange) -> TimeRange {
    let span = range.end - range.start;
    TimeRange {
        start: range.start + span * 3 / 8,
        end: range.start + span * 5 / 8,
    }
}

pub(crate) fn flamegraph_query(range: TimeRange) -> FlamegraphQuery {
    FlamegraphQuery {
        scope: Scope::new(TENANT, cpu_type(), range),
        group_by: Vec::new(),
        max_nodes: 0,
    }
}
