//! Output formats of a flamegraph; every byte a query answers with is written here.
//!
//! - JSON ([`json`]): `serde` for the result types, and the tree written straight from a
//!   cut for a flamegraph cut while it is built ([`json::FlamegraphJson`]).
//! - Flamebearer ([`flamebearer`]), the `names` + `levels` layout Pyroscope's flamegraph
//!   components render.
//! - pprof ([`pprof`]), a gzipped `perftools.profiles.Profile`, and [`pprof_cut`], which cuts
//!   one down as a flamegraph is cut.
//! - Pyroscope's tree serialization ([`tree_bytes`]) and a Graphviz call graph ([`dot`]).
//! - Folded stacks ([`folded()`]), as Brendan Gregg's `flamegraph.pl` and speedscope read;
//!   for a diff ([`folded_diff`]), the two-value lines of `difffolded.pl`.

pub mod dot;
pub mod flamebearer;
pub mod folded;
pub mod json;
pub mod pprof;
pub mod pprof_cut;
pub mod tree_bytes;

pub use folded::{folded, folded_diff};
