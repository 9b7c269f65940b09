//! Reading the API's trees back: JSON flamegraphs and diffs, folded text, and Pyroscope's
//! flamebearer layout (decoded and checked for its geometric invariants).

use std::collections::BTreeMap;

use serde_json::Value;

pub type Path = Vec<String>;

fn int(v: &Value, what: &str) -> i64 {
    v.as_i64()
        .unwrap_or_else(|| panic!("{what}: not an integer: {v}"))
}

fn children(node: &Value) -> &[Value] {
    node["children"]
        .as_array()
        .unwrap_or_else(|| panic!("node without a children array: {node}"))
}

fn name(node: &Value) -> &str {
    node["name"]
        .as_str()
        .unwrap_or_else(|| panic!("node without a name: {node}"))
}

/// `a;b;c → self` for every node under `node` (its own name left out) with a non-zero
/// self value.
pub fn json_folded(node: &Value) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let mut path = Vec::new();
    for child in children(node) {
        walk_folded(child, &mut path, &mut out);
    }
    out
}

fn walk_folded(node: &Value, path: &mut Vec<String>, out: &mut BTreeMap<String, i64>) {
    path.push(name(node).to_string());
    let self_value = int(&node["self"], "self");
    if self_value != 0 {
        assert!(
            out.insert(path.join(";"), self_value).is_none(),
            "path {path:?} appears twice"
        );
    }
    for child in children(node) {
        walk_folded(child, path, out);
    }
    path.pop();
}

/// `(self, total)` of every node, keyed by path (the node itself is the empty path); also
/// checks total = self + children's totals and the children order (total descending, then
/// name).
pub fn json_node_values(node: &Value) -> BTreeMap<Path, (i64, i64)> {
    let mut out = BTreeMap::new();
    walk_values(node, &mut Vec::new(), &mut out);
    out
}

fn walk_values(node: &Value, path: &mut Path, out: &mut BTreeMap<Path, (i64, i64)>) {
    let self_value = int(&node["self"], "self");
    let total = int(&node["total"], "total");
    let kids = children(node);
    let sum: i64 = kids.iter().map(|c| int(&c["total"], "total")).sum();
    assert_eq!(total, self_value + sum, "node {path:?}: total = self + children");
    for pair in kids.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let key = |n: &Value| (-int(&n["total"], "total"), name(n).to_string());
        assert!(
            key(a) < key(b),
            "children of {path:?} out of order: {} before {}",
            name(a),
            name(b)
        );
    }
    assert!(
        out.insert(path.clone(), (self_value, total)).is_none(),
        "path {path:?} twice"
    );
    for child in kids {
        path.push(name(child).to_string());
        walk_values(child, path, out);
        path.pop();
    }
}

/// A folded body as a map; a path listed twice fails.
pub fn parse_folded(text: &str) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let (path, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("bad folded line {line:?}"));
        let value = value
            .parse::<i64>()
            .unwrap_or_else(|_| panic!("bad folded value in {line:?}"));
        assert!(
            out.insert(path.to_string(), value).is_none(),
            "path {path:?} twice"
        );
    }
    out
}

/// A folded diff body, `a;b;c BASE COMP` per line.
pub fn parse_folded_diff(text: &str) -> BTreeMap<String, (i64, i64)> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let mut parts = line.rsplitn(3, ' ');
        let (comp, base, path) = (parts.next(), parts.next(), parts.next());
        let (Some(comp), Some(base), Some(path)) = (comp, base, path) else {
            panic!("bad folded diff line {line:?}")
        };
        let n = |s: &str| {
            s.parse::<i64>()
                .unwrap_or_else(|_| panic!("bad folded diff value in {line:?}"))
        };
        assert!(
            out.insert(path.to_string(), (n(base), n(comp))).is_none(),
            "path {path:?} twice"
        );
    }
    out
}

/// `(baseline_self, baseline_total, comparison_self, comparison_total)` per path of a JSON
/// diff tree, with the sums and the children order (larger of the two totals descending,
/// then name) checked.
pub fn json_diff_values(node: &Value) -> BTreeMap<Path, [i64; 4]> {
    let mut out = BTreeMap::new();
    walk_diff(node, &mut Vec::new(), &mut out);
    out
}

