//! Debug files for native frames: uploaded per tenant (object `tenants/{t}/debuginfo/{id}`
//! plus a catalog row) or fetched from debuginfod servers, parsed once and kept in a
//! bounded cache, and handed to each query as [`NativeFiles`].
//!
//! A tenant without debug files and without debuginfod pays one map lookup per query.
//! Uploads and deletions through this process are seen at once; those through another
//! replica once its list of the tenant's files is older than [`LIST_TTL`].

mod cache;
mod debuginfod;
mod loaded;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use object_store::{ObjectStoreExt, PutPayload};
use stackhouse_storage::catalog::{self, CatalogError, DebugFileCatalog};
use stackhouse_storage::clock::SharedClock;
use stackhouse_storage::model::member_tenants;
use stackhouse_storage::store::{Store, StoreError};
use stackhouse_storage::symbols::SymbolIndex;
use url::Url;

use crate::native::{DebugFile, DebugFileError};
use cache::FileCache;
use debuginfod::Debuginfod;
pub use loaded::{LoadedFile, NativeFiles, normalize_build_id};

/// How long a tenant's list of uploaded files is trusted before the catalog is asked again.
pub const LIST_TTL: Duration = Duration::from_secs(10);

/// Build ids fetched from debuginfod at once.
const FETCH_CONCURRENCY: usize = 8;

#[derive(Clone, Debug)]
pub struct DebugInfoConfig {
    /// Largest debug file accepted, uploaded or fetched.
    pub max_file_bytes: usize,
    /// Parsed files kept in memory, counted by the size of the files they came from.
    pub cache_bytes: usize,
    /// debuginfod servers, asked in this order for build ids no upload covers.
    pub debuginfod_urls: Vec<Url>,
    /// How long a build id no debuginfod server has is not asked for again.
    pub debuginfod_negative_ttl: Duration,
    pub debuginfod_timeout: Duration,
}

