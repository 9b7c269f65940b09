//! A query's [`FrameView`]: the granularity frames are named at and the rules that keep
//! stacks and frames, resolved from the query API's parameters ([`FrameRequest`]).

use std::fmt::Write;

use super::presets;
use super::rule::{FrameRule, RuleKind, base_name};
use crate::error::QueryError;
use crate::symbolize::UNKNOWN;

/// What is known of one frame, whatever it is shown as.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Frame {
    /// The function's name as shown: demangled, or the address name of a frame without
    /// symbols (`<binary>+0x<address>`).
    pub function: String,
    /// As sent, often mangled; empty when the sender gave none.
    pub system_name: String,
    pub file: String,
    /// 0 when unknown.
    pub line: i64,
    /// The mapping's file name; empty when unknown.
    pub binary: String,
    pub address: u64,
}

impl Frame {
    /// The mangled name, or the shown one when none was sent.
    pub(crate) fn system_name(&self) -> &str {
        if self.system_name.is_empty() {
            &self.function
        } else {
            &self.system_name
        }
    }
}

/// What a frame is named by in trees and top lists (`aggregate_by=`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Granularity {
    /// The function (the default).
    #[default]
    Function,
    /// The function and its line: `name:line` (the name alone when the line is unknown).
    FunctionLine,
    /// The source file (the binary when the file is unknown).
    File,
    /// The binary's base name.
    Binary,
    /// The binary's base name and the address: `libc.so.6+0x1a2b`.
    Address,
}

impl Granularity {
    pub const ALL: [Granularity; 5] = [
        Granularity::Function,
        Granularity::FunctionLine,
        Granularity::File,
        Granularity::Binary,
        Granularity::Address,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Granularity::Function => "function",
            Granularity::FunctionLine => "function_line",
            Granularity::File => "file",
            Granularity::Binary => "binary",
            Granularity::Address => "address",
        }
    }

    pub fn parse(name: &str) -> Result<Granularity, QueryError> {
        Granularity::ALL
            .into_iter()
            .find(|g| g.name() == name)
            .ok_or_else(|| {
                let names: Vec<&str> = Granularity::ALL.iter().map(|g| g.name()).collect();
                QueryError::bad_request(format!(
                    "invalid aggregate_by {name:?}: expected one of {}",
                    names.join(", ")
                ))
            })
    }

    /// Whether consecutive frames of one name are one node: a file, binary or address
    /// calling into itself is one step for a reader, where a function calling itself is
    /// recursion worth seeing.
    pub(crate) fn collapses(self) -> bool {
        matches!(
            self,
            Granularity::File | Granularity::Binary | Granularity::Address
        )
    }
}

/// The frame parameters of a read as sent; see [`FrameView`].
#[derive(Clone, Debug, Default)]
pub struct FrameRequest {
    pub focus: Vec<String>,
    pub drop: Vec<String>,
    pub hide: Vec<String>,
    /// Names of [`presets`].
    pub presets: Vec<String>,
    pub aggregate_by: Option<String>,
}

impl FrameRequest {
    pub fn is_empty(&self) -> bool {
        self.focus.is_empty()
            && self.drop.is_empty()
            && self.hide.is_empty()
            && self.presets.is_empty()
            && self.aggregate_by.is_none()
    }

    pub fn resolve(&self) -> Result<FrameView, QueryError> {
        let aggregate_by = self
            .aggregate_by
            .as_deref()
            .map_or(Ok(Granularity::Function), Granularity::parse)?;
        let mut rules = Vec::new();
        for (kind, texts) in [
            (RuleKind::Focus, &self.focus),
            (RuleKind::Drop, &self.drop),
            (RuleKind::Hide, &self.hide),
        ] {
            for text in texts {
                rules.push(FrameRule::parse(kind, text)?);
            }
        }
        for name in &self.presets {
            rules.extend(presets::rules(name)?);
        }
        FrameView::new(aggregate_by, rules)
    }
}

/// How a query names frames and which stacks and frames it keeps. Rules of one kind are
/// independent of each other and of the granularity: `focus` and `drop` read every frame
/// of a stack as sent, hidden frames included.
#[derive(Clone, Debug, Default)]
pub struct FrameView {
    pub aggregate_by: Granularity,
    /// A stack is kept when each focus rule matches one of its frames…
    pub focus: Vec<FrameRule>,
    /// …and no drop rule matches any.
    pub drop: Vec<FrameRule>,
    /// Frames no tree shows.
    pub hide: Vec<FrameRule>,
    /// Tells views apart in the call path cache; empty for the default view.
    key: String,
}

/// The default view, for callers that need one by reference for as long as they run.
pub static DEFAULT_VIEW: FrameView = FrameView {
    aggregate_by: Granularity::Function,
    focus: Vec::new(),
    drop: Vec::new(),
    hide: Vec::new(),
    key: String::new(),
};

/// The bit of a frame's or stack's marks set by a drop rule; focus rule `i` sets bit `i`.
const DROPPED: u64 = 1 << 63;

impl FrameView {
    /// Focus rules one query may have.
    pub const MAX_FOCUS: usize = 63;

