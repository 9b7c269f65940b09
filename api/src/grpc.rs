//! OTLP gRPC receiver: `opentelemetry.proto.collector.profiles.v1development.ProfilesService`.

use std::sync::Arc;

use stackhouse_proto::otlp_collector::profiles_service_server::{ProfilesService, ProfilesServiceServer};
use stackhouse_proto::otlp_collector::{ExportProfilesServiceRequest, ExportProfilesServiceResponse};
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};

use crate::export::{ExportError, Exporter};
use crate::tenant;

pub struct OtlpProfiles {
    exporter: Arc<Exporter>,
}

pub fn service(exporter: Arc<Exporter>, max_message_bytes: usize) -> ProfilesServiceServer<OtlpProfiles> {
    ProfilesServiceServer::new(OtlpProfiles { exporter })
        .accept_compressed(CompressionEncoding::Gzip)
        .send_compressed(CompressionEncoding::Gzip)
        .max_decoding_message_size(max_message_bytes)
}

#[tonic::async_trait]
impl ProfilesService for OtlpProfiles {
    async fn export(
        &self,
        request: Request<ExportProfilesServiceRequest>,
    ) -> Result<Response<ExportProfilesServiceResponse>, Status> {
        let tenant = tenant::parse(request.metadata().get(tenant::HEADER).map(|v| v.as_bytes()))
            .map_err(Status::invalid_argument)?;
        let response = self
            .exporter
            .export(tenant, request.into_inner())
            .await
            .map_err(|e| match e {
                ExportError::InvalidArgument(m) => Status::invalid_argument(m),
                ExportError::Unavailable(m) => Status::unavailable(m),
            })?;
        Ok(Response::new(response))
    }
}

/// tonic reports an over-limit message as OUT_OF_RANGE; OTLP says RESOURCE_EXHAUSTED (and
/// senders must not retry it). Our handlers never return OUT_OF_RANGE themselves.
pub fn remap_too_large<B>(mut response: http::Response<B>) -> http::Response<B> {
    let out_of_range = (tonic::Code::OutOfRange as i32).to_string();
    if response
        .headers()
        .get("grpc-status")
        .is_some_and(|v| v.as_bytes() == out_of_range.as_bytes())
    {
        let exhausted = (tonic::Code::ResourceExhausted as i32).to_string();
        response.headers_mut().insert(
            "grpc-status",
            http::HeaderValue::from_str(&exhausted).expect("digits"),
        );
    }
    response
}
