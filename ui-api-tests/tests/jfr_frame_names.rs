//! `--jfr-frame-names` (and its config-file key) reaches the JFR conversion behind
//! `/ingest?format=jfr`: the stored flame graph has Pyroscope's names by default and the
//! JDK's dotted names when asked, each equal to what the independent reader computes from
//! `jfr print --json`.

// One dependency list serves all of the package's tests, benches and binaries.
#![allow(unused_crate_dependencies)]

use ui_api_tests::client::Api;
use ui_api_tests::format_checks::assert_stored;
use ui_api_tests::ingest_client::Ingest;
use ui_api_tests::jfr_expected::from_totals;
use ui_api_tests::jfr_reader::{self, Names};
use ui_api_tests::server::{Options, Server};

async fn ingest_and_check(options: Options, names: Names, what: &str) {
    let path = ui_api_tests::testdata("jfr/kafka-cpu.jfr.gz");
    let expected = from_totals(&jfr_reader::read_named(&path, names));
    let server = Server::start(options).await;
    let answer = Ingest::new(server.http())
        .ingest(
            &[
                ("name", "kafka{env=names}".to_string()),
                ("format", "jfr".to_string()),
            ],
            std::fs::read(&path).unwrap(),
        )
        .await;
    assert_eq!(answer.status, 200, "{what}: {}", answer.text());
    let (from, to) = expected.span.expect("the recording's span");
    let api = Api::new(server.http());
    assert_stored(&api, r#"{service.name="kafka"}"#, (from, to), &expected, what).await;
    let frames: Vec<&String> = expected.observations.iter().flat_map(|o| &o.frames).collect();
    let (pyroscope, jdk) = ("kafka/network/Processor.poll", "kafka.network.Processor.poll");
    let want = if names == Names::Jdk { jdk } else { pyroscope };
    assert!(frames.iter().any(|f| *f == want), "{what}");
    assert!(
        !frames
            .iter()
            .any(|f| *f == if names == Names::Jdk { pyroscope } else { jdk })
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn pyroscope_names_by_default() {
    ingest_and_check(Options::default(), Names::Pyroscope, "default").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn jdk_names_by_flag_and_by_config_file() {
    let flag = Options {
        extra_args: vec!["--jfr-frame-names".into(), "jdk".into()],
        ..Options::default()
    };
    ingest_and_check(flag, Names::Jdk, "--jfr-frame-names jdk").await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("stackhouse.yaml");
    std::fs::write(&config, "jfr-frame-names: jdk\n").unwrap();
    let file = Options {
        extra_args: vec!["--config".into(), config.display().to_string()],
        ..Options::default()
    };
    ingest_and_check(file, Names::Jdk, "config jfr-frame-names: jdk").await;
}