impl Default for DebugInfoConfig {
    fn default() -> Self {
        DebugInfoConfig {
            max_file_bytes: 512 << 20,
            cache_bytes: 1 << 30,
            debuginfod_urls: Vec::new(),
            debuginfod_negative_ttl: Duration::from_secs(600),
            debuginfod_timeout: Duration::from_secs(60),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum DebugInfoError {
    #[error("invalid build id {0:?}: want an even number of 8 to 128 hex digits")]
    InvalidBuildId(String),
    #[error("the debug file is {size} bytes, over the limit of {limit} bytes")]
    TooLarge { size: usize, limit: usize },
    #[error("invalid debug file: {0}")]
    Invalid(#[from] DebugFileError),
    #[error(transparent)]
    Catalog(#[from] CatalogError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A tenant's uploaded files by build id, and when that was read from the catalog.
type Listed = (Instant, Arc<HashMap<String, catalog::DebugFile>>);

/// Build ids that locations without lines point at, and the index size they were
/// computed at (the index only grows, so a size change means new symbols).
type Wanted = ((usize, usize), Arc<BTreeSet<String>>);

pub struct DebugInfo {
    store: Store,
    catalog: Arc<dyn DebugFileCatalog>,
    config: DebugInfoConfig,
    clock: SharedClock,
    files: FileCache<LoadedFile>,
    /// Cache keys of objects that did not parse: not downloaded again by every query.
    broken: Mutex<HashSet<String>>,
    listed: Mutex<HashMap<String, Listed>>,
    wanted: Mutex<HashMap<String, Wanted>>,
    debuginfod: Option<Debuginfod>,
}

/// A build id from a request, as the catalog keys it.
fn checked_build_id(build_id: &str) -> Result<String, DebugInfoError> {
    normalize_build_id(build_id).ok_or_else(|| DebugInfoError::InvalidBuildId(build_id.into()))
}

/// Where a tenant's debug file of `build_id` is kept.
pub fn object_key(tenant: &str, build_id: &str) -> String {
    format!("tenants/{tenant}/debuginfo/{build_id}")
}

/// The cache key of an upload: re-uploads get new keys, deletions drop by prefix.
fn upload_key(tenant: &str, build_id: &str, uploaded_at_millis: i64) -> String {
    format!("{tenant}/{build_id}@{uploaded_at_millis}")
}

/// The cache key of a file from debuginfod; tenant names never start with `/`.
fn debuginfod_key(build_id: &str) -> String {
    format!("/debuginfod/{build_id}")
}

impl DebugInfo {
    /// `clock` stamps uploads: the engine's, so a test that sets it sets this too.
    pub fn new(
        store: Store,
        catalog: Arc<dyn DebugFileCatalog>,
        config: DebugInfoConfig,
        clock: SharedClock,
    ) -> DebugInfo {
        let debuginfod = (!config.debuginfod_urls.is_empty()).then(|| {
            Debuginfod::new(
                config.debuginfod_urls.clone(),
                config.max_file_bytes,
                config.debuginfod_negative_ttl,
                config.debuginfod_timeout,
            )
        });
        DebugInfo {
            store,
            catalog,
            files: FileCache::new(config.cache_bytes),
            config,
            clock,
            broken: Mutex::default(),
            listed: Mutex::default(),
            wanted: Mutex::default(),
            debuginfod,
        }
    }

    pub fn max_file_bytes(&self) -> usize {
        self.config.max_file_bytes
    }

    /// Checks that `bytes` is an ELF file whose GNU build id is `build_id`, stores it and
    /// records it; acknowledged once both are durable. Replaces an earlier upload.
    pub async fn upload(
        &self,
        tenant: &str,
        build_id: &str,
        file_name: &str,
        bytes: bytes::Bytes,
    ) -> Result<catalog::DebugFile, DebugInfoError> {
        let build_id = checked_build_id(build_id)?;
        if bytes.len() > self.config.max_file_bytes {
            return Err(DebugInfoError::TooLarge {
                size: bytes.len(),
                limit: self.config.max_file_bytes,
            });
        }
        let parsed = parse(bytes.clone(), &build_id).await?;
        let key = object_key(tenant, &build_id);
        let size = bytes.len();
        self.store
            .object_store()
            .put(&self.store.path(&key), PutPayload::from(bytes))
            .await
            .map_err(StoreError::from)?;
        let row = catalog::DebugFile {
            build_id: build_id.clone(),
            object_key: key,
            file_name: file_name.to_string(),
            size_bytes: size as i64,
            uploaded_at_millis: self.clock.now_millis(),
        };
        self.catalog.put_debug_file(tenant, &row).await?;
        self.forget_list(tenant);
        self.files.insert(
            upload_key(tenant, &build_id, row.uploaded_at_millis),
            Arc::new(LoadedFile::new(parsed)),
            size,
        );
        Ok(row)
    }

    pub async fn list(&self, tenant: &str) -> Result<Vec<catalog::DebugFile>, DebugInfoError> {
        Ok(self.catalog.debug_files(tenant).await?)
    }

    pub async fn get(
        &self,
        tenant: &str,
        build_id: &str,
    ) -> Result<Option<catalog::DebugFile>, DebugInfoError> {
        let build_id = checked_build_id(build_id)?;
        Ok(self.catalog.debug_file(tenant, &build_id).await?)
    }

    /// Forgets the tenant's file of `build_id`, then deletes its object; false when there
    /// was none.
    pub async fn delete(&self, tenant: &str, build_id: &str) -> Result<bool, DebugInfoError> {
        let build_id = checked_build_id(build_id)?;
        if !self.catalog.delete_debug_file(tenant, &build_id).await? {
            return Ok(false);
        }
        self.forget_list(tenant);
        self.files.remove_prefix(&format!("{tenant}/{build_id}@"));
        self.store.delete(&object_key(tenant, &build_id)).await?;
        Ok(true)
    }

    fn forget_list(&self, tenant: &str) {
        self.listed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(tenant);
    }

    /// The debug files a query of `tenant` over `index` may use: uploads first, then
    /// debuginfod, for the build ids of mappings that locations without lines point at.
    /// A file that cannot be read or parsed is left out with a warning: its frames keep
    /// their address names rather than failing the query.
    pub async fn files_for(&self, tenant: &str, index: &SymbolIndex) -> Result<NativeFiles, CatalogError> {
        let listed = self.listed(tenant).await?;
        if listed.is_empty() && self.debuginfod.is_none() {
            return Ok(NativeFiles::default());
        }
        let wanted = self.wanted(tenant, index);
        let mut files = Vec::new();
        let mut fetch = Vec::new();
        for build_id in wanted.iter() {
            match listed.get(build_id) {
                Some(row) => {
                    if let Some(file) = self.uploaded(tenant, row).await {
                        files.push((build_id.clone(), row.uploaded_at_millis as u64, file));
                    }
                }
                None => fetch.push(build_id.clone()),
            }
        }
        if self.debuginfod.is_some() {
            let fetched: Vec<_> = futures::stream::iter(fetch)
                .map(|build_id| async move {
                    let file = self.fetched(&build_id).await;
                    file.map(|f| (build_id, 0, f))
                })
                .buffer_unordered(FETCH_CONCURRENCY)
                .collect()
                .await;
            files.extend(fetched.into_iter().flatten());
        }
        Ok(NativeFiles::new(files))
    }

    async fn listed(&self, tenant: &str) -> Result<Arc<HashMap<String, catalog::DebugFile>>, CatalogError> {
        if let Some((at, files)) = self.listed.lock().unwrap_or_else(|e| e.into_inner()).get(tenant)
            && at.elapsed() < LIST_TTL
        {
            return Ok(files.clone());
        }
        // A read over several tenants uses each one's uploads, the first tenant's first.
        let mut files: HashMap<String, catalog::DebugFile> = HashMap::new();
        for member in member_tenants(tenant) {
            for file in self.catalog.debug_files(member).await? {
                files.entry(file.build_id.clone()).or_insert(file);
            }
        }
        let files = Arc::new(files);
        self.listed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tenant.to_string(), (Instant::now(), files.clone()));
        Ok(files)
    }

    fn wanted(&self, tenant: &str, index: &SymbolIndex) -> Arc<BTreeSet<String>> {
        let size = (index.locations.len(), index.mappings.len());
        if let Some((at, wanted)) = self.wanted.lock().unwrap_or_else(|e| e.into_inner()).get(tenant)
            && *at == size
        {
            return wanted.clone();
        }
        let wanted: BTreeSet<String> = index
            .locations
            .values()
            .filter(|l| l.lines.is_empty() && !l.mapping_id.is_zero())
            .filter_map(|l| index.mappings.get(&l.mapping_id))
            .filter_map(|m| normalize_build_id(&m.build_id))
            .collect();
        let wanted = Arc::new(wanted);
        self.wanted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(tenant.to_string(), (size, wanted.clone()));
        wanted
    }

    async fn uploaded(&self, tenant: &str, row: &catalog::DebugFile) -> Option<Arc<LoadedFile>> {
        let key = upload_key(tenant, &row.build_id, row.uploaded_at_millis);
        if let Some(file) = self.files.get(&key) {
            return Some(file);
        }
        if self
            .broken
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(&key)
        {
            return None;
        }
        let loaded = async {
            let path = self.store.path(&row.object_key);
            let read = async { self.store.object_store().get(&path).await?.bytes().await };
            let bytes = read.await.map_err(StoreError::from)?;
            let size = bytes.len();
            Ok::<_, DebugInfoError>((parse(bytes, &row.build_id).await?, size))
        };
        match loaded.await {
            Ok((parsed, size)) => {
                let file = Arc::new(LoadedFile::new(parsed));
                self.files.insert(key, file.clone(), size);
                Some(file)
            }
            Err(e) => {
                tracing::warn!(%tenant, build_id = %row.build_id, error = %e, "debug file unusable; its frames keep their addresses");
                if !matches!(&e, DebugInfoError::Store(s) if s.is_transient()) {
                    self.broken.lock().unwrap_or_else(|e| e.into_inner()).insert(key);
                }
                None
            }
        }
    }

    async fn fetched(&self, build_id: &str) -> Option<Arc<LoadedFile>> {
        let debuginfod = self.debuginfod.as_ref()?;
        let key = debuginfod_key(build_id);
        if let Some(file) = self.files.get(&key) {
            return Some(file);
        }
        if debuginfod.known_missing(build_id) {
            return None;
        }
        for url in debuginfod.candidates(build_id) {
            let Some(bytes) = debuginfod.fetch(&url).await else {
                continue;
            };
            let size = bytes.len();
            match parse(bytes.into(), build_id).await {
                Ok(parsed) => {
                    let file = Arc::new(LoadedFile::new(parsed));
                    self.files.insert(key, file.clone(), size);
                    return Some(file);
                }
                Err(e) => tracing::warn!(%url, error = %e, "debuginfod answered with an unusable file"),
            }
        }
        debuginfod.remember_missing(build_id);
        None
    }
}

/// Parses a debug file of `build_id` off the async runtime (DWARF and symbol tables of
/// large files take a while); a panic on a damaged file is that file's error.
async fn parse(bytes: bytes::Bytes, build_id: &str) -> Result<DebugFile, DebugFileError> {
    let build_id = build_id.to_string();
    tokio::task::spawn_blocking(move || DebugFile::parse_for(&bytes, &build_id))
        .await
        .map_err(|e| DebugFileError::Malformed(format!("parsing panicked: {e}")))?
}
