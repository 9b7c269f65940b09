//! Output formats of a flamegraph.
//!
//! - JSON, through `serde`: `{"profile_type": "samples:count:cpu:nanoseconds",
//!   "sample_type", "sample_unit", "period_type", "period_unit", "unit", "period", "total",
//!   "max_nodes" (when a budget was applied), "root": {"name", "self", "total", "children"}}`.
//! - Folded stacks ([`folded`]), as Brendan Gregg's `flamegraph.pl` and speedscope read.

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::tree::{Flamegraph, Node};

impl Serialize for Flamegraph {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let pt = &self.profile_type;
        let mut s = serializer.serialize_struct("Flamegraph", 11)?;
        s.serialize_field("profile_type", &pt.id())?;
        s.serialize_field("sample_type", &pt.sample_type)?;
        s.serialize_field("sample_unit", &pt.sample_unit)?;
        s.serialize_field("period_type", &pt.period_type)?;
        s.serialize_field("period_unit", &pt.period_unit)?;
        s.serialize_field("unit", &self.unit)?;
        s.serialize_field("period", &self.period)?;
        s.serialize_field("total", &self.total)?;
        match self.max_nodes {
            Some(max_nodes) => s.serialize_field("max_nodes", &max_nodes)?,
            None => s.skip_field("max_nodes")?,
        }
        s.serialize_field("root", &self.root)?;
        s.end()
    }
}

/// Folded stacks: one line `frame1;frame2;...;leaf VALUE` per call path with a non-zero
/// self value, root-first without the synthetic root, lines sorted.
///
/// Samples with an empty stack have no frames to write; they count in the JSON `total`
/// (as the root's `self`) but not here, so the lines may sum to less than the total.
/// Frame names are written as they are: a name containing `;` or a newline cannot be
/// told apart from several frames or lines in this format.
pub fn folded(flamegraph: &Flamegraph) -> String {
    let mut lines = Vec::new();
    let mut path = Vec::new();
    for child in &flamegraph.root.children {
        folded_lines(child, &mut path, &mut lines);
    }
    lines.sort_unstable();
    let mut out = String::with_capacity(lines.iter().map(|l| l.len() + 1).sum());
    for line in lines {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

fn folded_lines<'n>(node: &'n Node, path: &mut Vec<&'n str>, lines: &mut Vec<String>) {
    path.push(&node.name);
    if node.self_value != 0 {
        lines.push(format!("{} {}", path.join(";"), node.self_value));
    }
    for child in &node.children {
        folded_lines(child, path, lines);
    }
    path.pop();
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use stackhouse_storage::model::ProfileType;

    use super::*;
    use crate::tree::TreeBuilder;

    fn flamegraph() -> Flamegraph {
        let mut b = TreeBuilder::new();
        b.add_path(&["main", "work", "leaf"], 10);
        b.add_path(&["main", "work"], 3);
        b.add_path(&["main", "idle"], 5);
        b.add_path(&["gc"], 1);
        b.add_path::<&str>(&[], 4);
        let pt = ProfileType::parse("samples:count:cpu:nanoseconds").unwrap();
        Flamegraph::new(pt, 10_000_000, b.build())
    }

    #[test]
    fn folded_lists_paths_with_self_value() {
        assert_eq!(
            folded(&flamegraph()),
            "gc 1\nmain;idle 5\nmain;work 3\nmain;work;leaf 10\n"
        );
        assert_eq!(folded(&Flamegraph::empty(ProfileType::default(), 0)), "");
    }

    #[test]
    fn json_names_every_field() {
        let mut fg = flamegraph();
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
