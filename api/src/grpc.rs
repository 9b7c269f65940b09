//! OTLP gRPC receivers: `opentelemetry.proto.collector.profiles.v1development.ProfilesService`
//! and the seed format's `...v1experimental.ProfilesService`.
//!
//! Hand-written instead of tonic-generated because the request must reach us as raw bytes:
//! which layout to decode depends on the `otlp-profiles-development-version` metadata,
//! and the seed format is converted, not decoded into the current types.

use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use prost::Message;
use stackhouse_ingest::formats::{self, Body as PayloadBody, Params, WireFormat};
use stackhouse_ingest::otlp::layout::{self, Layout};
use stackhouse_ingest::pipeline::{Payload, Pipeline};
use stackhouse_proto::otlp_collector::ExportProfilesServiceResponse;
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::{Body, BoxFuture, StdError};
use tonic::metadata::MetadataMap;
use tonic::server::{NamedService, UnaryService};
use tonic::{Status, body::Body as TonicBody};

use crate::auth::Auth;
use crate::error::ApiError;
use crate::monitoring::{self, Protocol};
use crate::tenant;

/// One OTLP profiles service: its gRPC name and the wire format of its requests.
pub trait ExportKind: Send + Sync + 'static {
    const SERVICE: &'static str;
    const PROTOCOL: Protocol;
    /// The format of the request bytes and what the metadata says about them.
    fn format(metadata: &MetadataMap) -> Result<(&'static dyn WireFormat, Params), ApiError>;
}

/// v1development, in the layout the metadata declares or the wire shows.
pub struct Development;

impl ExportKind for Development {
    const SERVICE: &'static str = "opentelemetry.proto.collector.profiles.v1development.ProfilesService";
    const PROTOCOL: Protocol = Protocol::OtlpGrpc;

    fn format(metadata: &MetadataMap) -> Result<(&'static dyn WireFormat, Params), ApiError> {
        let params = Params {
            layout: declared_layout(metadata)?,
            ..Params::default()
        };
        let format: &'static dyn WireFormat = &formats::otlp::PROTOBUF;
        Ok((format, params))
    }
}

/// The seed format (OTEP 239), converted into the current layout.
pub struct Experimental;

impl ExportKind for Experimental {
    const SERVICE: &'static str = "opentelemetry.proto.collector.profiles.v1experimental.ProfilesService";
    const PROTOCOL: Protocol = Protocol::OtlpExperimentalGrpc;

    fn format(_metadata: &MetadataMap) -> Result<(&'static dyn WireFormat, Params), ApiError> {
        let format: &'static dyn WireFormat = &formats::experimental::PROTOBUF;
        Ok((format, Params::default()))
    }
}

/// The layout named by `otlp-profiles-development-version`, if the sender set it.
pub fn declared_layout(metadata: &MetadataMap) -> Result<Option<Layout>, ApiError> {
    let values = metadata.get_all(layout::HEADER).into_iter().map(|v| v.as_bytes());
    Ok(formats::otlp::declared_layout(
        values,
        &format!("{} metadata", layout::HEADER),
    )?)
}

pub struct ExportService<K> {
    pipeline: Arc<Pipeline>,
    auth: Arc<Auth>,
    max_message_bytes: usize,
    kind: PhantomData<fn() -> K>,
}

impl<K> Clone for ExportService<K> {
    fn clone(&self) -> Self {
        ExportService {
            pipeline: self.pipeline.clone(),
            auth: self.auth.clone(),
            max_message_bytes: self.max_message_bytes,
            kind: PhantomData,
        }
    }
}

pub fn service<K: ExportKind>(
    pipeline: Arc<Pipeline>,
    auth: Arc<Auth>,
    max_message_bytes: usize,
) -> ExportService<K> {
    ExportService {
        pipeline,
        auth,
        max_message_bytes,
        kind: PhantomData,
    }
}

impl<K: ExportKind> NamedService for ExportService<K> {
    const NAME: &'static str = K::SERVICE;
}

