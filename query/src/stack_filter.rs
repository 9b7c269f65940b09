//! Keeping only some stacks of a call tree: those that begin at a call site (Grafana's
//! progressive loading asks for one subtree at a time) and those that pass a frame filter
//! (include or exclude function names, exactly or by regex).
//!
//! Each rule is a predicate on whole stacks, applied to the untruncated tree: a stack ends
//! at a node (its self value) and passes through that node's ancestors, so removing a stack
//! removes self value from one node and total from it and its ancestors.

use regex::Regex;

use crate::error::QueryError;
use crate::tree::{Node, TreeNode};

#[derive(Clone, Debug, Default)]
pub struct StackFilter {
    /// Root first: only stacks that begin with these frames.
    pub call_site: Vec<String>,
    /// When not empty, only stacks with at least one matching frame.
    pub include: FrameMatch,
    /// Stacks with a matching frame are dropped.
    pub exclude: FrameMatch,
}

/// Function names matched exactly or by (unanchored) regular expressions.
#[derive(Clone, Debug, Default)]
pub struct FrameMatch {
    names: Vec<String>,
    regexes: Vec<Regex>,
}

impl FrameMatch {
    /// `what` names the rule in the error of an invalid regex.
    pub fn new(names: Vec<String>, regexes: &[String], what: &str) -> Result<FrameMatch, QueryError> {
        let regexes = regexes
            .iter()
            .map(|r| {
                Regex::new(r)
                    .map_err(|e| QueryError::InvalidArgument(format!("invalid {what} regex {r:?}: {e}")))
            })
            .collect::<Result<_, _>>()?;
        Ok(FrameMatch { names, regexes })
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty() && self.regexes.is_empty()
    }

    fn matches(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name) || self.regexes.iter().any(|r| r.is_match(name))
    }
}

impl StackFilter {
    pub fn is_empty(&self) -> bool {
        self.call_site.is_empty() && self.include.is_empty() && self.exclude.is_empty()
    }

    /// Whether the call site is the only rule (it may be empty too).
    pub fn only_call_site(&self) -> bool {
        self.include.is_empty() && self.exclude.is_empty()
    }

    /// Whether the stack with these frames (root first) passes every rule: what
    /// [`StackFilter::apply`] keeps of a tree, for one stack.
    pub fn keeps<S: AsRef<str>>(&self, frames: &[S]) -> bool {
        let names = || frames.iter().map(AsRef::as_ref);
        names()
            .take(self.call_site.len())
            .eq(self.call_site.iter().map(String::as_str))
            && !names().any(|f| self.exclude.matches(f))
            && (self.include.is_empty() || names().any(|f| self.include.matches(f)))
    }

    /// The tree of the stacks that pass; `root` is the synthetic root, which no rule
    /// matches. Totals are recomputed, so every node stays `self + Σ children`.
    pub fn apply(&self, mut root: Node) -> Node {
        if !self.call_site.is_empty() {
            root = keep_call_site(root, &self.call_site);
        }
        if !self.exclude.is_empty() {
            root.children = root
                .children
                .into_iter()
                .filter_map(|c| exclude(c, &self.exclude))
                .collect();
            refresh(&mut root);
        }
        if !self.include.is_empty() {
            root.self_value = 0;
            root.children = root
                .children
                .into_iter()
                .filter_map(|c| include(c, &self.include))
                .collect();
            refresh(&mut root);
        }
        root
    }
}

fn total(node: &Node) -> i64 {
    node.self_value + node.children.iter().map(|c| c.total).sum::<i64>()
}

/// Recomputes a node's total after its children changed, and their order by it.
fn refresh(node: &mut Node) {
    node.total = total(node);
    node.sort_children();
}

/// The root with only the path down to the call site, and everything under it.
fn keep_call_site(root: Node, call_site: &[String]) -> Node {
    let mut path = Vec::with_capacity(call_site.len());
    let mut node = root;
    let mut found = true;
    for frame in call_site {
        let mut children = std::mem::take(&mut node.children);
        let Some(i) = children.iter().position(|c| &c.name == frame) else {
            found = false;
            break;
        };
        path.push(std::mem::replace(&mut node, children.swap_remove(i)));
    }
    // Rebuild bottom-up: each ancestor keeps the one child on the path and no self value.
    // When the call site is missing, nothing begins with it: an empty tree.
    let mut child = if found {
        Some(node)
    } else {
        path.push(node);
        None
    };
    while let Some(mut parent) = path.pop() {
        parent.self_value = 0;
        parent.children = child.into_iter().collect();
        parent.total = total(&parent);
        // An ancestor left without the path is gone too; the root always stays.
        let is_root = path.is_empty();
        child = (is_root || !parent.children.is_empty()).then_some(parent);
    }
    child.expect("the root is on the path")
}

