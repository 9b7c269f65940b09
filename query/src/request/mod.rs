//! The query API's reads as sent, and how each becomes one engine request: times and
//! ranges (`now` from the engine's clock), trace, span and profile ids, the scope with a
//! profile type the tenant stored, and one request type per read.

mod ids;
mod read;
mod scope;
mod time;

pub use ids::{hex_id, hex_ids};
pub use read::{
    DiffRequest, EventsRequest, FlamegraphRequest, ListingRequest, ProfileRequest, SideRequest,
    TimeseriesRequest, TopRequest, TreeAnswer, TreeOutput, default_step_nanos,
};
pub use scope::{RangeRequest, ScopeRequest, parse_profile_type};
pub use time::{parse_range, parse_time};
