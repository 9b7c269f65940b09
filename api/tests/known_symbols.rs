//! Ingest looks each stack and location up in what the writer has committed: a request
//! that resends stored stacks (in its own dictionary order) brings no symbols for them, its
//! samples get the same stack ids as without the lookup, and queries answer the same.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use std::collections::BTreeMap;
use std::sync::Arc;

use prost::Message;
use stackhouse_ingest::convert::{RequestBuilder, Source};
use stackhouse_ingest::folded;
use stackhouse_ingest::formats::{self, Body, Params};
use stackhouse_ingest::otlp::{AnySeries, Dictionary, Limits, Normalized, Tenant, normalize_within};
use stackhouse_ingest::pipeline::{Payload, Pipeline};
use stackhouse_proto::otlp_collector::ExportProfilesServiceRequest;
use stackhouse_query::{FlamegraphQuery, QueryConfig, QueryEngine, Scope};
use stackhouse_storage::catalog::open_catalog;
use stackhouse_storage::clock::system_now_nanos as now_nanos;
use stackhouse_storage::compaction::{CompactMode, CompactionConfig, Compactor};
use stackhouse_storage::model::{ProfileType, SymbolId, TimeRange};
use stackhouse_storage::store::Store;
use stackhouse_storage::symbols::{KnownSymbols, SymbolCache};
use stackhouse_storage::writer::{Writer, WriterConfig};

const TENANT: &str = "acme";
const FIRST: &str = "main;work;parse 10\nmain;work;emit 4\nmain;idle 5\n";
/// The stacks of `FIRST` in another order after a new one, so that every dictionary index
/// differs, and a new stack under a known frame.
const SECOND: &str = "main;gc;sweep 3\nmain;idle 2\nmain;work;emit 6\nmain;work;parse 1\n";

fn request(text: &str, time_nanos: i64) -> ExportProfilesServiceRequest {
    let mut builder = RequestBuilder::new();
    let source = Source {
        resource: vec![("service.name".into(), "app".into())],
        time_nanos: Some(time_nanos),
        sample_rate: Some(100),
        ..Source::default()
    };
    folded::convert(text.as_bytes(), &source, &mut builder).unwrap();
    builder.finish()
}

/// Root-first path → value, summed over the folded texts themselves.
fn expected(texts: &[&str]) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in texts.iter().flat_map(|t| t.lines()) {
        let (path, value) = line.rsplit_once(' ').unwrap();
        *out.entry(path.to_string()).or_default() += value.parse::<i64>().unwrap();
    }
    out
}

fn normalized(request: &ExportProfilesServiceRequest, known: &KnownSymbols) -> Normalized {
    let tenant = Tenant {
        limits: &Limits::NONE,
        series: &mut AnySeries,
        relabel: &stackhouse_ingest::relabel::NO_RULES,
        usage: &stackhouse_ingest::usage::NO_GROUPS,
        known,
    };
    let n = normalize_within(TENANT, request, &Dictionary::of(request), 1, tenant).unwrap();
    assert_eq!(n.rejected_profiles, 0, "{:?}", n.errors);
    n
}

fn stack_values(n: &Normalized) -> Vec<(SymbolId, i64)> {
    let mut rows: Vec<_> = n.batch.samples.iter().map(|s| (s.stack_id, s.value)).collect();
    rows.sort();
    rows
}

fn leaf_paths(node: &stackhouse_query::Node, prefix: &str, out: &mut BTreeMap<String, i64>) {
    if node.self_value != 0 {
        out.insert(prefix.to_string(), node.self_value);
    }
    for c in &node.children {
        let path = if prefix.is_empty() {
            c.name.clone()
        } else {
            format!("{prefix};{}", c.name)
        };
        leaf_paths(c, &path, out);
    }
}

async fn answer(engine: &QueryEngine, query: &FlamegraphQuery) -> BTreeMap<String, i64> {
    let mut got = BTreeMap::new();
    leaf_paths(&engine.flamegraph(query).await.unwrap().root, "", &mut got);
    got
}