/// `node` without the stacks through an excluded frame; `None` when none is left.
fn exclude(mut node: Node, rule: &FrameMatch) -> Option<Node> {
    if rule.matches(&node.name) {
        return None;
    }
    node.children = node
        .children
        .into_iter()
        .filter_map(|c| exclude(c, rule))
        .collect();
    refresh(&mut node);
    (node.self_value != 0 || !node.children.is_empty()).then_some(node)
}

/// `node` with only the stacks through an included frame; `None` when none is left.
fn include(mut node: Node, rule: &FrameMatch) -> Option<Node> {
    if rule.matches(&node.name) {
        return Some(node);
    }
    // A stack ending here passes through no included frame (none above did either).
    node.self_value = 0;
    node.children = node
        .children
        .into_iter()
        .filter_map(|c| include(c, rule))
        .collect();
    refresh(&mut node);
    (!node.children.is_empty()).then_some(node)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::TreeBuilder;

    /// Folded stacks → tree; the expected results below are written as folded stacks too.
    fn tree(stacks: &[(&str, i64)]) -> Node {
        let mut b = TreeBuilder::new();
        for (stack, value) in stacks {
            let frames: Vec<&str> = stack.split(';').filter(|f| !f.is_empty()).collect();
            b.add_path(&frames, *value);
        }
        b.build()
    }

    fn stacks() -> Vec<(&'static str, i64)> {
        vec![
            ("main;work;parse", 10),
            ("main;work;encode", 7),
            ("main;work", 3),
            ("main;idle", 5),
            ("gc;mark", 4),
            ("main;log;encode", 2),
            ("", 1),
        ]
    }

    fn filtered(keep: impl Fn(&str) -> bool) -> Node {
        tree(&stacks().into_iter().filter(|(s, _)| keep(s)).collect::<Vec<_>>())
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn call_site_keeps_the_stacks_beginning_there() {
        let filter = StackFilter {
            call_site: names(&["main", "work"]),
            ..StackFilter::default()
        };
        assert_eq!(
            filter.apply(tree(&stacks())),
            filtered(|s| s.starts_with("main;work"))
        );
        let nowhere = StackFilter {
            call_site: names(&["main", "nope"]),
            ..StackFilter::default()
        };
        assert_eq!(nowhere.apply(tree(&stacks())), tree(&[]));
    }

    #[test]
    fn exclude_drops_stacks_through_a_frame() {
        let filter = StackFilter {
            exclude: FrameMatch::new(names(&["work"]), &[], "exclude").unwrap(),
            ..StackFilter::default()
        };
        assert_eq!(
            filter.apply(tree(&stacks())),
            filtered(|s| !s.split(';').any(|f| f == "work"))
        );
    }

    #[test]
    fn include_keeps_stacks_through_a_frame_by_name_or_regex() {
        let filter = StackFilter {
            include: FrameMatch::new(names(&["idle"]), &["^enc".to_string()], "include").unwrap(),
            ..StackFilter::default()
        };
        assert_eq!(
            filter.apply(tree(&stacks())),
            filtered(|s| s.split(';').any(|f| f == "idle" || f.starts_with("enc")))
        );
    }

    #[test]
    fn one_stack_is_kept_as_the_tree_keeps_it() {
        let filters = [
            StackFilter {
                call_site: names(&["main", "work"]),
                ..StackFilter::default()
            },
            StackFilter {
                call_site: names(&["main"]),
                include: FrameMatch::new(vec![], &["code".to_string()], "include").unwrap(),
                exclude: FrameMatch::new(names(&["log"]), &[], "exclude").unwrap(),
            },
            StackFilter::default(),
        ];
        for filter in filters {
            let kept = filtered(|s| {
                let frames: Vec<&str> = s.split(';').filter(|f| !f.is_empty()).collect();
                filter.keeps(&frames)
            });
            assert_eq!(filter.apply(tree(&stacks())), kept, "{filter:?}");
        }
    }

    #[test]
    fn rules_combine_as_and() {
        let filter = StackFilter {
            call_site: names(&["main"]),
            include: FrameMatch::new(vec![], &["code".to_string()], "include").unwrap(),
            exclude: FrameMatch::new(names(&["log"]), &[], "exclude").unwrap(),
        };
        assert_eq!(
            filter.apply(tree(&stacks())),
            filtered(|s| s == "main;work;encode")
        );
        assert!(FrameMatch::new(vec![], &["(".to_string()], "include").is_err());
    }
}
