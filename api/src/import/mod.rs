//! `stackhouse import FILE...`: sends profile files to a running Stackhouse, each to the
//! endpoint of its detected format (OTLP to `/v1development/profiles`, everything else to
//! Pyroscope's `/ingest`), and reports what was stored and what was refused. What it needs
//! to know of a format (its `format=` value, its OTLP encoding, its file extensions) the
//! format says itself ([`WireFormat`]), so a new one needs nothing here.
//!
//! `--service` and `--label` become the `/ingest` application name and tags. An OTLP file
//! carries its own resources: the flags then override (or add) `service.name` and the
//! labels on every resource of the decoded request, which is re-encoded as protobuf; with
//! neither flag the file is sent as it is.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use prost::Message;
use stackhouse_proto::otlp_collector::{ExportProfilesServiceRequest, ExportProfilesServiceResponse};
use stackhouse_proto::otlp_common::{AnyValue, KeyValue, any_value::Value};

use stackhouse_ingest::formats::detect::{detect, gunzip, is_gzip};
use stackhouse_ingest::formats::{self, Encoding, WireFormat};

/// Largest file content considered, after gunzip.
const MAX_FILE_BYTES: usize = 1 << 30;

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    #[command(flatten)]
    pub remote: crate::remote::Remote,
    /// Service name for formats without one (default: the file name without extensions);
    /// for OTLP files it replaces every resource's `service.name`.
    #[arg(long)]
    pub service: Option<String>,
    /// A label (`key=value`) added to every profile; repeatable.
    #[arg(long = "label", value_name = "KEY=VALUE", value_parser = parse_label)]
    pub labels: Vec<(String, String)>,
    /// Files to import: OTLP (protobuf or JSON), pprof, JFR, speedscope or folded, each
    /// optionally gzipped.
    #[arg(required = true, value_name = "FILE")]
    pub files: Vec<PathBuf>,
}

fn parse_label(s: &str) -> Result<(String, String), String> {
    let (k, v) = s
        .split_once('=')
        .ok_or_else(|| format!("invalid label {s:?}: want key=value"))?;
    let k = k.trim();
    if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)) {
        return Err(format!("invalid label key {k:?}: use [A-Za-z0-9_.-]"));
    }
    Ok((k.to_string(), v.to_string()))
}

/// What importing one file did.
#[derive(Debug, Default)]
pub struct Outcome {
    pub profiles: u64,
    pub samples: u64,
    pub rejected: Option<String>,
}

#[derive(Debug, Default)]
pub struct Summary {
    pub imported: usize,
    pub profiles: u64,
    pub samples: u64,
    pub bytes: u64,
    pub rejected: Vec<(PathBuf, String)>,
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "imported {} files: {} profiles, {} samples, {} bytes; {} rejected",
            self.imported,
            self.profiles,
            self.samples,
            self.bytes,
            self.rejected.len()
        )?;
        for (path, message) in &self.rejected {
            writeln!(f, "rejected {}: {message}", path.display())?;
        }
        Ok(())
    }
}

/// Imports every file; prints the summary on stdout. Returns whether all were stored.
pub async fn run(args: ImportArgs) -> anyhow::Result<bool> {
    if let Some(service) = &args.service
        && (service.is_empty() || service.contains(['{', '}']))
    {
        anyhow::bail!("invalid --service {service:?}: must be non-empty, without braces");
    }
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(600))
        .build()
        .context("building the HTTP client")?;
    let sizes: Vec<u64> = args
        .files
        .iter()
        .map(|p| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0))
        .collect();
    let bar = progress_bar(sizes.iter().sum());
    let mut summary = Summary::default();
    for (path, size) in args.files.iter().zip(sizes) {
        bar.set_message(path.display().to_string());
        let outcome = import_file(&client, &args, path).await;
        bar.inc(size);
        summary.profiles += outcome.profiles;
        summary.samples += outcome.samples;
        match outcome.rejected {
            Some(message) => summary.rejected.push((path.clone(), message)),
            None => {
                summary.imported += 1;
                summary.bytes += size;
            }
        }
    }
    bar.finish_and_clear();
    print!("{summary}");
    Ok(summary.rejected.is_empty())
}

fn progress_bar(total: u64) -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let bar = ProgressBar::with_draw_target(Some(total), target);
    bar.set_style(
        ProgressStyle::with_template("{bar:30} {bytes}/{total_bytes} {wide_msg}")
            .expect("static template")
            .progress_chars("=> "),
    );
    bar
}

async fn import_file(client: &reqwest::Client, args: &ImportArgs, path: &Path) -> Outcome {
    match try_import(client, args, path).await {
        Ok(outcome) => outcome,
        Err(message) => Outcome {
            rejected: Some(message),
            ..Outcome::default()
        },
    }
}

