//! How a query reads the frames of its stacks (issue 54): which name a frame is shown by
//! ([`Granularity`]: function, function and line, file, binary, address), which stacks are
//! kept (`focus`, `drop`) and which frames are left out (`hide`), with named sets of rules
//! ([`presets`]). Names that arrive mangled are shown demangled ([`demangle`]).
//!
//! A [`FrameView`] is part of a query's scope. Naming happens where stacks are resolved
//! into call paths, once per location, so a view costs what the default view costs once
//! its paths are cached (`crate::call_paths` keeps one tree per tenant and view).

pub mod demangle;
pub mod presets;
mod rule;
mod view;

pub use rule::{FrameField, FrameRule, RuleKind};
pub use view::{DEFAULT_VIEW, FrameRequest, FrameView, Granularity};

pub(crate) use view::Frame;
