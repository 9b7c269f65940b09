//! JSON of a flamegraph: `{"profile_type": "samples:count:cpu:nanoseconds", "sample_type",
//! "sample_unit", "period_type", "period_unit", "unit", "period", "total", "max_nodes"
//! (when a budget was applied), "root": {"name", "self", "total", "children"}}`.
//!
//! The types derive `Serialize` (and `ToSchema`), so `serde_json` writes them; a tree cut
//! to a node budget while it is built is written here instead, straight from the `Cut`,
//! byte for byte what `serde_json` would write for its [`Node`](crate::Node)s.

use serde::Serialize;

use crate::tree::{Cut, Flamegraph};
use crate::types::ScanStats;

/// A [`Flamegraph`] whose tree was written as JSON while it was cut, so that answering in
/// JSON makes no [`Node`](crate::Node) and no name per node: [`FlamegraphJson::to_json`] is what
/// `serde_json` writes for the flamegraph.
#[derive(Debug)]
pub struct FlamegraphJson {
    /// Everything but the tree, with a childless root standing in for it.
    head: Flamegraph,
    root: Vec<u8>,
}

impl FlamegraphJson {
    /// `root` is the tree as [`write_cut`] writes it.
    pub(crate) fn new(head: Flamegraph, root: Vec<u8>) -> FlamegraphJson {
        FlamegraphJson { head, root }
    }

    pub fn total(&self) -> i64 {
        self.head.total
    }

    pub fn stats(&self) -> Option<&ScanStats> {
        self.head.stats.as_ref()
    }

    /// The flamegraph's JSON: `serde_json` writes everything but the tree, whose JSON
    /// takes the stand-in root's place, so the fields stay what [`Flamegraph`] declares.
    pub fn to_json(&self) -> Vec<u8> {
        let head = serde_json::to_vec(&self.head).expect("writing JSON to a Vec cannot fail");
        let key = b",\"root\":";
        let mut stand_in = key.to_vec();
        json_value(&self.head.root, &mut stand_in);
        // A quote inside a JSON string is escaped, so `,"root":` is only ever the key.
        let at = head
            .windows(stand_in.len())
            .position(|w| w == stand_in)
            .expect("the root follows other fields");
        let mut out = Vec::with_capacity(head.len() + self.root.len());
        out.extend_from_slice(&head[..at + key.len()]);
        out.extend_from_slice(&self.root);
        out.extend_from_slice(&head[at + stand_in.len()..]);
        out
    }
}

/// Appends the tree as JSON, byte for byte what `serde_json` writes for its
/// [`Node`](crate::Node).
pub(crate) fn write_cut(cut: &Cut<'_>, out: &mut Vec<u8>) {
    // The keys, punctuation and two numbers take under 80 bytes a node: reserved once,
    // the buffer is not copied while it grows.
    out.reserve(cut.nodes().iter().map(|n| n.name.len() + 80).sum());
    // Per open node, the children still to come.
    let mut left: Vec<usize> = Vec::new();
    for n in cut.nodes() {
        out.extend_from_slice(b"{\"name\":");
        json_string(n.name, out);
        let mut digits = itoa::Buffer::new();
        out.extend_from_slice(b",\"self\":");
        out.extend_from_slice(digits.format(n.self_value).as_bytes());
        out.extend_from_slice(b",\"total\":");
        out.extend_from_slice(digits.format(n.total).as_bytes());
        out.extend_from_slice(b",\"children\":[");
        if n.children > 0 {
            left.push(n.children);
            continue;
        }
        out.extend_from_slice(b"]}");
        while let Some(l) = left.last_mut() {
            *l -= 1;
            if *l > 0 {
                out.push(b',');
                break;
            }
            left.pop();
            out.extend_from_slice(b"]}");
        }
    }
}

