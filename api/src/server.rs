//! Wires the pieces together and runs both listeners until a shutdown signal, then drains:
//! in-flight requests finish, the writer flushes and acknowledges what it holds.

use std::sync::Arc;

use anyhow::Context;
use stackhouse_ingest::limits::{RateLimiter, SeriesCounter};
use stackhouse_ingest::pipeline::Pipeline;
use stackhouse_query::{QueryConfig, QueryEngine};
use stackhouse_storage::catalog::{open_catalog, redact_password};
use stackhouse_storage::clock::{self, SharedClock};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::SymbolCache;
use stackhouse_storage::writer::{Writer, WriterConfig};
use tokio::sync::watch;

use crate::auth::Auth;
use crate::config::ServeArgs;
use crate::recording::RecordingRules;
use crate::tls::{TlsFiles, TlsListener};
use crate::{grpc, http};
use tonic::transport::{Identity, ServerTlsConfig};

pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    // Before anything records: values set earlier (the ingest budget) would be lost.
    crate::monitoring::install();
    let tls = TlsFiles::from_flags(args.tls_cert_file.as_deref(), args.tls_key_file.as_deref())?;
    // Read before binding: a bad certificate stops the server with the file's name.
    let http_tls = tls.as_ref().map(TlsFiles::server_config).transpose()?;
    let grpc_tls = match &tls {
        Some(files) => {
            let (cert, key) = files.read()?;
            Some(ServerTlsConfig::new().identity(Identity::from_pem(cert, key)))
        }
        None => None,
    };
    let Services { state, writer, clock } = services(&args).await?;
    let (pipeline, auth) = (state.pipeline.clone(), state.auth.clone());
    let (storage_url, catalog_url) = (args.storage_url()?, args.catalog_url()?);

    let (stop_tx, stop_rx) = watch::channel(false);
    let roles = args.lifecycle.roles();
    let maintenance = roles.compactor.then(|| {
        tokio::spawn(stackhouse_storage::maintenance::run(
            state.store.clone(),
            state.catalog.clone(),
            state.catalog.clone(),
            args.lifecycle.maintenance(),
            clock,
            stop_rx.clone(),
        ))
    });
    // Rules are evaluated where compaction runs: beside the data it settles.
    let evaluator = roles.compactor.then(|| {
        tokio::spawn(crate::recording::evaluator::run(
            state.rules.clone(),
            state.engine.clone(),
            state.catalog.clone(),
            state.clock.clone(),
            stop_rx.clone(),
        ))
    });
    // Checked before binding anything: a worker without the secret is a config error.
    let worker_secret = args.cluster.secret()?.map(str::to_string);
    let worker_listener = match (roles.query, args.cluster.query_worker_addr) {
        (true, Some(addr)) => Some(
            tokio::net::TcpListener::bind(addr)
                .await
                .with_context(|| format!("binding query worker address {addr}"))?,
        ),
        _ => None,
    };
    let http_listener = tokio::net::TcpListener::bind(args.http_addr)
        .await
        .with_context(|| format!("binding http address {}", args.http_addr))?;
    // Only the ingest role receives OTLP over gRPC.
    let grpc_listener = match roles.ingest {
        true => Some(
            tokio::net::TcpListener::bind(args.grpc_addr)
                .await
                .with_context(|| format!("binding grpc address {}", args.grpc_addr))?,
        ),
        false => None,
    };
    tracing::info!(
        http = %http_listener.local_addr()?,
        grpc = ?grpc_listener.as_ref().map(|l| l.local_addr()).transpose()?,
        query_worker = ?worker_listener.as_ref().map(|l| l.local_addr()).transpose()?,
        ?roles,
        auth = ?args.auth,
        tls = tls.is_some(),
        storage = %storage_url,
        catalog = %redact_password(&catalog_url),
        "stackhouse listening"
    );

    let engine = state.engine.clone();
    let app = http::router_for(state, &roles);
    let http_stopped = stopped(stop_rx.clone());
    let worker_stopped = stopped(stop_rx.clone());
    let http_server = async {
        match http_tls {
            Some(config) => {
                let listener = TlsListener::new(http_listener, config)?;
                axum::serve(listener, app)
                    .with_graceful_shutdown(http_stopped)
                    .await
            }
            None => {
                axum::serve(http_listener, app)
                    .with_graceful_shutdown(http_stopped)
                    .await
            }
        }
    };
    let grpc_server = async {
        let Some(listener) = grpc_listener else {
            return Ok(());
        };
        let mut builder = tonic::transport::Server::builder();
        if let Some(config) = grpc_tls {
            builder = builder.tls_config(config)?;
        }
        builder
            .layer(tower::util::MapResponseLayer::new(grpc::remap_too_large))
            .add_service(grpc::service::<grpc::Development>(
                pipeline.clone(),
                auth.clone(),
                args.max_message_bytes,
            ))
            .add_service(grpc::service::<grpc::Experimental>(
                pipeline,
                auth,
                args.max_message_bytes,
            ))
            .serve_with_incoming_shutdown(
                tonic::transport::server::TcpIncoming::from(listener),
                stopped(stop_rx),
            )
            .await
            .map_err(anyhow::Error::from)
    };

    let worker_server = async {
        let Some(listener) = worker_listener else {
            return Ok(());
        };
        let secret = worker_secret.context("a worker address needs the cluster secret")?;
        engine
            .serve_worker(listener, secret, worker_stopped)
            .await
            .map_err(|e| anyhow::anyhow!(e))
    };

    let signal = tokio::spawn(async move {
        shutdown_signal().await;
        tracing::info!("shutting down: draining requests and flushing pending data");
        let _ = stop_tx.send(true);
    });
    let (http_result, grpc_result, worker_result) = tokio::join!(http_server, grpc_server, worker_server);
    signal.abort();
    writer.shutdown().await;
    if let Some(task) = maintenance {
        // Stops at its next await point; an interrupted merge leaves only orphans that the
        // next cleanup removes.
        let _ = task.await;
    }
    if let Some(task) = evaluator {
        // A pass stopped midway has moved each rule's mark only past what was delivered.
        let _ = task.await;
    }
    http_result.context("http server failed")?;
    grpc_result.context("grpc server failed")?;
    worker_result.context("query worker server failed")?;
    tracing::info!("stopped");
    Ok(())
}

