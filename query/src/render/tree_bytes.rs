//! Pyroscope's tree serialization (`SelectMergeStacktraces` with `format` TREE): the
//! call tree of function names, depth first from a nameless virtual root; per node
//! `uvarint(len(name)) name uvarint(self) uvarint(children)`, children following their
//! parent. The virtual root holds the top frames (our root's `self`, samples without
//! frames, goes in its `self`, which Pyroscope's reader ignores). A reader rebuilds each
//! total by summing selfs, so truncation must leave `other` nodes in place, as
//! [`crate::tree::truncate_tree`] does.

use crate::tree::Node;

/// The serialized tree under `root` (a flamegraph root; its name is not written).
pub fn tree_bytes(root: &Node) -> Vec<u8> {
    let mut out = Vec::new();
    if root.total == 0 && root.children.is_empty() {
        // Pyroscope writes nothing for an empty tree.
        return out;
    }
    write_node("", root.self_value, &root.children, &mut out);
    let mut pending: Vec<&Node> = root.children.iter().rev().collect();
    while let Some(node) = pending.pop() {
        write_node(&node.name, node.self_value, &node.children, &mut out);
        pending.extend(node.children.iter().rev());
    }
    out
}

fn write_node(name: &str, self_value: i64, children: &[Node], out: &mut Vec<u8>) {
    uvarint(name.len() as u64, out);
    out.extend_from_slice(name.as_bytes());
    // As Pyroscope's writer: the value's two's complement bits.
    uvarint(self_value as u64, out);
    uvarint(children.len() as u64, out);
}

fn uvarint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::TreeBuilder;

    #[test]
    fn bytes_as_the_format_lays_them_out() {
        let mut b = TreeBuilder::new();
        b.add_path(&["main", "work"], 300);
        b.add_path(&["main"], 1);
        b.add_path(&["idle"], 7);
        b.add_path::<&str>(&[], 2);
        let mut want = vec![0, 2, 2]; // the virtual root: no name, self 2, 2 children
        want.extend(b"\x04main\x01\x01"); // then depth first, the largest child first
        want.extend(b"\x04work\xac\x02\x00"); // 300 is the varint ac 02
        want.extend(b"\x04idle\x07\x00");
        assert_eq!(tree_bytes(&b.build()), want);
    }

    #[test]
    fn empty_tree_is_empty() {
        assert!(tree_bytes(&TreeBuilder::new().build()).is_empty());
    }
}
