//! Compiles the wire definitions with protox so that no system `protoc` is needed. The
//! encoded descriptor set is kept too: the OTLP/JSON decoder maps JSON onto messages by it.

use std::path::PathBuf;

use prost::Message;

const PROTOS: &[&str] = &[
    "opentelemetry/proto/collector/profiles/v1development/profiles_service.proto",
    "opentelemetry/proto/collector/profiles/v1experimental/profiles_service.proto",
    "perftools/profiles/profile.proto",
    "push/v1/push.proto",
    "querier/v1/querier.proto",
    "settings/v1/setting.proto",
    "settings/v1/recording_rules.proto",
    "prometheus/remote.proto",
];

fn main() -> std::io::Result<()> {
    println!("cargo:rerun-if-changed=protos");
    let fds = protox::compile(PROTOS, ["protos"]).map_err(std::io::Error::other)?;
    let out_dir = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    std::fs::write(out_dir.join("descriptors.bin"), fds.encode_to_vec())?;
    // Type names let the Connect layer find a message's descriptor for protojson.
    let mut config = prost_build::Config::new();
    config.enable_type_names();
    tonic_prost_build::configure()
        .include_file("mod.rs")
        .codec_path("crate::codec::ValidatingCodec")
        .compile_fds_with_config(fds, config)
}