/// What a server process serves, built from its flags; the listeners come on top.
pub struct Services {
    pub state: crate::state::AppState,
    /// The group-commit writer, to flush and acknowledge pending data on shutdown.
    pub writer: Arc<Writer>,
    /// The one clock of the process: query times, retention, compaction and cleanup read
    /// it, so a test can hand every part the same manual clock.
    pub clock: SharedClock,
}

/// Opens storage and catalog and builds the writer, query engine, limits and auth that
/// `args` ask for.
pub async fn services(args: &ServeArgs) -> anyhow::Result<Services> {
    let storage_url = args.storage_url()?;
    let catalog_url = args.catalog_url()?;
    if args.storage.is_none() || args.catalog.is_none() {
        std::fs::create_dir_all(&args.data_dir)
            .with_context(|| format!("creating data dir {}", args.data_dir.display()))?;
    }
    let store = Store::open(&storage_url).with_context(|| format!("opening storage {storage_url}"))?;
    let catalog = open_catalog(&catalog_url)
        .await
        .with_context(|| format!("opening catalog {}", redact_password(&catalog_url)))?;
    let clock = clock::system();
    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    let writer = Arc::new(Writer::start(
        store.clone(),
        catalog.clone(),
        symbols.clone(),
        WriterConfig {
            flush_interval: args.flush_interval,
            flush_timeout: args.flush_timeout,
            max_pending_samples: args.max_pending_samples,
            max_buffered_bytes: args.ingest_memory_budget,
            clock: clock.clone(),
        },
    ));
    let engine = Arc::new(QueryEngine::new(
        store.clone(),
        catalog.clone(),
        symbols,
        QueryConfig {
            limits: args.query_limits.limits(),
            memory_limit_bytes: Some(args.query_memory_budget),
            debuginfo: args.debuginfo.config(),
            cluster: args.cluster.config().await?,
            rollups: args.query_rollups,
            clock: clock.clone(),
            deletion_cancel_period: args.lifecycle.deletion_cancel_period,
            ..QueryConfig::default()
        },
    ));
    let limiter = Arc::new(RateLimiter::new(args.rate_limits.limits()));
    let pipeline = Arc::new(
        Pipeline::new(writer.clone(), clock.clone())
            .with_rate_limiter(limiter)
            .with_time_window(args.lifecycle.maintenance().retention.raw, args.ingest_max_future)
            .with_jfr_frame_names(args.jfr_frame_names)
            .with_limits(args.ingest_limits.limits(), SeriesCounter::new(catalog.clone())),
    );
    let auth = Arc::new(Auth::new(args.auth, catalog.clone(), args.auth_cache_ttl));
    let catalog_for_rules = catalog.clone();
    let state = crate::state::AppState {
        pipeline,
        engine,
        catalog,
        store,
        max_message_bytes: args.max_message_bytes,
        auth,
        clock: clock.clone(),
        deletion_grace: args.lifecycle.deletion_grace,
        rules: Arc::new(RecordingRules::new(
            catalog_for_rules,
            args.recording_rules.config(),
        )),
    };
    Ok(Services { state, writer, clock })
}

async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|stop| *stop).await;
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("installing a SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}