/// A request ready to send: where, what, how.
struct Upload {
    url: String,
    content_type: &'static str,
    gzipped: bool,
    body: Vec<u8>,
    kind: &'static dyn WireFormat,
    /// Profiles and samples in an OTLP request, counted here: its response has no counts.
    counted: Option<(u64, u64)>,
}

async fn try_import(client: &reqwest::Client, args: &ImportArgs, path: &Path) -> Result<Outcome, String> {
    let raw = std::fs::read(path).map_err(|e| format!("cannot read: {e}"))?;
    let upload = prepare(args, path, raw)?;
    let mut request = client
        .post(&upload.url)
        .header(reqwest::header::CONTENT_TYPE, upload.content_type);
    if upload.gzipped {
        request = request.header(reqwest::header::CONTENT_ENCODING, "gzip");
    }
    request = args.remote.with_credentials(request);
    let response = request
        .body(upload.body)
        .send()
        .await
        .map_err(|e| format!("cannot send to {}: {e}", upload.url))?;
    let status = response.status();
    let body = response
        .bytes()
        .await
        .map_err(|e| format!("reading the response from {}: {e}", upload.url))?;
    match upload.counted {
        Some(counts) => otlp_outcome(status, &body, upload.kind, counts),
        None => Ok(ingest_outcome(status, &body)),
    }
}

fn prepare(args: &ImportArgs, path: &Path, raw: Vec<u8>) -> Result<Upload, String> {
    let content = gunzip(&raw, MAX_FILE_BYTES).map_err(|e| format!("cannot gunzip: {e}"))?;
    let kind = detect(&content)?;
    let base = args.remote.url("");
    let base = base.as_str();
    let gzipped = is_gzip(&raw);
    if let Some(format) = kind.ingest_name() {
        let service = match &args.service {
            Some(s) => s.clone(),
            None => file_service_name(path),
        };
        let name = ingest_name(&service, &args.labels);
        let query = url::form_urlencoded::Serializer::new(String::new())
            .append_pair("name", &name)
            .append_pair("format", format)
            .finish();
        drop(content);
        return Ok(Upload {
            url: format!("{base}/ingest?{query}"),
            content_type: "application/octet-stream",
            gzipped,
            body: raw,
            kind,
            counted: None,
        });
    }
    let encoding = kind
        .otlp_encoding()
        .ok_or_else(|| format!("{} files cannot be imported", kind.name()))?;
    let decoded = match encoding {
        Encoding::Json => stackhouse_ingest::otlp::decode_json(&content),
        Encoding::Protobuf => stackhouse_ingest::otlp::decode_protobuf(&content),
    };
    let url = format!("{base}/v1development/profiles");
    let overrides = args.service.is_some() || !args.labels.is_empty();
    if overrides {
        let mut request = decoded.map_err(|e| format!("cannot apply --service/--label: {e}"))?;
        relabel(&mut request, args.service.as_deref(), &args.labels);
        let counted = Some(count(&request));
        return Ok(Upload {
            url,
            content_type: "application/x-protobuf",
            gzipped: false,
            body: request.encode_to_vec(),
            kind: &formats::otlp::PROTOBUF,
            counted,
        });
    }
    // Sent as it is: the server knows older layouts this client may not decode.
    let counted = Some(decoded.as_ref().map(count).unwrap_or((0, 0)));
    drop(content);
    Ok(Upload {
        url,
        content_type: match encoding {
            Encoding::Json => "application/json",
            Encoding::Protobuf => "application/x-protobuf",
        },
        gzipped,
        body: raw,
        kind,
        counted,
    })
}

/// The file name without its format extensions: `cpu.pb.gz` → `cpu`.
pub fn file_service_name(path: &Path) -> String {
    let known = |ext: &str| {
        // gzip is the one compression import undoes, whatever the format inside.
        ext == "gz" || formats::ALL.iter().any(|f| f.file_extensions().contains(&ext))
    };
    let mut name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    while let Some((stem, ext)) = name.rsplit_once('.') {
        if stem.is_empty() || !known(&ext.to_ascii_lowercase()) {
            break;
        }
        name = stem.to_string();
    }
    let name: String = name
        .chars()
        .map(|c| if c == '{' || c == '}' { '_' } else { c })
        .collect();
    if name.is_empty() { "import".into() } else { name }
}

/// `service{k="v",...}` with values quoted, as `/ingest` parses it.
pub fn ingest_name(service: &str, labels: &[(String, String)]) -> String {
    let tags: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect();
    format!("{service}{{{}}}", tags.join(","))
}

