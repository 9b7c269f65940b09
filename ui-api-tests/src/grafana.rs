//! Grafana's reading of a Connect `FlameGraph`: a port of `levelsToTree` from the Pyroscope
//! datasource (`query.go`), which turns levels into the nested tree the flame graph panel
//! draws. Its quirks are kept: the root's name is read from the root's offset slot, and
//! each level's nodes are handed to the parents of the level above strictly in order.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::connect_client::int;

#[derive(Clone, Debug)]
pub struct ProfileTree {
    pub start: i64,
    pub value: i64,
    pub self_value: i64,
    pub name: String,
    pub nodes: Vec<ProfileTree>,
}

/// `levels[d].values` (protojson, int64 as strings) and `names` of a `FlameGraph`.
pub fn levels_of(flamegraph: &Value) -> (Vec<Vec<i64>>, Vec<String>) {
    let levels = flamegraph["levels"]
        .as_array()
        .map(|ls| {
            ls.iter()
                .map(|l| {
                    l["values"]
                        .as_array()
                        .map_or(Vec::new(), |v| v.iter().map(int).collect())
                })
                .collect()
        })
        .unwrap_or_default();
    let names = flamegraph["names"]
        .as_array()
        .map(|ns| ns.iter().map(|n| n.as_str().expect("name").to_string()).collect())
        .unwrap_or_default();
    (levels, names)
}

/// The tree Grafana builds; `None` for no levels. Nodes are addressed by a path of child
/// indices while building, as the Go code keeps pointers.
pub fn levels_to_tree(levels: &[Vec<i64>], names: &[String]) -> Option<ProfileTree> {
    let first = levels.first()?;
    let mut tree = ProfileTree {
        start: 0,
        value: first[1],
        self_value: first[2],
        name: names[first[0] as usize].clone(),
        nodes: Vec::new(),
    };
    let mut parents: Vec<Vec<usize>> = vec![Vec::new()];
    for level in levels.iter().skip(1) {
        if parents.is_empty() {
            break;
        }
        let mut next = Vec::new();
        let mut queue = parents.into_iter();
        let mut current = queue.next().expect("not empty");
        let mut index = 0;
        let mut offset = 0;
        while index < level.len() {
            let start = level[index] + offset;
            let value = level[index + 1];
            let end = start + value;
            let parent = node_at(&mut tree, &current);
            if start >= parent.start && end <= parent.start + parent.value {
                parent.nodes.push(ProfileTree {
                    start,
                    value,
                    self_value: level[index + 2],
                    name: names[level[index + 3] as usize].clone(),
                    nodes: Vec::new(),
                });
                let mut path = current.clone();
                path.push(parent.nodes.len() - 1);
                next.push(path);
                index += 4;
                offset = end;
            } else {
                match queue.next() {
                    Some(p) => current = p,
                    None => break,
                }
            }
        }
        parents = next;
    }
    Some(tree)
}

fn node_at<'t>(tree: &'t mut ProfileTree, path: &[usize]) -> &'t mut ProfileTree {
    path.iter().fold(tree, |node, &i| &mut node.nodes[i])
}

/// `a;b;c → self` of every node below the root with a non-zero self value.
pub fn folded(tree: &ProfileTree) -> BTreeMap<String, i64> {
    fn walk(node: &ProfileTree, path: &mut Vec<String>, out: &mut BTreeMap<String, i64>) {
        path.push(node.name.clone());
        if node.self_value != 0 {
            *out.entry(path.join(";")).or_default() += node.self_value;
        }
        node.nodes.iter().for_each(|c| walk(c, path, out));
        path.pop();
    }
    let mut out = BTreeMap::new();
    for child in &tree.nodes {
        walk(child, &mut Vec::new(), &mut out);
    }
    out
}

/// Checks what the panel relies on: every node's value is its self plus its children's.
pub fn assert_consistent(tree: &ProfileTree) {
    let children: i64 = tree.nodes.iter().map(|c| c.value).sum();
    assert_eq!(
        tree.value,
        tree.self_value + children,
        "node {}: total = self + children",
        tree.name
    );
    tree.nodes.iter().for_each(assert_consistent);
}

pub fn count(tree: &ProfileTree) -> usize {
    1 + tree.nodes.iter().map(count).sum::<usize>()
}
