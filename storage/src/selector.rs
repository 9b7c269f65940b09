//! The label selector language: `{key="v", key!="v", key=~"re", key!~"re"}`.
//!
//! Keys are label names as sent (`service.name`, `thread.name`, `k8s.pod/name`), values are
//! double-quoted strings with `\"`, `\\`, `\n` and `\t` escapes. Regular expressions are
//! anchored at both ends, as in Prometheus: `=~"a.*"` matches `abc`, not `xabc`. A label a
//! sample does not carry matches as if it were the empty string, so `{k=""}` selects
//! samples without `k` and `{k!=""}` the ones with it.

use std::fmt;
use std::str::FromStr;

use regex::Regex;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MatchOp {
    Equal,
    NotEqual,
    RegexMatch,
    RegexNoMatch,
}

impl MatchOp {
    pub fn as_str(&self) -> &'static str {
        match self {
            MatchOp::Equal => "=",
            MatchOp::NotEqual => "!=",
            MatchOp::RegexMatch => "=~",
            MatchOp::RegexNoMatch => "!~",
        }
    }
}

#[derive(Clone, Debug)]
pub struct Matcher {
    pub name: String,
    pub op: MatchOp,
    pub value: String,
    /// The anchored regex of `=~` and `!~`, compiled once at parse time.
    regex: Option<Regex>,
}

impl Matcher {
    /// Builds a matcher, compiling (and anchoring) the regex of `=~` and `!~`.
    pub fn new(
        name: impl Into<String>,
        op: MatchOp,
        value: impl Into<String>,
    ) -> Result<Matcher, regex::Error> {
        let value = value.into();
        let regex = match op {
            MatchOp::RegexMatch | MatchOp::RegexNoMatch => Some(Regex::new(&format!("^(?:{value})$"))?),
            MatchOp::Equal | MatchOp::NotEqual => None,
        };
        Ok(Matcher {
            name: name.into(),
            op,
            value,
            regex,
        })
    }

    /// Whether a label value satisfies the matcher; a missing label counts as `""`.
    pub fn matches(&self, value: Option<&str>) -> bool {
        let value = value.unwrap_or("");
        match (self.op, &self.regex) {
            (MatchOp::Equal, _) => value == self.value,
            (MatchOp::NotEqual, _) => value != self.value,
            (MatchOp::RegexMatch, Some(re)) => re.is_match(value),
            (MatchOp::RegexNoMatch, Some(re)) => !re.is_match(value),
            (MatchOp::RegexMatch | MatchOp::RegexNoMatch, None) => {
                unreachable!("Matcher::new compiles the regex of every regex operator")
            }
        }
    }
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        // The regex is derived from the other fields.
        self.name == other.name && self.op == other.op && self.value == other.value
    }
}

impl Eq for Matcher {}

impl fmt::Display for Matcher {
    /// The form the parser reads back: names outside the bare-name characters quoted.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if is_bare_name(&self.name) {
            f.write_str(&self.name)?;
        } else {
            write_quoted(f, &self.name)?;
        }
        f.write_str(self.op.as_str())?;
        write_quoted(f, &self.value)
    }
}

/// Whether a label name can be written without quotes.
fn is_bare_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_') && chars.all(is_bare_name_char)
}

fn is_bare_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-' | '/')
}

fn write_quoted(f: &mut fmt::Formatter<'_>, s: &str) -> fmt::Result {
    f.write_str("\"")?;
    for c in s.chars() {
        match c {
            '"' => f.write_str("\\\"")?,
            '\\' => f.write_str("\\\\")?,
            '\n' => f.write_str("\\n")?,
            '\t' => f.write_str("\\t")?,
            c => write!(f, "{c}")?,
        }
    }
    f.write_str("\"")
}

/// A conjunction of matchers; no matchers selects everything.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Selector {
    pub matchers: Vec<Matcher>,
}

impl Selector {
    /// The selector that selects everything.
    pub fn all() -> Selector {
        Selector::default()
    }

    pub fn is_empty(&self) -> bool {
        self.matchers.is_empty()
    }

    /// Whether a label set, read by `get`, satisfies every matcher.
    pub fn selects<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.matchers.iter().all(|m| m.matches(get(&m.name)))
    }
}

impl fmt::Display for Selector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, m) in self.matchers.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{m}")?;
        }
        f.write_str("}")
    }
}

impl FromStr for Selector {
    type Err = SelectorError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        parse_selector(s)
    }
}

/// The label a metric name before the braces matches, as in PromQL.
pub(crate) const METRIC_NAME: &str = "__name__";