fn relabel(request: &mut ExportProfilesServiceRequest, service: Option<&str>, labels: &[(String, String)]) {
    let sets = service
        .map(|s| ("service.name", s))
        .into_iter()
        .chain(labels.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let sets: Vec<(&str, &str)> = sets.collect();
    for rp in &mut request.resource_profiles {
        let attrs = &mut rp.resource.get_or_insert_with(Default::default).attributes;
        for &(key, value) in &sets {
            let value = Some(AnyValue {
                value: Some(Value::StringValue(value.to_string())),
            });
            match attrs.iter_mut().find(|kv| kv.key == key) {
                Some(kv) => kv.value = value,
                None => attrs.push(KeyValue {
                    key: key.to_string(),
                    value,
                    ..Default::default()
                }),
            }
        }
    }
}

fn count(request: &ExportProfilesServiceRequest) -> (u64, u64) {
    let profiles = request
        .resource_profiles
        .iter()
        .flat_map(|r| &r.scope_profiles)
        .flat_map(|s| &s.profiles);
    profiles.fold((0, 0), |(p, s), profile| {
        (p + 1, s + profile.samples.len() as u64)
    })
}

/// `/ingest` answers `{"profiles":N,"samples":M}`, or `{"error":...}` (with the stored
/// counts when only part was refused).
fn ingest_outcome(status: reqwest::StatusCode, body: &[u8]) -> Outcome {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    let field = |k: &str| {
        json.as_ref()
            .and_then(|j| j.get(k))
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
    };
    let rejected = if status.is_success() {
        None
    } else {
        Some(error_message(status, body, json.as_ref()))
    };
    Outcome {
        profiles: field("profiles"),
        samples: field("samples"),
        rejected,
    }
}

fn otlp_outcome(
    status: reqwest::StatusCode,
    body: &[u8],
    sent: &'static dyn WireFormat,
    counted: (u64, u64),
) -> Result<Outcome, String> {
    let json: Option<serde_json::Value> = serde_json::from_slice(body).ok();
    // The server answers in the encoding it was sent.
    let encoding = sent.otlp_encoding();
    if !status.is_success() {
        if encoding == Some(Encoding::Protobuf)
            && let Ok(s) = tonic_types::Status::decode(body)
            && !s.message.is_empty()
        {
            return Err(format!("{status}: {}", s.message));
        }
        return Err(error_message(status, body, json.as_ref()));
    }
    let (rejected_profiles, message) = match encoding {
        Some(Encoding::Json) => {
            let partial = json.as_ref().and_then(|j| j.get("partialSuccess"));
            let rejected = partial
                .and_then(|p| p.get("rejectedProfiles"))
                .and_then(|v| v.as_str().and_then(|s| s.parse().ok()).or(v.as_u64()))
                .unwrap_or(0);
            let message = partial
                .and_then(|p| p.get("errorMessage"))
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_string();
            (rejected, message)
        }
        _ => {
            let response = ExportProfilesServiceResponse::decode(body)
                .map_err(|e| format!("undecodable response from the server: {e}"))?;
            let p = response.partial_success.unwrap_or_default();
            (p.rejected_profiles.max(0) as u64, p.error_message)
        }
    };
    Ok(Outcome {
        profiles: counted.0.saturating_sub(rejected_profiles),
        samples: counted.1,
        rejected: (rejected_profiles > 0).then(|| {
            format!(
                "{rejected_profiles} of {} profiles rejected: {message}",
                counted.0
            )
        }),
    })
}

fn error_message(status: reqwest::StatusCode, body: &[u8], json: Option<&serde_json::Value>) -> String {
    let from_json = json.and_then(|j| {
        j.get("error")
            .or_else(|| j.get("message"))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    });
    let message = from_json.unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_string());
    format!("{status}: {message}")
}

#[cfg(test)]
mod tests {
    use stackhouse_proto::otlp_profiles::{Profile, ResourceProfiles, Sample, ScopeProfiles};
    use stackhouse_proto::otlp_resource::Resource;

    use super::*;

    #[test]
    fn names_and_labels() {
        assert_eq!(file_service_name(Path::new("/x/cpu-js.pb.gz")), "cpu-js");
        assert_eq!(file_service_name(Path::new("simple.speedscope.json")), "simple");
        assert_eq!(file_service_name(Path::new("kafka-cpu.jfr.gz")), "kafka-cpu");
        assert_eq!(file_service_name(Path::new("billing.api.folded")), "billing.api");
        assert_eq!(file_service_name(Path::new(".gz")), ".gz");
        assert_eq!(file_service_name(Path::new("a{b}.txt")), "a_b_");
        for ext in [
            "gz",
            "pb",
            "pprof",
            "prof",
            "proto",
            "jfr",
            "json",
            "speedscope",
            "folded",
            "txt",
            "collapsed",
        ] {
            assert_eq!(
                file_service_name(Path::new(&format!("cpu.{ext}"))),
                "cpu",
                "{ext}"
            );
            let upper = ext.to_ascii_uppercase();
            assert_eq!(
                file_service_name(Path::new(&format!("cpu.{upper}"))),
                "cpu",
                "{upper}"
            );
        }
        assert_eq!(file_service_name(Path::new("cpu.xml")), "cpu.xml");
        assert_eq!(
            ingest_name(
                "svc",
                &[("env".into(), "prod".into()), ("q".into(), "a\"b,c".into())]
            ),
            r#"svc{env="prod",q="a\"b,c"}"#
        );
        assert_eq!(ingest_name("svc", &[]), "svc{}");
        assert_eq!(parse_label("k=v=w"), Ok(("k".into(), "v=w".into())));
        assert!(parse_label("novalue").is_err());
        assert!(parse_label("a b=1").is_err());
    }