impl<K: ExportKind, B> tower::Service<http::Request<B>> for ExportService<K>
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<TonicBody>;
    type Error = std::convert::Infallible;
    type Future = BoxFuture<Self::Response, Self::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let is_export = request
            .uri()
            .path()
            .strip_prefix('/')
            .and_then(|p| p.strip_prefix(K::SERVICE))
            == Some("/Export");
        if !is_export {
            return Box::pin(async { Ok(Status::unimplemented("unknown method").into_http()) });
        }
        let method = ExportMethod::<K> {
            pipeline: self.pipeline.clone(),
            auth: self.auth.clone(),
            kind: PhantomData,
        };
        let max = self.max_message_bytes;
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(RawCodec)
                .accept_compressed(CompressionEncoding::Gzip)
                .send_compressed(CompressionEncoding::Gzip)
                .max_decoding_message_size(max);
            Ok(grpc.unary(method, request).await)
        })
    }
}

struct ExportMethod<K> {
    pipeline: Arc<Pipeline>,
    auth: Arc<Auth>,
    kind: PhantomData<fn() -> K>,
}

impl<K: ExportKind> UnaryService<Bytes> for ExportMethod<K> {
    type Response = ExportProfilesServiceResponse;
    type Future = BoxFuture<tonic::Response<Self::Response>, Status>;

    fn call(&mut self, request: tonic::Request<Bytes>) -> Self::Future {
        let pipeline = self.pipeline.clone();
        let auth = self.auth.clone();
        Box::pin(async move {
            let metadata = request.metadata();
            let export = async {
                let value = |name: &str| metadata.get(name).map(|v| v.as_bytes());
                let tenant = auth.tenant(value("authorization"), value(tenant::HEADER)).await?;
                let (format, params) = K::format(metadata)?;
                let sent_bytes = request.get_ref().len();
                let payload = Payload {
                    format,
                    body: PayloadBody::Raw(request.get_ref().clone()),
                    params,
                    sent_bytes,
                };
                let exported = pipeline.ingest(tenant, payload).await?;
                monitoring::ingest_volume(K::PROTOCOL, sent_bytes, &exported);
                Ok::<_, ApiError>(exported)
            };
            let result = export.await;
            monitoring::ingest_request(K::PROTOCOL, result.as_ref());
            let exported = result.map_err(ApiError::into_grpc)?;
            Ok(tonic::Response::new(exported.response()))
        })
    }
}

/// Requests stay raw bytes (the service decides how to decode them); responses are the
/// ExportProfilesServiceResponse, whose wire shape v1experimental shares.
#[derive(Clone, Copy, Default)]
struct RawCodec;

impl Codec for RawCodec {
    type Encode = ExportProfilesServiceResponse;
    type Decode = Bytes;
    type Encoder = RawCodec;
    type Decoder = RawCodec;

    fn encoder(&mut self) -> Self::Encoder {
        RawCodec
    }

    fn decoder(&mut self) -> Self::Decoder {
        RawCodec
    }
}

impl Encoder for RawCodec {
    type Item = ExportProfilesServiceResponse;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(dst)
            .map_err(|e| Status::internal(format!("encoding the response: {e}")))
    }
}

impl Decoder for RawCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_metadata() {
        let mut m = MetadataMap::new();
        assert_eq!(declared_layout(&m).unwrap(), None);
        m.insert(layout::HEADER, "definitely-not-a-version".parse().unwrap());
        let err = declared_layout(&m).unwrap_err().into_grpc();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains(layout::HEADER), "{}", err.message());
        assert!(
            err.message().contains("definitely-not-a-version"),
            "{}",
            err.message()
        );
        let mut m = MetadataMap::new();
        m.insert(layout::HEADER, "1".parse().unwrap());
        assert_eq!(declared_layout(&m).unwrap(), Some(Layout::V1_10));
        m.append(layout::HEADER, "1".parse().unwrap());
        let err = declared_layout(&m).unwrap_err().into_grpc();
        assert_eq!(err.code(), tonic::Code::InvalidArgument);
        assert!(err.message().contains("more than once"), "{}", err.message());
    }
}
