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
//!
//! [`FORMATS`] lists the query API's `format=` values for trees (a flamegraph, a single
//! profile, a diff). Adding an output format is a renderer here implementing
//! [`TreeRenderer`] and a line in [`FORMATS`]; `format=`, its error message, the OpenAPI
//! document and every tree endpoint read the list.

pub mod dot;
pub mod flamebearer;
pub mod folded;
pub mod json;
pub mod pprof;
pub mod pprof_cut;
pub mod tree_bytes;

pub use folded::{folded, folded_diff};

use crate::tree::Diff;
use crate::tree::Flamegraph;

/// A `format=` of the query API's trees.
#[derive(Debug)]
pub enum OutputFormat {
    /// The engine's own JSON: a flamegraph written while its tree is cut, a profile's
    /// metadata with its tree, a diff's merged tree.
    Json,
    /// A gzipped pprof profile the engine builds from the samples, untruncated.
    Pprof,
    /// A rendering of the cut tree.
    Rendered(&'static dyn TreeRenderer),
}

/// Bytes of a cut tree in one format.
pub trait TreeRenderer: Sync + std::fmt::Debug {
    /// Its `format=` value.
    fn name(&self) -> &'static str;
    fn content_type(&self) -> &'static str;
    /// A flamegraph, or a single profile's tree.
    fn flamegraph(&self, flamegraph: &Flamegraph) -> Vec<u8>;
    fn diff(&self, diff: &Diff) -> Vec<u8>;
}

/// Every tree format, in the order messages and the OpenAPI document list them; the first
/// is the default.
pub static FORMATS: [OutputFormat; 4] = [
    OutputFormat::Json,
    OutputFormat::Rendered(&folded::Folded),
    OutputFormat::Rendered(&flamebearer::FlamebearerFormat),
    OutputFormat::Pprof,
];

impl OutputFormat {
    pub fn name(&self) -> &'static str {
        match self {
            OutputFormat::Json => "json",
            OutputFormat::Pprof => "pprof",
            OutputFormat::Rendered(renderer) => renderer.name(),
        }
    }

    pub fn by_name(name: &str) -> Option<&'static OutputFormat> {
        FORMATS.iter().find(|f| f.name() == name)
    }
}