#[tokio::test]
async fn resent_stacks_bring_no_nodes_and_keep_their_ids_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&format!("file://{}", dir.path().join("objects").display())).unwrap();
    let catalog = open_catalog(&format!(
        "sqlite://{}?mode=rwc",
        dir.path().join("catalog.db").display()
    ))
    .await
    .unwrap();
    let symbols = Arc::new(SymbolCache::new(store.clone(), catalog.clone()));
    let writer = Arc::new(Writer::start(
        store.clone(),
        catalog.clone(),
        symbols.clone(),
        WriterConfig {
            flush_interval: std::time::Duration::from_millis(20),
            ..WriterConfig::default()
        },
    ));
    let pipeline = Pipeline::new(writer.clone(), stackhouse_storage::clock::system());
    let t0 = now_nanos() - 60_000_000_000;
    let (first, second) = (request(FIRST, t0), request(SECOND, t0 + 1_000_000_000));
    let export = |r: &ExportProfilesServiceRequest| {
        let payload = Payload {
            format: &formats::otlp::PROTOBUF,
            body: Body::Raw(r.encode_to_vec().into()),
            params: Params::default(),
            sent_bytes: 0,
        };
        pipeline.ingest(TENANT.into(), payload)
    };

    let known = writer.known(TENANT);
    assert!(known.is_empty(), "nothing is committed yet");
    export(&first).await.unwrap();
    assert_eq!(
        known.len(),
        (3, 5),
        "the three stacks and five frames of the first request, once committed"
    );

    // Normalized against what is committed, the second request brings the nodes of its new
    // stack only (main, main;gc, main;gc;sweep) and its two new frames; without the
    // lookup, every node of its four stacks (main, gc, sweep, idle, work, emit, parse)
    // and all seven frames.
    let looked_up = normalized(&second, &known);
    let hashed = normalized(&second, &KnownSymbols::default());
    assert_eq!(looked_up.batch.stacks.len(), 3);
    assert_eq!(looked_up.batch.path_keys.len(), 1);
    assert_eq!(looked_up.batch.locations.len(), 2);
    assert_eq!(looked_up.batch.location_keys.len(), 2);
    assert_eq!(hashed.batch.stacks.len(), 7);
    assert_eq!(hashed.batch.path_keys.len(), 4);
    assert_eq!(hashed.batch.locations.len(), 7);
    assert_eq!(stack_values(&looked_up), stack_values(&hashed));

    export(&second).await.unwrap();
    assert_eq!(known.len(), (4, 7));

    // A query process of its own reads the samples of both requests with their frames.
    let profile_type: ProfileType = hashed.batch.series.values().next().unwrap().profile_type.clone();
    let engine = QueryEngine::new(
        store.clone(),
        catalog.clone(),
        Arc::new(SymbolCache::new(store.clone(), catalog.clone())),
        QueryConfig::default(),
    );
    let query = FlamegraphQuery {
        scope: Scope::new(
            TENANT,
            profile_type,
            TimeRange {
                start: t0 - 1,
                end: t0 + 10_000_000_000,
            },
        ),
        group_by: vec![],
        max_nodes: 0,
    };
    assert_eq!(answer(&engine, &query).await, expected(&[FIRST, SECOND]));

    // Compaction rewrites the symbol objects; the writer's next look at them rebuilds its
    // index from storage, and the paths with it.
    Compactor::new(
        store.clone(),
        catalog.clone(),
        CompactionConfig::default(),
        stackhouse_storage::clock::system(),
    )
    .compact_tenant(TENANT, CompactMode::Full)
    .await
    .unwrap();
    drop(symbols.read(TENANT).await.unwrap());
    assert!(
        known.is_empty(),
        "paths are forgotten with the index they came from"
    );
    export(&first).await.unwrap();
    assert_eq!(known.len(), (3, 5));
    assert_eq!(answer(&engine, &query).await, expected(&[FIRST, SECOND, FIRST]));
}
