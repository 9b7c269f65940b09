//! HTTP and gRPC servers, configuration and the `stackhouse` binary.

pub mod auth;
pub mod config;
pub mod debuginfo_upload;
pub mod delete_cli;
pub mod error;
pub mod grpc;
pub mod http;
pub mod import;
pub mod monitoring;
pub mod read;
pub mod recording;
pub mod remote;
pub mod route;
pub mod server;
pub mod state;
pub mod telemetry;
pub mod tenant;
pub mod tls;
pub mod tokens;
pub mod wire;
