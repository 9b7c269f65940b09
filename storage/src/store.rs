//! Where objects live: `object_store` behind one URL (`file://…` by default, `s3://bucket/prefix`).

use std::sync::Arc;

use object_store::ObjectStore;
use object_store::path::Path;
use url::Url;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("invalid storage url {url:?}: {reason}")]
    InvalidUrl { url: String, reason: String },
    #[error("object store error: {0}")]
    ObjectStore(#[from] object_store::Error),
    #[error("parquet error: {0}")]
    Parquet(#[from] parquet::errors::ParquetError),
    #[error("arrow error: {0}")]
    Arrow(#[from] arrow::error::ArrowError),
    #[error("corrupt object {key}: {reason}")]
    Corrupt { key: String, reason: String },
}

/// An object store plus the prefix all of Stackhouse's keys live under.
#[derive(Clone, Debug)]
pub struct Store {
    inner: Arc<dyn ObjectStore>,
    /// Prefix inside the store (the folder of a `file://` URL, the prefix of an S3 URL).
    root: Path,
    /// The URL DataFusion registers the store under: `file:///` or `s3://bucket/`.
    base_url: Url,
}

impl Store {
    pub fn new(inner: Arc<dyn ObjectStore>, root: Path, base_url: Url) -> Store {
        Store { inner, root, base_url }
    }

    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        self.inner.clone()
    }

    pub fn base_url(&self) -> &Url {
        &self.base_url
    }

    /// Full path in the object store of a key relative to the root.
    pub fn path(&self, key: &str) -> Path {
        Path::from(format!("{}/{}", self.root, key).trim_start_matches('/'))
    }
}
