//! What every route handler shares: the ingest pipeline, the query engine, the catalog,
//! the object store, authentication and the clock.

use std::sync::Arc;
use std::time::Duration;

use stackhouse_ingest::pipeline::Pipeline;
use stackhouse_query::QueryEngine;
use stackhouse_storage::catalog::Catalog;
use stackhouse_storage::clock::SharedClock;
use stackhouse_storage::store::Store;

use crate::auth::Auth;
use crate::recording::RecordingRules;

#[derive(Clone)]
pub struct AppState {
    pub pipeline: Arc<Pipeline>,
    pub engine: Arc<QueryEngine>,
    pub catalog: Arc<dyn Catalog>,
    pub store: Store,
    pub max_message_bytes: usize,
    pub auth: Arc<Auth>,
    pub clock: SharedClock,
    /// How long replaced and deleted objects stay readable (`--deletion-grace`).
    pub deletion_grace: Duration,
    /// Each tenant's recording rules, configured and stored.
    pub rules: Arc<RecordingRules>,
}