/// `s` as a JSON string: copied as it is when nothing in it needs escaping (frame names
/// rarely do), else escaped by `serde_json`.
fn json_string(s: &str, out: &mut Vec<u8>) {
    // A fold without an early exit: the compiler checks many bytes per instruction.
    let plain = s
        .bytes()
        .fold(true, |plain, b| plain & (b >= 0x20) & (b != b'"') & (b != b'\\'));
    if !plain {
        json_value(s, out);
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

fn json_value<V: Serialize + ?Sized>(value: &V, out: &mut Vec<u8>) {
    serde_json::to_writer(out, value).expect("writing JSON to a Vec cannot fail");
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use stackhouse_storage::model::ProfileType;

    use super::*;
    use crate::tree::testing::{awkward_builder, small_flamegraph};
    use crate::tree::{Node, ROOT_NAME, TreeBuilder, truncate_tree};

    /// What the JSON writer makes of `b` cut to `max_nodes`.
    fn cut_json(b: &TreeBuilder, max_nodes: usize) -> Vec<u8> {
        b.cut(max_nodes, |cut| {
            let mut out = Vec::new();
            write_cut(&cut, &mut out);
            out
        })
    }

    #[test]
    fn the_json_writer_writes_what_serde_writes() {
        for lowest in [0, -1] {
            for seed in 1..30 {
                for max_nodes in [0, 1, 2, 5, 13, 40, 10_000] {
                    let b = awkward_builder(seed, 200, lowest);
                    let mut node = awkward_builder(seed, 200, lowest).build();
                    truncate_tree(&mut node, max_nodes);
                    let want = serde_json::to_string(&node).unwrap();
                    let got = String::from_utf8(cut_json(&b, max_nodes)).unwrap();
                    assert_eq!(got, want, "seed {seed}, max_nodes {max_nodes}, lowest {lowest}");
                }
            }
        }
        let empty = TreeBuilder::new();
        assert_eq!(
            cut_json(&empty, 10),
            br#"{"name":"total","self":0,"total":0,"children":[]}"#
        );
    }

    #[test]
    fn a_flamegraph_as_json_is_what_serde_writes() {
        let pt = ProfileType::parse("samples:count:cpu:nanoseconds").unwrap();
        let b = awkward_builder(3, 100, 0);
        let cases = [
            (None, vec![], None),
            (
                Some(7),
                vec!["pod".to_string()],
                Some(ScanStats {
                    segments: 2,
                    rows_by_tier: [("raw".to_string(), 5)].into(),
                    answered: Some((1, 2)),
                    ..ScanStats::default()
                }),
            ),
        ];
        for (max_nodes, group_by, stats) in cases {
            let mut fg = Flamegraph::new(pt.clone(), 10, awkward_builder(3, 100, 0).build());
            if let Some(max_nodes) = max_nodes {
                fg.truncate(max_nodes);
            }
            fg.group_by = group_by;
            fg.stats = stats;
            let mut head = fg.clone();
            head.root = Node::leaf(ROOT_NAME, fg.total);
            let json = FlamegraphJson::new(head, cut_json(&b, max_nodes.unwrap_or(usize::MAX)));
            assert_eq!(
                String::from_utf8(json.to_json()).unwrap(),
                serde_json::to_string(&fg).unwrap()
            );
        }
        let empty = Flamegraph::empty(pt, 0);
        let json = FlamegraphJson::new(empty.clone(), cut_json(&TreeBuilder::new(), 1));
        assert_eq!(json.to_json(), serde_json::to_vec(&empty).unwrap());
    }

    #[test]
    fn json_names_every_field() {
        let mut fg = small_flamegraph();
        let value = serde_json::to_value(&fg).unwrap();
        assert_eq!(value["profile_type"], "samples:count:cpu:nanoseconds");
        assert_eq!(value["sample_type"], "samples");
        assert_eq!(value["sample_unit"], "count");
        assert_eq!(value["period_type"], "cpu");
        assert_eq!(value["period_unit"], "nanoseconds");
        assert_eq!(value["unit"], "count");
        assert_eq!(value["period"], 10_000_000);
        assert_eq!(value["total"], 23);
        assert!(value.get("max_nodes").is_none());
        assert_eq!(value["root"]["name"], "total");
        assert_eq!(value["root"]["self"], 4);
        assert_eq!(
            value["root"]["children"][1],
            json!({"name": "gc", "self": 1, "total": 1, "children": []})
        );
        fg.truncate(100);
        assert_eq!(serde_json::to_value(&fg).unwrap()["max_nodes"], 100);
    }
}
