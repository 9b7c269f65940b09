//! Java Flight Recorder recordings (async-profiler and JDK), raw or gzipped, one or more
//! chunks.
//!
//! Reading is generic: each chunk's metadata event describes every type (field order,
//! field types, constant-pool references, arrays, time units), events and constant pools
//! are decoded from that description, and constant-pool references are resolved on use.
//! Nothing depends on a producer's field layout, so JDK and async-profiler files read the
//! same way.
//!
//! # Mapping
//!
//! Profile type ids are `sample_type:sample_unit:period_type:period_unit`:
//!
//! | event | profile types | value per event |
//! |---|---|---|
//! | `jdk.ExecutionSample` | `samples:count:cpu:nanoseconds` | 1 |
//! | `jdk.NativeMethodSample` | `samples:count:wall:nanoseconds` | 1 |
//! | `profiler.WallClockSample` | `samples:count:wall:nanoseconds` | `samples` |
//! | `jdk.ObjectAllocationInNewTLAB` | `alloc_in_new_tlab_objects:count:space:bytes`, `alloc_in_new_tlab_bytes:bytes:space:bytes` | 1, `tlabSize` |
//! | `jdk.ObjectAllocationOutsideTLAB` | `alloc_outside_tlab_objects:count:space:bytes`, `alloc_outside_tlab_bytes:bytes:space:bytes` | 1, `allocationSize` |
//! | `jdk.ObjectAllocationSample` | `alloc_sample_objects:count:space:bytes`, `alloc_sample_bytes:bytes:space:bytes` | 1, `weight` |
//! | `jdk.JavaMonitorEnter`, `jdk.ThreadPark` | `lock_count:count:lock:nanoseconds`, `lock_time:nanoseconds:lock:nanoseconds` | 1, `duration` in ns |
//! | `profiler.LiveObject` | `live_objects:count:space:bytes`, `live_bytes:bytes:space:bytes` | 1, `allocationSize` |
//! | `profiler.Malloc` | `malloc_objects:count:space:bytes`, `malloc_bytes:bytes:space:bytes` | 1, `size` |
//!
//! When async-profiler's `event` setting is `wall`, its `jdk.ExecutionSample` events are
//! wall-clock samples and go to `samples:count:wall:nanoseconds` instead. Every other event
//! type (also stack-carrying ones such as `jdk.JavaMonitorWait`, `jdk.ThreadSleep`,
//! `jdk.JavaErrorThrow`, `jdk.OldObjectSample`) is skipped.
//!
//! Periods come from the recording's `jdk.ActiveSetting` events: the JDK's `period` of
//! `jdk.ExecutionSample` / `jdk.NativeMethodSample` ("10 ms"), async-profiler's `interval`
//! (ns), `alloc` (bytes, for the allocation and live-object types) and `lock` (ns). A sample
//! count without a stated interval gets `1e9 / Source::sample_rate`; otherwise 0.
//!
//! Stacks are the `stackTrace` frames leaf first, as stored (a truncated stack stays
//! truncated; an event without a stack gets the empty stack); nothing is added (no thread
//! or `[truncated]` frame). Frames are named per [`FrameNames`]: by default as Pyroscope
//! names them (`<class-name symbol>.<method-name symbol>` with JVM-internal slashes, each
//! symbol through jfr-parser's six rewrites; a frame whose method or class constant is
//! missing is dropped), or in the JDK's dotted style. A frame's `lineNumber` is its line
//! (negative numbers, the JDK's "unknown", become 0); there are no file names.
//!
//! Sample attributes: `thread.name` (the thread's `javaName`, else `osName`) and `thread.id`
//! (`javaThreadId`, else `osThreadId`) of `sampledThread` / `eventThread`; with a labels
//! snapshot, the labels of the event's `contextId`; `span_id` (16 hex digits) and `span_name`
//! (from the snapshot's strings) when Pyroscope's build records them. Each event is one
//! value with its own timestamp (`startTime` converted as the JDK does); events with the same
//! stack and attributes share a `Sample`. Profiles span the chunks (earliest start to latest
//! end; `Source::time_nanos` / `duration_nanos` when the chunks state no start).
//! [`Converted::samples`] counts values (events × profile types they feed).
//!
//! Constant-pool keys resolve in their own chunk. Malformed input (bad magic, unsupported
//! version, truncated chunk or event, a reference to a missing constant, absurd counts or
//! sizes) is refused with the byte offset where it broke; counts are checked against the
//! bytes left before anything is allocated. An event's own `stackTrace` and thread may
//! dangle: stack-trace ids are global and monotonic across a JDK recording's chunks, and
//! the JDK writes some events into the chunk after the one holding their stack trace (or
//! thread). Such a key resolves in the latest earlier chunk that defines it (so every
//! event keeps its stack, where `jfr print` shows null for some), else the event gets the
//! empty stack or no thread attributes. Other references inside constants (a frame's
//! method, a method's class or name) must resolve, except that Pyroscope's naming drops a
//! frame whose method or class is missing and reads a missing symbol as "".

mod chunk;
mod convert;
mod cursor;
mod labels;
mod metadata;
mod names;
#[cfg(test)]
mod tests;
mod value;

pub use convert::{PROFILE_TYPES, UNKNOWN_METHOD};
pub use labels::{Context, LabelsSnapshot};
pub use names::{FrameNames, UnknownFrameNames};

use crate::body::{BodyError, decompress};
use crate::convert::{ConvertError, Converted, RequestBuilder, Source};

const FORMAT: &str = "jfr";

/// `labels` is Pyroscope's `LabelsSnapshot` protobuf (multipart part `labels`), if sent;
/// `names` is how frames are named. Nothing is added to `builder` unless the whole
/// recording converts.
pub fn convert(
    data: &[u8],
    labels: Option<&[u8]>,
    names: FrameNames,
    source: &Source,
    limit: usize,
    builder: &mut RequestBuilder,
) -> Result<Converted, ConvertError> {
    let data = if data.starts_with(&[0x1f, 0x8b]) {
        decompress(data, Some("gzip"), limit).map_err(|e| match e {
            BodyError::TooLarge { limit } => ConvertError::TooLarge {
                format: FORMAT,
                limit,
            },
            BodyError::Malformed(message) => ConvertError::invalid(FORMAT, message),
            other => ConvertError::invalid(FORMAT, other),
        })?
    } else if data.len() > limit {
        return Err(ConvertError::TooLarge {
            format: FORMAT,
            limit,
        });
    } else {
        std::borrow::Cow::Borrowed(data)
    };
    let labels = match labels {
        Some(bytes) => Some(<LabelsSnapshot as prost::Message>::decode(bytes).map_err(|e| {
            ConvertError::invalid(FORMAT, format!("labels are not a LabelsSnapshot protobuf: {e}"))
        })?),
        None => None,
    };
    if data.is_empty() {
        return Err(ConvertError::invalid(FORMAT, "empty recording"));
    }
    // Everything is read before anything is pushed, so a failure leaves at most unused
    // dictionary entries behind.
    let mut converter = convert::Converter::new(builder, labels, names);
    let mut start = 0;
    while start < data.len() {
        let chunk = chunk::Chunk::read(&data, start)?;
        start = chunk.header.end();
        converter.chunk(chunk)?;
    }
    Ok(converter.finish(source))
}
