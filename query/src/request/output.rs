//! What a tree read (flamegraph, profile, diff) is answered in: the edge asks for JSON, the
//! tree for its other renderers, or pprof, and gets back that one.

use stackhouse_proto::pprof::Profile;

/// What the edge encodes a tree read into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TreeOutput {
    /// The flamegraph JSON, written while the tree is cut.
    Json,
    /// The tree itself, for the edge's other renderers.
    Tree,
    /// A pprof profile of the samples, untruncated.
    Pprof,
}

/// A tree read's answer, in the output asked for.
// Built once per request and moved to the edge, so the size difference costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum TreeAnswer<J, T> {
    Json(J),
    Tree(T),
    Pprof(Profile),
}
