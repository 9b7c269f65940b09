//! The text answers of the tools, each bounded: a fixed number of lines or rows chosen by
//! the caller under a hard cap, and at most [`MAX_TEXT`] characters in all. Each answer
//! also carries the same rows as structured content.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap};

use serde_json::{Value, json};
use stackhouse_query::{Diff, DiffNode, Flamegraph, Node, Timeseries, Top};

use super::tools::Cap;

/// Most characters of one text answer.
pub(crate) const MAX_TEXT: usize = 16_000;

/// A tool's answer: text for the model, the same rows as JSON.
#[derive(Debug)]
pub(crate) struct Answer {
    pub text: String,
    pub structured: Value,
}

fn answer(text: String, structured: Value) -> Answer {
    Answer {
        text: capped(text),
        structured,
    }
}

/// `text` cut at a line boundary to [`MAX_TEXT`] characters, saying so.
pub(crate) fn capped(text: String) -> String {
    if text.chars().count() <= MAX_TEXT {
        return text;
    }
    let mut out = String::new();
    for line in text.lines() {
        if out.chars().count() + line.chars().count() + 1 > MAX_TEXT - 80 {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out.push_str(&format!(
        "[truncated: the answer is cut at {MAX_TEXT} characters]\n"
    ));
    out
}

fn pct(part: i64, whole: i64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

fn cap_note(cap: Cap, what: &str) -> String {
    match cap.asked {
        Some(asked) => format!(" ({what} {asked} capped to {})", cap.limit),
        None => String::new(),
    }
}

/// A plain list, one item a line.
pub(crate) fn list(what: &str, items: Vec<String>) -> Answer {
    let mut text = format!("{} {what}:\n", items.len());
    for item in &items {
        text.push_str(item);
        text.push('\n');
    }
    answer(text, json!({ "items": items }))
}

/// The heaviest `cap.limit` nodes of the tree, best first from the root (a node is shown
/// only with its parent), printed depth first: `  - name [total T = P%, self S]`.
pub(crate) fn flamegraph(fg: &Flamegraph, cap: Cap) -> Answer {
    let total = fg.total;
    let mut heap: BinaryHeap<(i64, Reverse<usize>, Vec<usize>)> = BinaryHeap::new();
    let mut order = 0;
    let mut push = |heap: &mut BinaryHeap<_>, node: &Node, path: &[usize]| {
        for (i, child) in node.children.iter().enumerate() {
            if child.total > 0 {
                let mut p = path.to_vec();
                p.push(i);
                order += 1;
                heap.push((child.total, Reverse(order), p));
            }
        }
    };
    push(&mut heap, &fg.root, &[]);
    let mut shown: BTreeSet<Vec<usize>> = BTreeSet::new();
    while shown.len() < cap.limit {
        let Some((_, _, path)) = heap.pop() else { break };
        let node = at(&fg.root, &path);
        push(&mut heap, node, &path);
        shown.insert(path);
    }
    let nodes = count(&fg.root) - 1;
    let mut text = format!(
        "flamegraph of {}: total {total} {}; {} of {nodes} nodes shown{}\n",
        fg.kind.profile_type,
        fg.unit,
        shown.len(),
        cap_note(cap, "max_lines"),
    );
    let mut rows = Vec::new();
    write_tree(&fg.root, &mut Vec::new(), &shown, total, &mut text, &mut rows);
    if shown.len() < nodes {
        text.push_str(&format!(
            "[{} smaller nodes not shown: raise max_lines, or use focus/hide to narrow]\n",
            nodes - shown.len()
        ));
    }
    answer(
        text,
        json!({ "profile_type": fg.kind.profile_type, "unit": fg.unit, "total": total, "nodes": nodes, "lines": rows }),
    )
}

fn at<'a>(root: &'a Node, path: &[usize]) -> &'a Node {
    path.iter().fold(root, |node, &i| &node.children[i])
}

fn count(node: &Node) -> usize {
    1 + node
        .children
        .iter()
        .filter(|c| c.total > 0)
        .map(count)
        .sum::<usize>()
}

fn write_tree(
    node: &Node,
    path: &mut Vec<usize>,
    shown: &BTreeSet<Vec<usize>>,
    total: i64,
    text: &mut String,
    rows: &mut Vec<Value>,
) {
    for (i, child) in node.children.iter().enumerate() {
        path.push(i);
        if shown.contains(path) {
            let indent = "  ".repeat(path.len() - 1);
            text.push_str(&format!(
                "{indent}- {} [total {} = {:.1}%, self {}]\n",
                child.name,
                child.total,
                pct(child.total, total),
                child.self_value
            ));
            rows.push(json!({ "depth": path.len() - 1, "name": child.name, "total": child.total, "self": child.self_value }));
            write_tree(child, path, shown, total, text, rows);
        }
        path.pop();
    }
}

pub(crate) fn top(top: &Top, cap: Cap) -> Answer {
    let total = top.total;
    let mut text = format!(
        "top functions of {} by self value: total {total} {}; {} shown{}\n",
        top.kind.profile_type,
        top.unit,
        top.functions.len(),
        cap_note(cap, "limit"),
    );
    for (rank, f) in top.functions.iter().enumerate() {
        text.push_str(&format!(
            "{}. {} [self {} = {:.1}%, total {} = {:.1}%]\n",
            rank + 1,
            f.name,
            f.self_value,
            pct(f.self_value, total),
            f.total,
            pct(f.total, total)
        ));
    }
    let rows: Vec<Value> = top
        .functions
        .iter()
        .map(|f| json!({ "name": f.name, "self": f.self_value, "total": f.total }))
        .collect();
    answer(
        text,
        json!({ "profile_type": top.kind.profile_type, "unit": top.unit, "total": total, "functions": rows }),
    )
}

/// Self value per function name on each side.
fn self_by_name(node: &DiffNode, out: &mut BTreeMap<String, (i64, i64)>, root: bool) {
    if !root && (node.baseline_self != 0 || node.comparison_self != 0) {
        let entry = out.entry(node.name.clone()).or_default();
        entry.0 += node.baseline_self;
        entry.1 += node.comparison_self;
    }
    for child in &node.children {
        self_by_name(child, out, false);
    }
}

/// The functions whose share of self value moved most between the sides.
pub(crate) fn diff(diff: &Diff, cap: Cap) -> Answer {
    let (bt, ct) = (diff.baseline_total, diff.comparison_total);
    let mut by_name = BTreeMap::new();
    self_by_name(&diff.root, &mut by_name, true);
    let mut rows: Vec<(String, i64, i64, f64)> = by_name
        .into_iter()
        .map(|(name, (b, c))| {
            let change = pct(c, ct) - pct(b, bt);
            (name, b, c, change)
        })
        .collect();
    rows.sort_by(|a, b| b.3.abs().total_cmp(&a.3.abs()).then_with(|| a.0.cmp(&b.0)));
    let functions = rows.len();
    rows.truncate(cap.limit);
    let mut text = format!(
        "diff of {}: baseline total {bt} {unit}, comparison total {ct} {unit}; {} of {functions} functions shown, largest change of self share first{}\n",
        diff.kind.profile_type,
        rows.len(),
        cap_note(cap, "limit"),
        unit = diff.unit,
    );
    for (name, b, c, change) in &rows {
        text.push_str(&format!(
            "{name} [self share {:.1}% -> {:.1}% ({change:+.1} points), self {b} -> {c}]\n",
            pct(*b, bt),
            pct(*c, ct),
        ));
    }
    let json_rows: Vec<Value> = rows
        .iter()
        .map(|(name, b, c, change)| {
            json!({ "name": name, "baseline_self": b, "comparison_self": c, "share_change": change })
        })
        .collect();
    answer(
        text,
        json!({
            "profile_type": diff.kind.profile_type, "unit": diff.unit, "baseline_total": bt,
            "comparison_total": ct, "functions": functions, "rows": json_rows,
        }),
    )
}

/// Per series: total, buckets with samples, and min, max and mean per bucket.
pub(crate) fn timeseries(ts: &Timeseries, cap: Cap) -> Answer {
    let shown = ts.series.len().min(cap.limit);
    let mut text = format!(
        "timeseries of {} ({} per bucket of {}s, group by [{}]): {} of {} series shown, largest total first{}\n",
        ts.kind.profile_type,
        match ts.aggregation {
            stackhouse_query::Aggregation::Sum => "sum",
            stackhouse_query::Aggregation::Avg => "avg",
        },
        ts.step_nanos as f64 / 1e9,
        ts.group_by.join(", "),
        shown,
        ts.series.len(),
        cap_note(cap, "max_groups"),
    );
    let mut rows = Vec::new();
    for series in ts.series.iter().take(shown) {
        let values: Vec<f64> = series.points.iter().map(|p| p.1).collect();
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let mean = if values.is_empty() {
            0.0
        } else {
            values.iter().sum::<f64>() / values.len() as f64
        };
        let (min, max) = if values.is_empty() { (0.0, 0.0) } else { (min, max) };
        let group = if series.group.is_empty() {
            "(all)".to_string()
        } else {
            series
                .group
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(",")
        };
        text.push_str(&format!(
            "{group} [total {}, {} buckets, min {min}, max {max}, mean {mean:.2} {}]\n",
            series.total,
            values.len(),
            ts.unit
        ));
        rows.push(json!({
            "group": series.group, "total": series.total, "buckets": values.len(),
            "min": min, "max": max, "mean": mean,
        }));
    }
    if shown < ts.series.len() {
        text.push_str(&format!(
            "[{} smaller series not shown: raise max_groups]\n",
            ts.series.len() - shown
        ));
    }
    answer(
        text,
        json!({ "profile_type": ts.kind.profile_type, "unit": ts.unit, "step_nanos": ts.step_nanos, "series_count": ts.series.len(), "series": rows }),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_answers_are_cut_and_say_so() {
        let text: String = (0..5000).map(|i| format!("line {i}\n")).collect();
        let cut = capped(text);
        assert!(cut.chars().count() <= MAX_TEXT);
        assert!(cut.ends_with("[truncated: the answer is cut at 16000 characters]\n"));
        assert_eq!(capped("short\n".into()), "short\n");
    }
}
