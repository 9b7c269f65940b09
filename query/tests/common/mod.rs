//! Helpers shared by the query integration tests.

use std::collections::BTreeMap;

use stackhouse_query::tree::Node;

/// Self values per root-first path (`a;b;c`, `""` for the root), zeros left out.
pub(crate) fn paths(root: &Node) -> BTreeMap<String, i64> {
    fn walk(node: &Node, prefix: &str, out: &mut BTreeMap<String, i64>) {
        if node.self_value != 0 {
            out.insert(prefix.to_string(), node.self_value);
        }
        for c in &node.children {
            let path = if prefix.is_empty() {
                c.name.clone()
            } else {
                format!("{prefix};{}", c.name)
            };
            walk(c, &path, out);
        }
    }
    let mut out = BTreeMap::new();
    walk(root, "", &mut out);
    out
}
