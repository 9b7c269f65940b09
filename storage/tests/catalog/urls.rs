//! Url handling, independent of the backend.

use stackhouse_storage::catalog::{CatalogError, open_catalog};
use stackhouse_storage::model::TimeRange;

use crate::fixtures::{commit, cpu, open, series};

#[tokio::test]
async fn unknown_scheme_is_invalid_url() {
    for url in ["mysql://root:hunter2@localhost/db", "catalog.db", ""] {
        match open_catalog(url).await {
            Err(CatalogError::InvalidUrl { url: shown, .. }) => {
                assert!(!shown.contains("hunter2"), "the password leaked into {shown:?}");
            }
            Err(other) => panic!("{url:?}: expected an invalid url error, got {other:?}"),
            Ok(_) => panic!("{url:?}: expected an invalid url error, got a catalog"),
        }
    }
}

#[tokio::test]
async fn in_memory_sqlite_works() {
    let cat = open("sqlite::memory:").await;
    let web = series(cpu(), &[("service.name", "web")]);
    cat.commit_segment(&commit("t", "seg", &[(&web, 1, 2)]))
        .await
        .unwrap();
    assert_eq!(cat.series("t", TimeRange::ALL).await.unwrap(), vec![web]);
}
