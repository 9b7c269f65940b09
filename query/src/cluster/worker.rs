//! The worker endpoint every query process serves: it runs stages of plans a coordinator
//! ships, against the same object store, memory pool and Parquet footer cache as the
//! process's own queries, and only for callers that hold the cluster's shared secret.

use std::any::Any;
use std::future::Future;
use std::sync::Arc;

use datafusion::common::tree_node::{Transformed, TreeNode};
use datafusion::datasource::physical_plan::parquet::CachedParquetFileReaderFactory;
use datafusion::datasource::physical_plan::{FileScanConfig, ParquetSource};
use datafusion::datasource::source::DataSourceExec;
use datafusion::error::Result as DfResult;
use datafusion::execution::runtime_env::RuntimeEnv;
use datafusion::physical_plan::ExecutionPlan;
use datafusion_distributed::{
    DistributedExt, Worker, WorkerPlanRewriteEvent, WorkerPlanRewriteEventResponse, WorkerQueryContext,
};
use tokio::net::TcpListener;
use tonic::service::interceptor::InterceptedService;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Status};

use super::channel::Channels;
use super::codec::StackhouseCodec;
use super::{SECRET_HEADER, secret_header};
use crate::engine::QueryEngine;

impl QueryEngine {
    /// Serves this engine as a query worker on `listener` until `shutdown` completes.
    /// Every call must carry `secret` in the [`SECRET_HEADER`] metadata.
    pub async fn serve_worker(
        &self,
        listener: TcpListener,
        secret: String,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        let runtime = self.ctx.runtime_env();
        // A stage may read from another worker's stage; those calls carry the secret too.
        let channels = Channels::new(secret_header(&secret).map_err(std::io::Error::other)?);
        let worker = Worker::from_session_builder(move |ctx: WorkerQueryContext| {
            let (runtime, channels) = (runtime.clone(), channels.clone());
            async move {
                Ok(ctx
                    .builder
                    .with_distributed_user_codec(StackhouseCodec)
                    .with_distributed_channel_resolver(channels)
                    .with_distributed_worker_plan_rewrite_handler(move |ev: WorkerPlanRewriteEvent<'_>| {
                        cache_footers(ev.plan, &runtime).map(WorkerPlanRewriteEventResponse::new)
                    })
                    .build())
            }
        })
        .with_runtime_env(self.ctx.runtime_env())
        .with_version(env!("CARGO_PKG_VERSION"));
        let service = InterceptedService::new(worker.into_worker_server(), SecretCheck(secret));
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming_shutdown(TcpIncoming::from(listener).with_nodelay(Some(true)), shutdown)
            .await?;
        Ok(())
    }
}

/// Refuses calls without the cluster's secret: a worker runs whatever plan it is given,
/// over any tenant's objects, so only coordinators may reach it.
#[derive(Clone)]
struct SecretCheck(String);

impl tonic::service::Interceptor for SecretCheck {
    fn call(&mut self, request: Request<()>) -> Result<Request<()>, Status> {
        let given = request.metadata().get(SECRET_HEADER).map(|v| v.as_bytes());
        match given {
            Some(given) if constant_time_eq(given, self.0.as_bytes()) => Ok(request),
            Some(_) => Err(Status::unauthenticated("query worker: wrong cluster secret")),
            None => Err(Status::unauthenticated(format!(
                "query worker: missing cluster secret ({SECRET_HEADER})"
            ))),
        }
    }
}

/// Compares without returning early, so the time taken does not tell how much matched.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A shipped Parquet scan is decoded with DataFusion's default reader, which reads every
/// footer afresh; segments never change, so the process's footer cache is put back.
fn cache_footers(
    plan: Arc<dyn ExecutionPlan>,
    runtime: &Arc<RuntimeEnv>,
) -> DfResult<Arc<dyn ExecutionPlan>> {
    plan.transform_up(|node| {
        let Some(scan) = node.downcast_ref::<DataSourceExec>() else {
            return Ok(Transformed::no(node));
        };
        let Some(config) = (scan.data_source().as_ref() as &dyn Any).downcast_ref::<FileScanConfig>() else {
            return Ok(Transformed::no(node));
        };
        let Some(parquet) = (config.file_source.as_ref() as &dyn Any).downcast_ref::<ParquetSource>() else {
            return Ok(Transformed::no(node));
        };
        let factory = CachedParquetFileReaderFactory::new(
            runtime.object_store(&config.object_store_url)?,
            runtime.cache_manager.get_file_metadata_cache(),
        );
        let mut config = config.clone();
        config.file_source = Arc::new(
            parquet
                .clone()
                .with_parquet_file_reader_factory(Arc::new(factory)),
        );
        Ok(Transformed::yes(
            DataSourceExec::from_data_source(config) as Arc<dyn ExecutionPlan>
        ))
    })
    .map(|t| t.data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(constant_time_eq(b"s3cret", b"s3cret"));
        assert!(!constant_time_eq(b"s3cret", b"s3cres"));
        assert!(!constant_time_eq(b"s3cret", b"s3cre"));
        assert!(!constant_time_eq(b"", b"x"));
    }
}