/// Metric names also take `:`, so a 5-part profile type id is one.
fn is_metric_name_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_' || c == ':'
}

/// A parse error; `position` is the byte offset in the input where the problem was found.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("invalid selector at position {position}: {message}")]
pub struct SelectorError {
    pub position: usize,
    pub message: String,
}

/// Parses `{matcher, ...}`; the empty string (or only whitespace) and `{}` select
/// everything. Label names may be double-quoted (`{"service.name"="x"}`).
pub fn parse_selector(s: &str) -> Result<Selector, SelectorError> {
    Parser {
        input: s,
        pos: 0,
        metric_name: false,
    }
    .selector()
}

/// [`parse_selector`] that also takes PromQL's metric name before the braces
/// (`name{...}`, or `name` alone), read as a [`METRIC_NAME`] matcher: Grafana sends a
/// profile type id there.
pub fn parse_promql_selector(s: &str) -> Result<Selector, SelectorError> {
    Parser {
        input: s,
        pos: 0,
        metric_name: true,
    }
    .selector()
}

struct Parser<'a> {
    input: &'a str,
    pos: usize,
    metric_name: bool,
}

impl Parser<'_> {
    fn selector(&mut self) -> Result<Selector, SelectorError> {
        self.skip_whitespace();
        if self.at_end() {
            return Ok(Selector::all());
        }
        let mut matchers = Vec::new();
        if self.metric_name && self.peek().is_some_and(is_metric_name_start) {
            // A metric name before the braces, as PromQL allows: `__name__="<name>"`.
            let start = self.pos;
            while let Some(c) = self
                .peek()
                .filter(|&c| is_metric_name_start(c) || c.is_ascii_digit())
            {
                self.bump(c);
            }
            let name = self.input[start..self.pos].to_string();
            matchers.push(Matcher::new(METRIC_NAME, MatchOp::Equal, name).expect("no regex to compile"));
            self.skip_whitespace();
            if self.at_end() {
                return Ok(Selector { matchers });
            }
        }
        self.expect('{')?;
        loop {
            self.skip_whitespace();
            if self.eat('}') {
                break;
            }
            matchers.push(self.matcher()?);
            self.skip_whitespace();
            if self.eat(',') {
                continue;
            }
            if self.eat('}') {
                break;
            }
            return Err(self.error_here(match self.peek() {
                Some(c) => format!("expected ',' or '}}' after a matcher, found {c:?}"),
                None => "unterminated selector, expected ',' or '}'".to_string(),
            }));
        }
        self.skip_whitespace();
        if let Some(c) = self.peek() {
            return Err(self.error_here(format!("unexpected {c:?} after the closing '}}'")));
        }
        Ok(Selector { matchers })
    }

    fn matcher(&mut self) -> Result<Matcher, SelectorError> {
        let name = self.label_name()?;
        self.skip_whitespace();
        let op_pos = self.pos;
        let op = self.op()?;
        self.skip_whitespace();
        let value = self.quoted()?;
        Matcher::new(name, op, value).map_err(|e| SelectorError {
            position: op_pos,
            message: format!("invalid regular expression: {e}"),
        })
    }

    fn label_name(&mut self) -> Result<String, SelectorError> {
        if self.peek() == Some('"') {
            // Prometheus 3 quotes names outside [a-zA-Z_][a-zA-Z0-9_]*: `{"service.name"="x"}`.
            let start = self.pos;
            let name = self.quoted()?;
            if name.is_empty() {
                return Err(SelectorError {
                    position: start,
                    message: "empty label name".to_string(),
                });
            }
            return Ok(name);
        }
        let start = self.pos;
        match self.peek() {
            Some(c) if c.is_ascii_alphabetic() || c == '_' => self.bump(c),
            Some(c) => {
                return Err(self.error_here(format!(
                    "expected a label name (starting with a letter or '_'), found {c:?}"
                )));
            }
            None => return Err(self.error_here("expected a label name, found the end")),
        }
        while let Some(c) = self.peek() {
            if is_bare_name_char(c) {
                self.bump(c);
            } else {
                break;
            }
        }
        Ok(self.input[start..self.pos].to_string())
    }

    fn op(&mut self) -> Result<MatchOp, SelectorError> {
        let rest = &self.input[self.pos..];
        // Two-character operators first, so that `=~` is not read as `=`.
        let op = [
            ("=~", MatchOp::RegexMatch),
            ("!~", MatchOp::RegexNoMatch),
            ("!=", MatchOp::NotEqual),
            ("=", MatchOp::Equal),
        ]
        .into_iter()
        .find(|(token, _)| rest.starts_with(token));
        match op {
            Some((token, op)) => {
                self.pos += token.len();
                Ok(op)
            }
            None => Err(self.error_here(match self.peek() {
                Some(c) => format!("expected one of =, !=, =~, !~, found {c:?}"),
                None => "expected one of =, !=, =~, !~, found the end".to_string(),
            })),
        }
    }

    fn quoted(&mut self) -> Result<String, SelectorError> {
        let start = self.pos;
        if !self.eat('"') {
            return Err(self.error_here(match self.peek() {
                Some(c) => format!("expected a double-quoted value, found {c:?}"),
                None => "expected a double-quoted value, found the end".to_string(),
            }));
        }
        let mut value = String::new();
        loop {
            let Some(c) = self.peek() else {
                return Err(SelectorError {
                    position: start,
                    message: "unterminated string".to_string(),
                });
            };
            let escape_pos = self.pos;
            self.bump(c);
            match c {
                '"' => return Ok(value),
                '\\' => {
                    let Some(e) = self.peek() else {
                        return Err(SelectorError {
                            position: start,
                            message: "unterminated string".to_string(),
                        });
                    };
                    let escaped = match e {
                        '"' => '"',
                        '\\' => '\\',
                        'n' => '\n',
                        't' => '\t',
                        other => {
                            return Err(SelectorError {
                                position: escape_pos,
                                message: format!("unknown escape \\{other} (use \\\", \\\\, \\n or \\t)"),
                            });
                        }
                    };
                    self.bump(e);
                    value.push(escaped);
                }
                c => value.push(c),
            }
        }
    }

    fn peek(&self) -> Option<char> {
        self.input[self.pos..].chars().next()
    }

    fn bump(&mut self, c: char) {
        self.pos += c.len_utf8();
    }

    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(c) {
            self.bump(c);
            true
        } else {
            false
        }
    }

    fn expect(&mut self, c: char) -> Result<(), SelectorError> {
        if self.eat(c) {
            return Ok(());
        }
        Err(self.error_here(match self.peek() {
            Some(found) => format!("expected {c:?}, found {found:?}"),
            None => format!("expected {c:?}, found the end"),
        }))
    }

    fn skip_whitespace(&mut self) {
        while let Some(c) = self.peek().filter(|c| c.is_whitespace()) {
            self.bump(c);
        }
    }

    fn at_end(&self) -> bool {
        self.pos == self.input.len()
    }

    fn error_here(&self, message: impl Into<String>) -> SelectorError {
        SelectorError {
            position: self.pos,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str, op: MatchOp, value: &str) -> Matcher {
        Matcher::new(name, op, value).unwrap()
    }

    #[test]
    fn printing_quotes_names_that_need_it_and_parses_back() {
        // Found by the selector fuzz target: a quoted name printed bare did not parse.
        for text in [
            r#"{"k8s pod"="x", "a\"b"!="y", service.name=~"z.*"}"#,
            r#"{"1st"="x", "é"="y"}"#,
        ] {
            let selector = parse_selector(text).unwrap();
            let printed = selector.to_string();
            assert_eq!(parse_selector(&printed).unwrap(), selector, "{printed}");
        }
        let s = parse_selector(r#"{"k8s pod"="x", service.name="y"}"#).unwrap();
        assert_eq!(s.to_string(), r#"{"k8s pod"="x", service.name="y"}"#);
    }

    #[test]
    fn an_empty_quoted_name_is_refused() {
        let err = parse_selector(r#"{a="b", ""="x"}"#).unwrap_err();
        assert_eq!(err.position, 8);
        assert!(err.message.contains("empty label name"), "{err}");
    }

    #[test]
    fn parses_every_operator() {
        let s =
            parse_selector(r#"{service.name="api", thread.name!="gc", k8s.pod/name=~"web-.*", a-b!~"x|y"}"#)
                .unwrap();
        assert_eq!(
            s.matchers,
            vec![
                m("service.name", MatchOp::Equal, "api"),
                m("thread.name", MatchOp::NotEqual, "gc"),
                m("k8s.pod/name", MatchOp::RegexMatch, "web-.*"),
                m("a-b", MatchOp::RegexNoMatch, "x|y"),
            ]
        );
    }

    #[test]
    fn empty_selectors_select_everything() {
        for input in ["", "   ", "{}", " { } ", "{ }"] {
            let s = parse_selector(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
            assert!(s.is_empty(), "{input:?}");
        }
    }

    #[test]
    fn whitespace_and_trailing_comma_are_allowed() {
        let s = parse_selector("  {  a = \"1\" ,b=~\"2\",  }  ").unwrap();
        assert_eq!(
            s.matchers,
            vec![m("a", MatchOp::Equal, "1"), m("b", MatchOp::RegexMatch, "2")]
        );
    }

    #[test]
    fn escapes_are_decoded() {
        let s = parse_selector(r#"{a="q\"b\\s\nn\tt", b="ünï"}"#).unwrap();
        assert_eq!(s.matchers[0].value, "q\"b\\s\nn\tt");
        assert_eq!(s.matchers[1].value, "ünï");
    }

    #[test]
    fn display_round_trips() {
        let input = r#"{a="q\"b\\s\nn", b!~"x.*"}"#;
        let s = parse_selector(input).unwrap();
        assert_eq!(s.to_string(), r#"{a="q\"b\\s\nn", b!~"x.*"}"#);
        assert_eq!(parse_selector(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn regexes_are_fully_anchored() {
        let re = m("a", MatchOp::RegexMatch, "b.*");
        assert!(re.matches(Some("bcd")));
        assert!(!re.matches(Some("abcd")), "anchored at the start");
        let re = m("a", MatchOp::RegexMatch, "a|b");
        assert!(re.matches(Some("a")));
        assert!(!re.matches(Some("ab")), "the alternation is anchored as a whole");
        let re = m("a", MatchOp::RegexNoMatch, "x");
        assert!(re.matches(Some("xx")));
        assert!(!re.matches(Some("x")));
    }

    #[test]
    fn missing_labels_count_as_empty() {
        assert!(m("a", MatchOp::Equal, "").matches(None));
        assert!(!m("a", MatchOp::NotEqual, "").matches(None));
        assert!(m("a", MatchOp::NotEqual, "x").matches(None));
        assert!(m("a", MatchOp::RegexMatch, ".*").matches(None));
        assert!(!m("a", MatchOp::RegexMatch, ".+").matches(None));
        assert!(m("a", MatchOp::RegexNoMatch, ".+").matches(None));
    }

    #[test]
    fn metric_name_prefix_and_quoted_names() {
        let s = parse_promql_selector("process_cpu:cpu:nanoseconds:cpu:nanoseconds{\"service.name\"=\"a\"}")
            .unwrap();
        assert_eq!(
            s.matchers,
            vec![
                Matcher::new(
                    METRIC_NAME,
                    MatchOp::Equal,
                    "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
                )
                .unwrap(),
                Matcher::new("service.name", MatchOp::Equal, "a").unwrap(),
            ]
        );
        let bare = parse_promql_selector(" memory:alloc_space:bytes:space:bytes ").unwrap();
        assert_eq!(bare.matchers[0].value, "memory:alloc_space:bytes:space:bytes");
        assert_eq!(parse_promql_selector("x{}").unwrap().matchers.len(), 1);
        let err = parse_promql_selector("a=\"b\"").unwrap_err();
        assert_eq!(err.position, 1, "{err}");
        assert!(parse_selector("x{}").is_err(), "our own API asks for braces");
    }

    #[test]
    fn errors_name_position_and_problem() {
        let cases = [
            ("a=\"b\"", 0, "expected '{'"),
            ("{\"a", 1, "unterminated string"),
            ("{", 1, "expected a label name"),
            ("{a}", 2, "expected one of"),
            ("{1a=\"x\"}", 1, "label name"),
            ("{a=b}", 3, "double-quoted"),
            ("{a=\"b}", 3, "unterminated string"),
            ("{a=\"b\" c=\"d\"}", 7, "expected ',' or '}'"),
            ("{a=\"b\"", 6, "unterminated selector"),
            ("{a=\"\\x\"}", 4, "unknown escape \\x"),
            ("{a=~\"(\"}", 2, "invalid regular expression"),
            ("{a=\"b\"} x", 8, "after the closing"),
            ("{a==\"b\"}", 3, "double-quoted"),
            ("{a=\"b\",,}", 7, "label name"),
        ];
        for (input, position, problem) in cases {
            let err = parse_selector(input).expect_err(input);
            assert_eq!(err.position, position, "{input:?}: {err}");
            assert!(err.message.contains(problem), "{input:?}: {err}");
            assert!(
                err.to_string().starts_with("invalid selector at position"),
                "{err}"
            );
        }
    }
}
