//! One behaviour suite for every catalog implementation: each behaviour runs once
//! against a fresh SQLite file and once against a fresh Postgres database.
//!
//! Postgres comes from `STACKHOUSE_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); each test creates and drops its own
//! database so tests run in parallel. An unreachable server fails the tests: CI provides
//! one, and a silently skipped suite would hide a broken implementation.
//!
//! One module per catalog entity; each declares its behaviours with `suite!`.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::future::Future;

use sqlx::{AssertSqlSafe, Connection, Executor, PgConnection};

const DEFAULT_POSTGRES_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";

async fn with_sqlite<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()>,
{
    let dir = tempfile::tempdir().unwrap();
    // A directory that does not exist yet: opening must create it.
    let path = dir.path().join("data").join("catalog.db");
    test(format!("sqlite://{}", path.display())).await;
}

async fn with_postgres<F, Fut>(test: F)
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let admin_url =
        std::env::var("STACKHOUSE_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_POSTGRES_URL.to_string());
    let mut admin = PgConnection::connect(&admin_url).await.unwrap_or_else(|e| {
        panic!(
            "postgres is unreachable at {admin_url}: {e}\n\
             the catalog suite needs a postgres server (trust auth is enough); start one or point \
             STACKHOUSE_TEST_POSTGRES_URL at it"
        )
    });
    let db = format!("stackhouse_test_{}", uuid::Uuid::now_v7().simple());
    admin
        .execute(AssertSqlSafe(format!("CREATE DATABASE {db}")))
        .await
        .unwrap();
    let mut url = url::Url::parse(&admin_url).unwrap();
    url.set_path(&db);
    // Run on its own task so a failing assertion still reaches the cleanup below.
    let outcome = tokio::spawn(test(url.to_string())).await;
    admin
        .execute(AssertSqlSafe(format!("DROP DATABASE {db} WITH (FORCE)")))
        .await
        .unwrap();
    if let Err(e) = outcome {
        std::panic::resume_unwind(e.into_panic());
    }
}

/// Declares every behaviour once per backend.
macro_rules! suite {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    crate::with_sqlite(super::$name).await
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    crate::with_postgres(super::$name).await
                }
            )*
        }
    };
}

mod day_segments;
mod debug_files;
mod delete_requests;
mod deletions;
mod fixtures;
mod label_index;
mod leases;
mod profiles;
mod recording_rules;
mod replacements;
mod segments;
mod series;
mod settings;
mod symbols;
mod tenants;
mod tokens;
mod urls;
