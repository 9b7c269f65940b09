//! A prost codec for our servers that answers an undecodable request with
//! INVALID_ARGUMENT instead of tonic's default INTERNAL: a malformed body is the sender's
//! fault and must not look like a retryable server failure.

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder};

#[derive(Debug, Clone)]
pub struct ValidatingCodec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for ValidatingCodec<T, U> {
    fn default() -> Self {
        ValidatingCodec(PhantomData)
    }
}

impl<T, U> Codec for ValidatingCodec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = tonic_prost::ProstEncoder<T>;
    type Decoder = ValidatingDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        tonic_prost::ProstEncoder::default()
    }

    fn decoder(&mut self) -> Self::Decoder {
        ValidatingDecoder(PhantomData)
    }
}

#[derive(Debug, Clone)]
pub struct ValidatingDecoder<U>(PhantomData<U>);

impl<U: Message + Default> Decoder for ValidatingDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        U::decode(buf).map(Some).map_err(|e| {
            Status::invalid_argument(format!(
                "failed to decode {}: {e}",
                std::any::type_name::<U>()
                    .rsplit("::")
                    .next()
                    .unwrap_or("message")
            ))
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::default()
    }
}