    #[test]
    fn the_name_round_trips_through_the_server_parser() {
        let labels = vec![("env".to_string(), "a \"quoted\", {odd} value\\".to_string())];
        let parsed = stackhouse_ingest::pyroscope::parse_name(&ingest_name("svc", &labels)).unwrap();
        assert_eq!(parsed.service, "svc");
        assert_eq!(parsed.tags, labels);
    }

    #[test]
    fn otlp_relabel_overrides_and_adds() {
        let kv = |k: &str, v: &str| KeyValue {
            key: k.into(),
            value: Some(AnyValue {
                value: Some(Value::StringValue(v.into())),
            }),
            ..Default::default()
        };
        let mut request = ExportProfilesServiceRequest {
            resource_profiles: vec![
                ResourceProfiles {
                    resource: Some(Resource {
                        attributes: vec![kv("service.name", "old"), kv("host", "h")],
                        ..Default::default()
                    }),
                    scope_profiles: vec![ScopeProfiles {
                        profiles: vec![Profile {
                            samples: vec![Sample::default(), Sample::default()],
                            ..Default::default()
                        }],
                        ..Default::default()
                    }],
                    ..Default::default()
                },
                ResourceProfiles::default(),
            ],
            ..Default::default()
        };
        relabel(&mut request, Some("new"), &[("env".into(), "prod".into())]);
        assert_eq!(
            request.resource_profiles[0].resource.as_ref().unwrap().attributes,
            vec![kv("service.name", "new"), kv("host", "h"), kv("env", "prod")]
        );
        assert_eq!(
            request.resource_profiles[1].resource.as_ref().unwrap().attributes,
            vec![kv("service.name", "new"), kv("env", "prod")]
        );
        assert_eq!(count(&request), (1, 2));
    }

    #[test]
    fn summary_format() {
        let summary = Summary {
            imported: 2,
            profiles: 3,
            samples: 40,
            bytes: 1234,
            rejected: vec![(
                PathBuf::from("bad.txt"),
                "400 Bad Request: invalid folded: line 1".into(),
            )],
        };
        assert_eq!(
            summary.to_string(),
            "imported 2 files: 3 profiles, 40 samples, 1234 bytes; 1 rejected\n\
             rejected bad.txt: 400 Bad Request: invalid folded: line 1\n"
        );
    }

    #[test]
    fn server_answers() {
        let ok = ingest_outcome(reqwest::StatusCode::OK, br#"{"profiles":2,"samples":9}"#);
        assert_eq!((ok.profiles, ok.samples, ok.rejected), (2, 9, None));
        let bad = ingest_outcome(
            reqwest::StatusCode::BAD_REQUEST,
            br#"{"error":"invalid pprof: x"}"#,
        );
        assert_eq!(bad.rejected.as_deref(), Some("400 Bad Request: invalid pprof: x"));
        let partial = ExportProfilesServiceResponse {
            partial_success: Some(stackhouse_proto::otlp_collector::ExportProfilesPartialSuccess {
                rejected_profiles: 1,
                error_message: "profile 0: bad".into(),
            }),
        };
        let o = otlp_outcome(
            reqwest::StatusCode::OK,
            &partial.encode_to_vec(),
            &formats::otlp::PROTOBUF,
            (3, 30),
        )
        .unwrap();
        assert_eq!(o.profiles, 2);
        assert_eq!(
            o.rejected.as_deref(),
            Some("1 of 3 profiles rejected: profile 0: bad")
        );
        let status = tonic_types::Status {
            code: 3,
            message: "invalid".into(),
            details: Vec::new(),
        };
        let err = otlp_outcome(
            reqwest::StatusCode::BAD_REQUEST,
            &status.encode_to_vec(),
            &formats::otlp::PROTOBUF,
            (1, 1),
        )
        .unwrap_err();
        assert_eq!(err, "400 Bad Request: invalid");
    }
}