    pub fn new(aggregate_by: Granularity, rules: Vec<FrameRule>) -> Result<FrameView, QueryError> {
        let mut view = FrameView {
            aggregate_by,
            ..FrameView::default()
        };
        for rule in rules {
            match rule.kind {
                RuleKind::Focus => view.focus.push(rule),
                RuleKind::Drop => view.drop.push(rule),
                RuleKind::Hide => view.hide.push(rule),
            }
        }
        if view.focus.len() > Self::MAX_FOCUS {
            return Err(QueryError::bad_request(format!(
                "too many focus rules: {} (at most {})",
                view.focus.len(),
                Self::MAX_FOCUS
            )));
        }
        if !view.is_default() {
            let mut key = view.aggregate_by.name().to_string();
            for rule in view.focus.iter().chain(&view.drop).chain(&view.hide) {
                let _ = write!(key, "\n{} {rule}", rule.kind.name());
            }
            view.key = key;
        }
        Ok(view)
    }

    /// Frames named by function, every stack and frame kept.
    pub fn is_default(&self) -> bool {
        self.aggregate_by == Granularity::Function
            && self.focus.is_empty()
            && self.drop.is_empty()
            && self.hide.is_empty()
    }

    pub(crate) fn key(&self) -> &str {
        &self.key
    }

    /// Whether some stacks may be left out.
    pub fn filters_stacks(&self) -> bool {
        !self.focus.is_empty() || !self.drop.is_empty()
    }

    /// The frame's name in a tree, `None` when it is hidden.
    pub(crate) fn name(&self, frame: &Frame) -> Option<String> {
        if self.hide.iter().any(|r| r.matches(frame)) {
            return None;
        }
        let binary = || (!frame.binary.is_empty()).then(|| base_name(&frame.binary));
        Some(match self.aggregate_by {
            Granularity::Function => frame.function.clone(),
            Granularity::FunctionLine if frame.line > 0 => format!("{}:{}", frame.function, frame.line),
            Granularity::FunctionLine => frame.function.clone(),
            Granularity::File if !frame.file.is_empty() => frame.file.clone(),
            Granularity::File | Granularity::Binary => binary().unwrap_or(UNKNOWN).to_string(),
            Granularity::Address => match binary() {
                Some(binary) => format!("{binary}+0x{:x}", frame.address),
                None => format!("0x{:x}", frame.address),
            },
        })
    }

    /// Which stack rules the frame meets: OR them over a stack's frames and ask
    /// [`FrameView::keeps`].
    pub(crate) fn marks(&self, frame: &Frame) -> u64 {
        let mut marks = 0;
        for (bit, rule) in self.focus.iter().enumerate() {
            if rule.matches(frame) {
                marks |= 1 << bit;
            }
        }
        if self.drop.iter().any(|r| r.matches(frame)) {
            marks |= DROPPED;
        }
        marks
    }

    /// Whether a stack whose frames' marks OR to `marks` is kept.
    pub(crate) fn keeps(&self, marks: u64) -> bool {
        let focus = (1u64 << self.focus.len()) - 1;
        marks & DROPPED == 0 && marks & focus == focus
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(function: &str, file: &str, line: i64, binary: &str, address: u64) -> Frame {
        Frame {
            function: function.into(),
            system_name: String::new(),
            file: file.into(),
            line,
            binary: binary.into(),
            address,
        }
    }

    fn view(r: FrameRequest) -> FrameView {
        r.resolve().unwrap()
    }

    #[test]
    fn granularities_name_frames() {
        let f = frame("run", "src/main.rs", 42, "/usr/bin/app", 0xbeef);
        let bare = frame("0x10", "", 0, "", 0x10);
        let names = |g: &str| {
            let v = view(FrameRequest {
                aggregate_by: Some(g.into()),
                ..Default::default()
            });
            (v.name(&f).unwrap(), v.name(&bare).unwrap())
        };
        assert_eq!(names("function"), ("run".into(), "0x10".into()));
        assert_eq!(names("function_line"), ("run:42".into(), "0x10".into()));
        assert_eq!(names("file"), ("src/main.rs".into(), UNKNOWN.into()));
        assert_eq!(names("binary"), ("app".into(), UNKNOWN.into()));
        assert_eq!(names("address"), ("app+0xbeef".into(), "0x10".into()));
        let err = FrameRequest {
            aggregate_by: Some("line".into()),
            ..Default::default()
        }
        .resolve()
        .unwrap_err()
        .to_string();
        assert!(err.contains("invalid aggregate_by \"line\": expected one of function, function_line, file, binary, address"), "{err}");
    }

    #[test]
    fn focus_needs_every_rule_and_drop_any() {
        let v = view(FrameRequest {
            focus: vec!["a".into(), "file:x\\.c".into()],
            drop: vec!["d".into(), "e".into()],
            ..Default::default()
        });
        let marks = |frames: &[Frame]| frames.iter().fold(0, |m, f| m | v.marks(f));
        let a = frame("a", "y.c", 0, "", 0);
        let b = frame("b", "x.c", 0, "", 0);
        let d = frame("d", "", 0, "", 0);
        assert!(v.keeps(marks(&[a.clone(), b.clone()])));
        assert!(
            !v.keeps(marks(std::slice::from_ref(&a))),
            "the file rule is not met"
        );
        assert!(!v.keeps(marks(&[a, b, d])), "a dropped frame");
        assert!(view(FrameRequest::default()).keeps(0));
    }

    #[test]
    fn views_with_the_same_rules_share_a_key() {
        let r = FrameRequest {
            hide: vec!["tokio::.*".into()],
            ..Default::default()
        };
        assert_eq!(view(r.clone()).key(), view(r).key());
        assert_eq!(view(FrameRequest::default()).key(), "");
        let a = view(FrameRequest {
            focus: vec!["x".into()],
            ..Default::default()
        });
        let b = view(FrameRequest {
            hide: vec!["x".into()],
            ..Default::default()
        });
        assert_ne!(a.key(), b.key());
    }
}
