//! The query API's reads as sent, in what several endpoints share: times and ranges (`now`
//! from the engine's clock), trace, span and profile ids, the scope with a profile type the
//! tenant stored, a listing's tenant and range, and the output a tree read is answered in.
//! Each read's own request type, and how it becomes one engine request, lives with its
//! endpoint in [`crate::endpoints`].

mod ids;
mod output;
mod scope;
mod time;

pub use ids::{hex_id, hex_ids};
pub use output::{TreeAnswer, TreeOutput};
pub(crate) use scope::selector;
pub use scope::{ListingRequest, RangeRequest, ScopeRequest, parse_profile_type};
pub use time::{parse_range, parse_time};