fn walk_diff(node: &Value, path: &mut Path, out: &mut BTreeMap<Path, [i64; 4]>) {
    let get = |n: &Value, k: &str| int(&n[k], k);
    let v = [
        get(node, "baseline_self"),
        get(node, "baseline_total"),
        get(node, "comparison_self"),
        get(node, "comparison_total"),
    ];
    let kids = children(node);
    let bsum: i64 = kids.iter().map(|c| get(c, "baseline_total")).sum();
    let csum: i64 = kids.iter().map(|c| get(c, "comparison_total")).sum();
    assert_eq!(
        v[1],
        v[0] + bsum,
        "diff node {path:?}: baseline total = self + children"
    );
    assert_eq!(
        v[3],
        v[2] + csum,
        "diff node {path:?}: comparison total = self + children"
    );
    for pair in kids.windows(2) {
        let key = |n: &Value| {
            (
                -get(n, "baseline_total").max(get(n, "comparison_total")),
                name(n).to_string(),
            )
        };
        assert!(
            key(&pair[0]) < key(&pair[1]),
            "diff children of {path:?} out of order: {} before {}",
            name(&pair[0]),
            name(&pair[1])
        );
    }
    assert!(out.insert(path.clone(), v).is_none(), "path {path:?} twice");
    for child in kids {
        path.push(name(child).to_string());
        walk_diff(child, path, out);
        path.pop();
    }
}

/// One decoded flamebearer node; for a diff, index 0 is the left (baseline) side and 1
/// the right (comparison) side; a single flamegraph uses side 0 only.
#[derive(Clone, Debug)]
struct FbNode {
    x: [i64; 2],
    total: [i64; 2],
    self_value: [i64; 2],
    name: String,
    parent: Option<usize>,
}

