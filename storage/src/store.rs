//! Where objects live: `object_store` behind one URL (`file://…` by default, `s3://bucket/prefix`).

use std::str::FromStr;
use std::sync::Arc;

use object_store::ObjectStore;
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey};
use object_store::local::LocalFileSystem;
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
    #[error("a segment needs at least one sample")]
    EmptySegment,
    /// Encoding or decoding panicked (a damaged object the Parquet reader did not expect).
    #[error("{0}")]
    Task(String),
}

impl StoreError {
    /// Whether the object store could not be reached (rather than holding something
    /// unreadable): the same request may succeed once it is back.
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::ObjectStore(e) => !matches!(
                e,
                object_store::Error::NotFound { .. } | object_store::Error::InvalidPath { .. }
            ),
            _ => false,
        }
    }

    /// The error of reading object `key`: a decoding failure names the object, so an
    /// operator knows which one is damaged.
    pub fn in_object(self, key: &str) -> StoreError {
        match self {
            StoreError::Parquet(_) | StoreError::Arrow(_) | StoreError::Task(_) => StoreError::Corrupt {
                key: key.to_string(),
                reason: self.to_string(),
            },
            other => other,
        }
    }
}

/// Runs CPU-heavy encoding or decoding off the async runtime. A panic in it (say, on a
/// damaged object) becomes an error of that one request, not a crashed task.
pub async fn blocking<T: Send + 'static>(
    what: &'static str,
    f: impl FnOnce() -> Result<T, StoreError> + Send + 'static,
) -> Result<T, StoreError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| StoreError::Task(format!("{what} failed: {e}")))?
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
        Store {
            inner,
            root,
            base_url,
        }
    }

    /// Opens `file:///abs/dir`, a plain directory path, or `s3://bucket/prefix` (credentials,
    /// region and endpoint from the `AWS_*` environment variables).
    pub fn open(url: &str) -> Result<Store, StoreError> {
        Self::open_with_options(url, &[])
    }

    /// Like [`Store::open`], with S3 options (`aws_endpoint`, `aws_access_key_id`,
    /// `aws_allow_http`, … as `object_store` names them) that override the environment.
    /// Options are refused for local directories, so a misconfiguration is not ignored.
    pub fn open_with_options(url: &str, options: &[(&str, &str)]) -> Result<Store, StoreError> {
        let invalid = |reason: String| StoreError::InvalidUrl {
            url: url.to_string(),
            reason,
        };
        if !url.contains("://") {
            return open_local(url, std::path::Path::new(url), options);
        }
        let parsed = Url::parse(url).map_err(|e| invalid(e.to_string()))?;
        match parsed.scheme() {
            "file" => {
                let dir = parsed
                    .to_file_path()
                    .map_err(|()| invalid("not an absolute local path".into()))?;
                open_local(url, &dir, options)
            }
            "s3" | "s3a" => open_s3(url, &parsed, options),
            other => Err(invalid(format!(
                "unsupported scheme {other:?}; use file:// or s3://"
            ))),
        }
    }

    pub fn object_store(&self) -> Arc<dyn ObjectStore> {
        self.inner.clone()
    }

    pub fn base_url(&self) -> &Url {
        &self.base_url
    }

    /// Full path in the object store of a key relative to the root.
    pub fn path(&self, key: &str) -> Path {
        self.root.parts().chain(Path::from(key).parts()).collect()
    }

    /// Deletes the object at `key`; an object already gone is not an error.
    pub async fn delete(&self, key: &str) -> Result<(), StoreError> {
        use object_store::ObjectStoreExt;
        match self.inner.delete(&self.path(key)).await {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Cheap round trip for readiness checks: lists the top level of the root.
    pub async fn ping(&self) -> Result<(), StoreError> {
        let prefix = (!self.root.as_ref().is_empty()).then_some(&self.root);
        self.inner.list_with_delimiter(prefix).await?;
        Ok(())
    }
}

fn open_local(url: &str, dir: &std::path::Path, options: &[(&str, &str)]) -> Result<Store, StoreError> {
    let invalid = |reason: String| StoreError::InvalidUrl {
        url: url.to_string(),
        reason,
    };
    if !options.is_empty() {
        return Err(invalid("options are only supported for s3:// urls".into()));
    }
    std::fs::create_dir_all(dir).map_err(|e| invalid(format!("cannot create directory: {e}")))?;
    // Canonical, so that the paths DataFusion sees under `file:///` match what we list.
    let root = Path::from_filesystem_path(dir).map_err(|e| invalid(e.to_string()))?;
    let base_url = Url::parse("file:///").expect("static url");
    Ok(Store::new(Arc::new(LocalFileSystem::new()), root, base_url))
}

fn open_s3(url: &str, parsed: &Url, options: &[(&str, &str)]) -> Result<Store, StoreError> {
    let invalid = |reason: String| StoreError::InvalidUrl {
        url: url.to_string(),
        reason,
    };
    let bucket = parsed
        .host_str()
        .filter(|b| !b.is_empty())
        .ok_or_else(|| invalid("missing bucket".into()))?;
    let mut builder = AmazonS3Builder::from_env();
    for (key, value) in options {
        let key = AmazonS3ConfigKey::from_str(&key.to_ascii_lowercase())
            .map_err(|_| invalid(format!("unknown s3 option {key:?}")))?;
        builder = builder.with_config(key, *value);
    }
    // Path-style requests work with every S3-compatible server (MinIO, moto, R2, …).
    builder = builder
        .with_bucket_name(bucket)
        .with_virtual_hosted_style_request(false);
    let endpoint = builder
        .get_config_value(&AmazonS3ConfigKey::Endpoint)
        .unwrap_or_default();
    if is_local_http(&endpoint) {
        builder = builder.with_allow_http(true);
    }
    let inner = builder.build()?;
    let root = Path::parse(parsed.path()).map_err(|e| invalid(e.to_string()))?;
    let base_url = Url::parse(&format!("s3://{bucket}/")).map_err(|e| invalid(e.to_string()))?;
    Ok(Store::new(Arc::new(inner), root, base_url))
}

/// Plain HTTP is only allowed implicitly for a test or sidecar server on this machine.
fn is_local_http(endpoint: &str) -> bool {
    let Ok(url) = Url::parse(endpoint) else {
        return false;
    };
    url.scheme() == "http" && matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_urls_register_under_file_root() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("data");
        let store = Store::open(&format!("file://{}", sub.display())).unwrap();
        assert!(sub.is_dir(), "the directory is created");
        assert_eq!(store.base_url().as_str(), "file:///");
        let canonical = std::fs::canonicalize(&sub).unwrap();
        let full = store.path("tenants/t/x.parquet");
        assert_eq!(
            std::path::PathBuf::from(format!("/{full}")),
            canonical.join("tenants/t/x.parquet")
        );
        let plain = Store::open(sub.to_str().unwrap()).unwrap();
        assert_eq!(plain.path("k"), store.path("k"));
    }

    #[test]
    fn s3_urls_keep_bucket_and_prefix() {
        let store = Store::open_with_options(
            "s3://bucket/some/prefix",
            &[
                ("aws_endpoint", "http://localhost:9"),
                ("aws_region", "us-east-1"),
            ],
        )
        .unwrap();
        assert_eq!(store.base_url().as_str(), "s3://bucket/");
        assert_eq!(store.path("k/v.parquet").as_ref(), "some/prefix/k/v.parquet");
        assert!(Store::open_with_options("s3://bucket/p", &[("no_such_option", "x")]).is_err());
        assert!(Store::open("gs://bucket/p").is_err());
        assert!(Store::open_with_options("/tmp/x", &[("aws_region", "x")]).is_err());
    }
}
