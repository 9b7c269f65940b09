//! The stacks table of schema version 2: a symbol object's stack nodes in preorder, each
//! naming its parent by how many rows back it is, and no node storing its own id, which is
//! recomputed from its parent and location on reading. Random 16-byte ids do not compress:
//! the two of them per node (own and parent) were more than half of a compacted store.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, AsArray, FixedSizeBinaryArray, RecordBatch, UInt32Array};
use arrow::datatypes::UInt32Type;

use crate::model::{FastMap, IdMap, StackNode, SymbolId};
use crate::schema;
use crate::store::StoreError;

/// Column names of the version 2 stacks table.
pub mod col {
    /// Rows back to the parent node; 0 when the parent is not in this object (a root
    /// frame, or a node whose parent an earlier object stored).
    pub const UP: &str = "up";
    /// The parent's id when it is not in this object and the node is no root; else null.
    pub const PARENT_ID: &str = "parent_id";
    pub const LOCATION_ID: &str = "location_id";
}

/// The nodes of `stacks` as a version 2 table: preorder from the roots of this object,
/// children by id, so that the file is deterministic and a chain of frames reads as a run
/// of `up = 1`.
pub fn encode(stacks: &IdMap<StackNode>) -> Result<RecordBatch, StoreError> {
    let order = preorder(stacks);
    let mut row: FastMap<SymbolId, u32> = FastMap::default();
    row.reserve(order.len());
    let mut up = Vec::with_capacity(order.len());
    let mut external = Vec::with_capacity(order.len());
    for (i, (id, node)) in order.iter().enumerate() {
        match row.get(&node.parent_id) {
            Some(&parent) => {
                up.push(i as u32 - parent);
                external.push(None);
            }
            None => {
                up.push(0);
                external.push((!node.parent_id.is_zero()).then_some(node.parent_id.0));
            }
        }
        row.insert(*id, i as u32);
    }
    let location_ids: Vec<u8> = order.iter().flat_map(|(_, n)| n.location_id.0).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from(up)),
        Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(
            external.into_iter(),
            16,
        )?),
        Arc::new(FixedSizeBinaryArray::new(16, location_ids.into(), None)),
    ];
    Ok(RecordBatch::try_new(schema::STACKS.clone(), columns)?)
}

/// Every node once, parents before their children where the parent is in `stacks`.
fn preorder(stacks: &IdMap<StackNode>) -> Vec<(SymbolId, StackNode)> {
    let mut children: FastMap<SymbolId, Vec<SymbolId>> = FastMap::default();
    let mut roots = Vec::new();
    for (&id, node) in stacks {
        if stacks.contains_key(&node.parent_id) {
            children.entry(node.parent_id).or_default().push(id);
        } else {
            roots.push(id);
        }
    }
    for list in children.values_mut() {
        list.sort_unstable();
    }
    roots.sort_unstable();
    let mut order = Vec::with_capacity(stacks.len());
    let mut todo: Vec<SymbolId> = roots.into_iter().rev().collect();
    while let Some(id) = todo.pop() {
        order.push((id, stacks[&id]));
        if let Some(list) = children.get(&id) {
            todo.extend(list.iter().rev());
        }
    }
    // Content ids cannot form a cycle short of a hash collision; should one ever do, its
    // nodes are still written, naming their parents by id.
    if order.len() < stacks.len() {
        let placed: std::collections::HashSet<SymbolId> = order.iter().map(|(id, _)| *id).collect();
        let mut rest: Vec<_> = stacks.iter().filter(|(id, _)| !placed.contains(id)).collect();
        rest.sort_unstable_by_key(|(id, _)| **id);
        order.extend(rest.into_iter().map(|(id, node)| (*id, *node)));
    }
    order
}

/// Reads the record batches of one version 2 stacks object in order, recomputing each
/// node's id.
#[derive(Default)]
pub struct Decoder {
    /// Ids of the rows read so far, for `up` to point into.
    ids: Vec<SymbolId>,
}

