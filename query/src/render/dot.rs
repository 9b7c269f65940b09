//! A flamegraph as a Graphviz call graph, as Pyroscope's `format=dot` (pprof's graph
//! view) draws it: one node per function with its flat (self) and cumulative value, one
//! edge per caller → callee with the value flowing through it; only the `max_nodes`
//! functions with the largest cumulative values are drawn.

use std::collections::HashMap;
use std::fmt::Write;

use crate::tree::{Flamegraph, Node};

/// Pyroscope's default for `/pyroscope/render?format=dot`.
pub const DEFAULT_DOT_NODES: usize = 100;

#[derive(Default)]
struct Function {
    flat: i64,
    cum: i64,
}

/// The call graph of the flamegraph, at most `max_nodes` functions (0 = the default).
pub fn dot(flamegraph: &Flamegraph, max_nodes: usize) -> String {
    let max_nodes = if max_nodes == 0 {
        DEFAULT_DOT_NODES
    } else {
        max_nodes
    };
    let mut functions: HashMap<&str, Function> = HashMap::new();
    let mut edges: HashMap<(&str, &str), i64> = HashMap::new();
    let mut path = Vec::new();
    for child in &flamegraph.root.children {
        walk(child, &mut path, &mut functions, &mut edges);
    }
    let mut ranked: Vec<(&str, &Function)> = functions.iter().map(|(n, f)| (*n, f)).collect();
    ranked.sort_by(|a, b| b.1.cum.cmp(&a.1.cum).then_with(|| a.0.cmp(b.0)));
    let dropped = ranked.len().saturating_sub(max_nodes);
    ranked.truncate(max_nodes);
    let ids: HashMap<&str, usize> = ranked.iter().enumerate().map(|(i, (n, _))| (*n, i + 1)).collect();
    let total = flamegraph.root.total;
    let shown: i64 = ranked.iter().map(|(_, f)| f.flat).sum();
    let unit = &flamegraph.kind.sample_unit;

    let mut out = String::from("digraph \"stackhouse\" {\n");
    out.push_str("node [style=filled fillcolor=\"#f8f8f8\"]\n");
    let mut legend = format!(
        "Type: {}\\lShowing nodes accounting for {shown} {unit}, {} of {total} {unit} total\\l",
        escape(&flamegraph.kind.profile_type),
        percent(shown, total)
    );
    if dropped > 0 {
        let _ = write!(
            legend,
            "Showing top {max_nodes} nodes out of {}\\l",
            ranked.len() + dropped
        );
    }
    let _ = writeln!(
        out,
        "subgraph cluster_L {{ \"legend\" [shape=box fontsize=16 label=\"{legend}\"] }}"
    );
    for (name, f) in &ranked {
        let _ = writeln!(
            out,
            "N{id} [label=\"{label}\\n{flat} ({flat_pct})\\nof {cum} ({cum_pct})\" id=\"node{id}\" fontsize={size} shape=box tooltip=\"{label} ({cum})\"]",
            id = ids[name],
            label = escape(name),
            flat = f.flat,
            flat_pct = percent(f.flat, total),
            cum = f.cum,
            cum_pct = percent(f.cum, total),
            size = font_size(f.flat, total),
        );
    }
    let mut drawn: Vec<(usize, usize, i64)> = edges
        .iter()
        .filter_map(|((from, to), &v)| Some((*ids.get(from)?, *ids.get(to)?, v)))
        .collect();
    drawn.sort_unstable();
    for (from, to, v) in drawn {
        let _ = writeln!(
            out,
            "N{from} -> N{to} [label=\" {v}\" weight={}]",
            edge_weight(v, total)
        );
    }
    out.push_str("}\n");
    out
}

/// Adds the subtree of `node` below `path`. A function's cumulative value, and an
/// edge's, count a stack once however often the function (the edge) recurs in it.
fn walk<'n>(
    node: &'n Node,
    path: &mut Vec<&'n str>,
    functions: &mut HashMap<&'n str, Function>,
    edges: &mut HashMap<(&'n str, &'n str), i64>,
) {
    let name = node.name.as_str();
    let f = functions.entry(name).or_default();
    f.flat += node.self_value;
    if !path.contains(&name) {
        f.cum += node.total;
    }
    if let Some(&caller) = path.last() {
        let recurs = path.windows(2).any(|w| w == [caller, name]);
        if !recurs {
            *edges.entry((caller, name)).or_default() += node.total;
        }
    }
    path.push(name);
    for child in &node.children {
        walk(child, path, functions, edges);
    }
    path.pop();
}

fn percent(v: i64, total: i64) -> String {
    if total == 0 {
        return "0%".into();
    }
    format!("{:.2}%", v as f64 * 100.0 / total as f64)
}

/// Larger type for functions holding more of the total, as pprof scales its boxes.
fn font_size(flat: i64, total: i64) -> i64 {
    if total <= 0 {
        return 8;
    }
    8 + (50.0 * (flat.max(0) as f64 / total as f64).sqrt()) as i64
}

fn edge_weight(v: i64, total: i64) -> i64 {
    if total <= 0 {
        return 1;
    }
    1 + (100 * v.max(0) / total)
}

/// A name inside a double-quoted DOT string.
fn escape(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for c in name.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' | '\r' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::TreeBuilder;
    use stackhouse_storage::model::ProfileType;

    fn graph(stacks: &[(&[&str], i64)]) -> Flamegraph {
        let mut b = TreeBuilder::new();
        for (frames, value) in stacks {
            b.add_path(frames, *value);
        }
        Flamegraph::new(
            ProfileType::parse("cpu:nanoseconds:cpu:nanoseconds").unwrap(),
            0,
            b.build(),
        )
    }

    #[test]
    fn recursion_counts_a_stack_once() {
        let out = dot(
            &graph(&[
                (&["main", "f", "f", "g"], 10),
                (&["main", "g"], 5),
                (&["main"], 1),
            ]),
            0,
        );
        assert!(
            out.contains("label=\"main\\n1 (6.25%)\\nof 16 (100.00%)\""),
            "{out}"
        );
        assert!(out.contains("label=\"f\\n0 (0.00%)\\nof 10 (62.50%)\""), "{out}");
        assert!(
            out.contains("label=\"g\\n15 (93.75%)\\nof 15 (93.75%)\""),
            "{out}"
        );
        // f -> f is one edge of 10; main -> g 5 and f -> g 10 are separate edges.
        assert_eq!(out.matches(" -> ").count(), 4, "{out}");
        assert!(out.contains("[label=\" 10\""));
    }

    #[test]
    fn only_the_largest_functions_and_quoted_names() {
        let out = dot(
            &graph(&[(&["a \"quoted\" \\ name"], 3), (&["b"], 2), (&["c"], 1)]),
            2,
        );
        assert!(out.contains("a \\\"quoted\\\" \\\\ name"), "{out}");
        assert!(out.contains("label=\"b\\n"));
        assert!(!out.contains("label=\"c\\n"));
        assert!(out.contains("Showing top 2 nodes out of 3"));
    }
}
