//! One frame rule as the query API spells it: `[field:]pattern`, the pattern a regular
//! expression that must match the whole field.

use std::fmt;

use regex::Regex;

use super::view::Frame;
use crate::error::QueryError;

/// What a rule does to the stacks of a query.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum RuleKind {
    /// Keeps only stacks with a matching frame (every focus rule must be met).
    Focus,
    /// Removes stacks with a matching frame.
    Drop,
    /// Removes matching frames; their children join their parent.
    Hide,
}

impl RuleKind {
    pub const ALL: [RuleKind; 3] = [RuleKind::Focus, RuleKind::Drop, RuleKind::Hide];

    /// The query parameter of the rule.
    pub fn name(self) -> &'static str {
        match self {
            RuleKind::Focus => "focus",
            RuleKind::Drop => "drop",
            RuleKind::Hide => "hide",
        }
    }
}

/// The part of a frame a rule matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum FrameField {
    /// The function's name as shown (demangled).
    #[default]
    Function,
    /// The function's name as the binary has it (mangled); the shown name when none was
    /// sent.
    SystemName,
    /// The source file.
    File,
    /// The binary (mapping) the frame's code was loaded from: its path or its base name.
    Binary,
    /// The instruction address, `0x` and lowercase hex.
    Address,
}

impl FrameField {
    pub const ALL: [FrameField; 5] = [
        FrameField::Function,
        FrameField::SystemName,
        FrameField::File,
        FrameField::Binary,
        FrameField::Address,
    ];

    pub fn name(self) -> &'static str {
        match self {
            FrameField::Function => "function",
            FrameField::SystemName => "system_name",
            FrameField::File => "file",
            FrameField::Binary => "binary",
            FrameField::Address => "address",
        }
    }

    fn by_name(name: &str) -> Option<FrameField> {
        FrameField::ALL.into_iter().find(|f| f.name() == name)
    }
}

/// A rule: a field and a regular expression anchored at both ends.
#[derive(Clone, Debug)]
pub struct FrameRule {
    pub kind: RuleKind,
    pub field: FrameField,
    /// The pattern as written.
    pub pattern: String,
    regex: Regex,
}

impl FrameRule {
    /// Parses `[field:]pattern`. A prefix that names no field is part of the pattern, so
    /// `std::vec::Vec<T>` is a function pattern.
    pub fn parse(kind: RuleKind, text: &str) -> Result<FrameRule, QueryError> {
        let (field, pattern) = match text.split_once(':') {
            Some((prefix, rest)) => match FrameField::by_name(prefix) {
                Some(field) => (field, rest),
                None => (FrameField::Function, text),
            },
            None => (FrameField::Function, text),
        };
        FrameRule::new(kind, field, pattern)
    }

    pub fn new(kind: RuleKind, field: FrameField, pattern: &str) -> Result<FrameRule, QueryError> {
        let what = kind.name();
        if pattern.is_empty() {
            return Err(QueryError::bad_request(format!(
                "invalid {what} {:?}: empty pattern",
                format!("{}:", field.name())
            )));
        }
        let regex = Regex::new(&format!("^(?:{pattern})$")).map_err(|e| {
            QueryError::bad_request(format!(
                "invalid {what} pattern {pattern:?}: {}",
                e.to_string()
                    .lines()
                    .last()
                    .unwrap_or("not a regular expression")
                    .trim()
            ))
        })?;
        Ok(FrameRule {
            kind,
            field,
            pattern: pattern.to_string(),
            regex,
        })
    }

    pub(crate) fn matches(&self, frame: &Frame) -> bool {
        match self.field {
            FrameField::Function => self.regex.is_match(&frame.function),
            FrameField::SystemName => self.regex.is_match(frame.system_name()),
            FrameField::File => self.regex.is_match(&frame.file),
            FrameField::Binary => {
                !frame.binary.is_empty()
                    && (self.regex.is_match(&frame.binary) || self.regex.is_match(base_name(&frame.binary)))
            }
            FrameField::Address => self.regex.is_match(&format!("0x{:x}", frame.address)),
        }
    }
}

impl fmt::Display for FrameRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.field.name(), self.pattern)
    }
}

/// The last component of a path.
pub(crate) fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame() -> Frame {
        Frame {
            function: "core::fmt::write".into(),
            system_name: "_ZN4core3fmt5write17h0123456789abcdefE".into(),
            file: "/rustc/library/core/src/fmt/mod.rs".into(),
            line: 1200,
            binary: "/usr/bin/app".into(),
            address: 0x1a2b,
        }
    }

    fn matches(text: &str) -> bool {
        FrameRule::parse(RuleKind::Focus, text).unwrap().matches(&frame())
    }

    #[test]
    fn patterns_match_the_whole_field() {
        assert!(matches("core::fmt::write"));
        assert!(matches("core::fmt::.*"));
        assert!(!matches("core::fmt"), "a prefix is not a match");
        assert!(matches("function:core::fmt::w.*"));
        assert!(matches("system_name:_ZN4core.*"));
        assert!(!matches("system_name:core::fmt::write"));
        assert!(matches("file:.*/fmt/mod\\.rs"));
        assert!(matches("binary:app"), "the base name");
        assert!(matches("binary:/usr/bin/app"), "the path");
        assert!(matches("address:0x1a2b"));
        assert!(!matches("address:0x1a2"));
    }

    #[test]
    fn a_prefix_that_names_no_field_is_part_of_the_pattern() {
        let rule = FrameRule::parse(RuleKind::Hide, "core::fmt::write").unwrap();
        assert_eq!(rule.field, FrameField::Function);
        assert_eq!(rule.pattern, "core::fmt::write");
    }

    #[test]
    fn bad_patterns_are_named() {
        let err = FrameRule::parse(RuleKind::Drop, "file:(")
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid drop pattern \"(\""), "{err}");
        let err = FrameRule::parse(RuleKind::Focus, "binary:")
            .unwrap_err()
            .to_string();
        assert!(err.contains("empty pattern"), "{err}");
    }
}
