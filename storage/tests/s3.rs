//! Segments and the writer on a real S3-compatible server: moto, started per test on a free
//! localhost port. CI installs it with `python3 -m pip install 'moto[server]'`; without it
//! these tests fail, they never skip.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::AsArray;
use arrow::datatypes::Int64Type;
use common::*;
use futures::TryStreamExt;
use object_store::path::Path;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use stackhouse_storage::catalog::{TableKind, open_catalog};
use stackhouse_storage::model::TimeRange;
use stackhouse_storage::segment::{read_symbols, symbols_key, write_segment};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::{SymbolCache, SymbolIndex};
use stackhouse_storage::writer::{Writer, WriterConfig};

const BUCKET: &str = "stackhouse-test";

/// A moto server child process, killed when dropped.
struct Moto {
    child: Child,
    port: u16,
    log: tempfile::NamedTempFile,
}

impl Moto {
    fn start() -> Moto {
        match Command::new("python3")
            .args(["-c", "import moto.server"])
            .output()
        {
            Err(e) => panic!("python3 is required to run the moto S3 server for these tests: {e}"),
            Ok(out) if !out.status.success() => panic!(
                "moto is not installed; run `python3 -m pip install 'moto[server]'`: {}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Ok(_) => {}
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        // moto logs every request; a file never fills up and blocks it like a pipe would.
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = Command::new("python3")
            .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log.reopen().unwrap())
            .spawn()
            .expect("starting python3 -m moto.server");
        let mut moto = Moto { child, port, log };
        moto.wait_until_listening();
        moto
    }

    fn wait_until_listening(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("moto exited with {status} before listening:\n{}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "moto did not listen within 60 s:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates a bucket with a plain HTTP request: object_store has no bucket API, and moto
    /// does not check signatures.
    fn create_bucket(&self, bucket: &str) {
        let mut conn = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        let request = format!(
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        );
        conn.write_all(request.as_bytes()).unwrap();
        let mut response = String::new();
        conn.read_to_string(&mut response).unwrap();
        assert!(
            response.starts_with("HTTP/1.1 200"),
            "creating bucket {bucket}: {response}"
        );
    }

    /// A store on `s3://{bucket}/{prefix}`, configured by options rather than process env.
    /// No `aws_allow_http`: a localhost endpoint must be accepted over HTTP by itself.
    fn store(&self, url: &str) -> Store {
        let endpoint = self.endpoint();
        Store::open_with_options(
            url,
            &[
                ("aws_endpoint", endpoint.as_str()),
                ("aws_access_key_id", "testing"),
                ("aws_secret_access_key", "testing"),
                ("aws_region", "us-east-1"),
            ],
        )
        .unwrap()
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn segments_round_trip_on_s3() {
    let moto = Moto::start();
    moto.create_bucket(BUCKET);
    let store = moto.store(&format!("s3://{BUCKET}/deployments/one"));
    assert_eq!(store.base_url().as_str(), format!("s3://{BUCKET}/"));
    store.ping().await.expect("the bucket is reachable");
    assert!(
        moto.store("s3://no-such-bucket/x").ping().await.is_err(),
        "ping reports a missing bucket"
    );

    let batch = sample_batch("acme");
    let written = write_segment(&store, &batch, "seg-s3", 0, CREATED_AT)
        .await
        .unwrap();
    let seg = &written.segment;

    let listed: Vec<String> = store
        .object_store()
        .list(Some(&Path::from("deployments/one")))
        .map_ok(|meta| meta.location.to_string())
        .try_collect()
        .await
        .unwrap();
    let samples = "deployments/one/tenants/acme/segments/seg-s3/samples.parquet".to_string();
    let mut expected: Vec<String> = ["attribute_sets", "functions", "locations", "mappings", "stacks"]
        .iter()
        .map(|t| format!("deployments/one/tenants/acme/symbols/seg-s3/{t}.parquet"))
        .chain([samples.clone()])
        .collect();
    let mut listed = listed;
    listed.sort();
    expected.sort();
    assert_eq!(listed, expected, "everything under the prefix, nothing else");
    assert_eq!(
        store.path(&seg.object(TableKind::Samples).unwrap().key).as_ref(),
        samples
    );
    let mut symbol_paths: Vec<String> = written
        .symbols
        .iter()
        .map(|o| store.path(&o.key).to_string())
        .collect();
    symbol_paths.sort();
    let expected_symbols: Vec<String> = expected.iter().filter(|p| **p != samples).cloned().collect();
    assert_eq!(symbol_paths, expected_symbols);

    let mut index = SymbolIndex::default();
    for object in &written.symbols {
        index.merge(read_symbols(&store, object).await.unwrap());
    }
    assert_eq!(index.stacks, batch.stacks);
    assert_eq!(index.locations, batch.locations);
    assert_eq!(index.functions, batch.functions);
    assert_eq!(index.mappings, batch.mappings);
    assert_eq!(index.attr_sets, batch.attr_sets);

    let bytes = read_object(&store, seg, TableKind::Samples).await;
    let mut times: Vec<i64> = Vec::new();
    for rows in ParquetRecordBatchReaderBuilder::try_new(bytes)
        .unwrap()
        .build()
        .unwrap()
    {
        let rows = rows.unwrap();
        times.extend(
            rows.column_by_name("time_nanos")
                .unwrap()
                .as_primitive::<Int64Type>()
                .values()
                .iter(),
        );
    }
    assert_eq!(times.len(), 4);
    let mut sorted = times.clone();
    sorted.sort();
    assert_eq!(sorted, [50, 100, 200, 300]);
}

#[tokio::test]
async fn the_writer_deduplicates_symbols_on_s3() {
    let moto = Moto::start();
    moto.create_bucket(BUCKET);
    let dir = tempfile::tempdir().unwrap();
    let catalog = open_catalog(&format!("sqlite://{}", dir.path().join("catalog.db").display()))
        .await
        .unwrap();
    let config = WriterConfig {
        flush_interval: Duration::from_millis(20),
        ..Default::default()
    };
    let start = || {
        let store = moto.store(&format!("s3://{BUCKET}/prefix"));
        let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
        Writer::start(store, catalog.clone(), symbols, config.clone())
    };

    let first = start();
    let a = first.write(sample_batch("acme")).await.unwrap();
    first.shutdown().await;
    // A fresh cache must read the first segment's symbols back from S3.
    let second = start();
    let b = second.write(sample_batch("acme")).await.unwrap();
    second.shutdown().await;

    let segs = catalog.segments("acme", TimeRange::ALL).await.unwrap();
    let objects = |id: &str| segs.iter().find(|s| s.id == id).unwrap().objects.len();
    assert_eq!((objects(&a.segment_id), objects(&b.segment_id)), (1, 1));
    // Symbol objects are keyed by the segment that first stored them.
    let symbols = catalog.symbol_objects("acme").await.unwrap();
    let written_with = |id: &str| {
        symbols
            .iter()
            .filter(|o| o.key == symbols_key("acme", id, o.kind))
            .count()
    };
    assert_eq!(symbols.len(), 5, "five symbol tables, stored once");
    assert_eq!((written_with(&a.segment_id), written_with(&b.segment_id)), (5, 0));
}
