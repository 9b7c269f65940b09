//! Group commit: requests hand in batches and wait; every flush interval (or size bound)
//! one segment per tenant is written, committed to the catalog, and only then is every
//! waiting request acknowledged.

use std::sync::Arc;
use std::time::Duration;

use crate::catalog::Catalog;
use crate::model::Batch;
use crate::store::Store;
use crate::symbols::SymbolCache;

#[derive(Clone, Debug)]
pub struct WriterConfig {
    pub flush_interval: Duration,
    /// Flush early once this many samples wait for one tenant.
    pub max_pending_samples: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig { flush_interval: Duration::from_secs(1), max_pending_samples: 1_000_000 }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum WriteError {
    /// The segment could not be made durable; nothing of the request is visible and the
    /// sender should retry.
    #[error("storing the batch failed, retry: {0}")]
    Unavailable(String),
    #[error("the writer is shutting down")]
    ShuttingDown,
}

/// What an acknowledged write produced.
#[derive(Clone, Debug)]
pub struct WriteReceipt {
    pub segment_id: String,
}

pub struct Writer {}

impl Writer {
    pub fn start(store: Store, catalog: Arc<dyn Catalog>, symbols: Arc<SymbolCache>, config: WriterConfig) -> Writer {
        let _ = (store, catalog, symbols, config);
        todo!("storage helper")
    }

    /// Returns once `batch` is durable (objects written, catalog committed).
    pub async fn write(&self, batch: Batch) -> Result<WriteReceipt, WriteError> {
        let _ = batch;
        todo!("storage helper")
    }

    /// Flushes and acknowledges everything pending, then refuses new writes.
    pub async fn shutdown(&self) {
        todo!("storage helper")
    }
}