impl Decoder {
    pub fn read(
        &mut self,
        table: &RecordBatch,
        key: &str,
        into: &mut IdMap<StackNode>,
    ) -> Result<(), StoreError> {
        let c = table.columns();
        let up = c[0].as_primitive::<UInt32Type>();
        let parents = c[1].as_fixed_size_binary();
        let locations = c[2].as_fixed_size_binary();
        into.reserve(table.num_rows());
        for i in 0..table.num_rows() {
            let back = up.value(i) as usize;
            let parent_id = if back > 0 {
                self.ids
                    .len()
                    .checked_sub(back)
                    .map(|row| self.ids[row])
                    .ok_or_else(|| StoreError::Corrupt {
                        key: key.to_string(),
                        reason: format!("stack row {} names a parent {back} rows back", self.ids.len()),
                    })?
            } else if parents.is_null(i) {
                SymbolId::ZERO
            } else {
                id_at(parents, i)
            };
            let node = StackNode {
                parent_id,
                location_id: id_at(locations, i),
            };
            let id = node.id();
            self.ids.push(id);
            into.insert(id, node);
        }
        Ok(())
    }
}

fn id_at(array: &FixedSizeBinaryArray, i: usize) -> SymbolId {
    SymbolId::from_slice(array.value(i)).expect("schema checked: 16 bytes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Batch;

    fn round_trip(stacks: &IdMap<StackNode>) -> IdMap<StackNode> {
        let table = encode(stacks).unwrap();
        let mut read = IdMap::default();
        // Split in two batches: `up` points across them.
        let half = table.num_rows() / 2;
        let mut decoder = Decoder::default();
        for part in [table.slice(0, half), table.slice(half, table.num_rows() - half)] {
            decoder.read(&part, "k", &mut read).unwrap();
        }
        read
    }

    fn id(n: u8) -> SymbolId {
        SymbolId([n; 16])
    }

    #[test]
    fn nodes_and_ids_survive_with_parents_inside_and_outside_the_object() {
        let mut batch = Batch::new("t");
        for path in [&[1, 2, 3][..], &[1, 2, 4], &[1, 5], &[6], &[6, 2, 3]] {
            let path: Vec<SymbolId> = path.iter().rev().map(|&n| id(n)).collect();
            batch.add_stack(&path);
        }
        assert_eq!(batch.stacks.len(), 8);
        assert_eq!(round_trip(&batch.stacks), batch.stacks);

        // Without the root nodes, their children name their parents by id.
        let roots: Vec<SymbolId> = batch
            .stacks
            .iter()
            .filter(|(_, n)| n.parent_id.is_zero())
            .map(|(id, _)| *id)
            .collect();
        let mut partial = batch.stacks.clone();
        partial.retain(|id, _| !roots.contains(id));
        let table = encode(&partial).unwrap();
        let external = table.column(1).null_count();
        assert_eq!(table.num_rows() - external, 3, "the children of the two roots");
        assert_eq!(round_trip(&partial), partial);
    }

    #[test]
    fn a_chain_is_a_run_of_one_row_back() {
        let mut batch = Batch::new("t");
        let path: Vec<SymbolId> = (1..=50).rev().map(id).collect();
        batch.add_stack(&path);
        let table = encode(&batch.stacks).unwrap();
        let up: Vec<u32> = table.column(0).as_primitive::<UInt32Type>().values().to_vec();
        assert_eq!(up[0], 0);
        assert!(up[1..].iter().all(|&u| u == 1), "{up:?}");
    }

    #[test]
    fn a_parent_beyond_the_first_row_is_corrupt() {
        let mut batch = Batch::new("t");
        batch.add_stack(&[id(2), id(1)]);
        let table = encode(&batch.stacks).unwrap();
        // The child's row alone: its parent would be one row before the first.
        let err = Decoder::default()
            .read(&table.slice(1, 1), "k", &mut IdMap::default())
            .unwrap_err();
        assert!(err.to_string().contains("1 rows back"), "{err}");
    }
}
