//! HTTP and gRPC servers, configuration and the `stackhouse` binary.

// Every dependency of the library is used by the library; test-only crates are dev-dependencies.
// (Not in [workspace.lints]: there it would flag each integration test and binary for the
// package dependencies only the library uses.)
#![cfg_attr(not(test), deny(unused_crate_dependencies))]

pub mod auth;
pub mod config;
pub mod debuginfo_upload;
pub mod error;
pub mod grpc;
pub mod http;
pub mod import;
pub mod monitoring;
pub mod read;
pub mod route;
pub mod server;
pub mod state;
pub mod telemetry;
pub mod tenant;
pub mod tls;
pub mod tokens;
pub mod wire;