/// Decodes a flamebearer body (`{version, flamebearer, metadata}`), checks its invariants
/// — offsets not negative (no overlap in a level), each node inside exactly one parent of
/// the level above, total = self + children, one level-0 node `total` spanning numTicks
/// (single) or leftTicks/rightTicks (diff), maxSelf the largest self (single) — and returns
/// `path → [self, total]` per side (the root is the empty path).
// `side` indexes several parallel per-side arrays at once.
#[allow(clippy::needless_range_loop)]
pub fn decode_flamebearer(body: &Value) -> BTreeMap<Path, Vec<[i64; 2]>> {
    assert_eq!(body["version"], 1, "flamebearer version");
    let fb = &body["flamebearer"];
    let format = body["metadata"]["format"].as_str().expect("metadata.format");
    let sides = match format {
        "single" => 1,
        "double" => 2,
        other => panic!("unknown flamebearer format {other:?}"),
    };
    let width = if sides == 1 { 4 } else { 7 };
    let names: Vec<&str> = fb["names"]
        .as_array()
        .expect("flamebearer.names")
        .iter()
        .map(|n| n.as_str().expect("name string"))
        .collect();
    let levels: Vec<Vec<i64>> = fb["levels"]
        .as_array()
        .expect("flamebearer.levels")
        .iter()
        .map(|l| {
            l.as_array()
                .expect("level array")
                .iter()
                .map(|n| int(n, "level entry"))
                .collect()
        })
        .collect();
    let mut nodes: Vec<FbNode> = Vec::new();
    let mut by_level: Vec<Vec<usize>> = Vec::new();
    for (depth, level) in levels.iter().enumerate() {
        assert!(
            !level.is_empty() && level.len() % width == 0,
            "level {depth} has {} numbers, not a non-zero multiple of {width}",
            level.len()
        );
        let mut ends = [0i64; 2];
        let mut ids = Vec::new();
        for chunk in level.chunks(width) {
            let mut node = FbNode {
                x: [0; 2],
                total: [0; 2],
                self_value: [0; 2],
                name: String::new(),
                parent: None,
            };
            for side in 0..sides {
                let base = side * 3;
                let offset = chunk[base];
                assert!(offset >= 0, "level {depth}: negative offset {offset} (overlap)");
                node.x[side] = ends[side] + offset;
                node.total[side] = chunk[base + 1];
                node.self_value[side] = chunk[base + 2];
                assert!(
                    node.total[side] >= 0 && node.self_value[side] >= 0,
                    "level {depth}: negative value"
                );
                ends[side] = node.x[side] + node.total[side];
            }
            let name_index = chunk[width - 1];
            node.name = names
                .get(usize::try_from(name_index).expect("name index"))
                .unwrap_or_else(|| panic!("name index {name_index} out of range"))
                .to_string();
            assert!(
                node.total.iter().any(|&t| t > 0),
                "level {depth}: node {} has no width",
                node.name
            );
            if depth > 0 {
                let parents: Vec<usize> = by_level[depth - 1]
                    .iter()
                    .copied()
                    .filter(|&p| {
                        let p = &nodes[p];
                        (0..sides).all(|s| {
                            let inside =
                                p.x[s] <= node.x[s] && node.x[s] + node.total[s] <= p.x[s] + p.total[s];
                            // A node with width on this side starts strictly inside.
                            inside && (node.total[s] == 0 || node.x[s] < p.x[s] + p.total[s])
                        })
                    })
                    .collect();
                assert_eq!(
                    parents.len(),
                    1,
                    "level {depth}: node {} lies inside {} parents",
                    node.name,
                    parents.len()
                );
                node.parent = Some(parents[0]);
            }
            ids.push(nodes.len());
            nodes.push(node);
        }
        by_level.push(ids);
    }
    assert_eq!(by_level.first().map(Vec::len), Some(1), "level 0 holds one node");
    let root = &nodes[0];
    assert_eq!(root.name, "total", "level 0 is the root");
    if sides == 1 {
        assert_eq!(root.total[0], int(&fb["numTicks"], "numTicks"), "root = numTicks");
    } else {
        assert_eq!(
            root.total[0],
            int(&fb["leftTicks"], "leftTicks"),
            "root = leftTicks"
        );
        assert_eq!(
            root.total[1],
            int(&fb["rightTicks"], "rightTicks"),
            "root = rightTicks"
        );
    }
    if sides == 1 {
        let max_self = nodes.iter().map(|n| n.self_value[0]).max().unwrap();
        assert_eq!(int(&fb["maxSelf"], "maxSelf"), max_self, "maxSelf");
    }
    // Sums over children.
    let mut child_sums = vec![[0i64; 2]; nodes.len()];
    for n in &nodes {
        if let Some(p) = n.parent {
            for s in 0..sides {
                child_sums[p][s] += n.total[s];
            }
        }
    }
    let mut out: BTreeMap<Path, Vec<[i64; 2]>> = BTreeMap::new();
    for (i, n) in nodes.iter().enumerate() {
        let mut path = Vec::new();
        let mut at = n.parent;
        while let Some(p) = at {
            path.push(nodes[p].name.clone());
            at = nodes[p].parent;
        }
        path.reverse();
        // Drop the root's own name: paths are relative to it.
        if !path.is_empty() {
            path.remove(0);
        }
        if i != 0 {
            path.push(n.name.clone());
        }
        for s in 0..sides {
            assert_eq!(
                n.total[s],
                n.self_value[s] + child_sums[i][s],
                "flamebearer node {path:?} side {s}: total = self + children"
            );
        }
        let values = (0..sides).map(|s| [n.self_value[s], n.total[s]]).collect();
        assert!(
            out.insert(path.clone(), values).is_none(),
            "flamebearer path {path:?} twice"
        );
    }
    out
}

/// Folded paths (non-zero self) of side `side` of a decoded flamebearer.
pub fn flamebearer_folded(decoded: &BTreeMap<Path, Vec<[i64; 2]>>, side: usize) -> BTreeMap<String, i64> {
    decoded
        .iter()
        .filter(|(path, v)| !path.is_empty() && v[side][0] != 0)
        .map(|(path, v)| (path.join(";"), v[side][0]))
        .collect()
}
