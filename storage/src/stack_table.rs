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
    let up: Vec<u32> = order
        .iter()
        .enumerate()
        .map(|(i, p)| p.parent_row.map_or(0, |row| i as u32 - row))
        .collect();
    let external = order
        .iter()
        .map(|p| (p.parent_row.is_none() && !p.node.parent_id.is_zero()).then_some(p.node.parent_id.0));
    let location_ids: Vec<u8> = order.iter().flat_map(|p| p.node.location_id.0).collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from(up)),
        Arc::new(FixedSizeBinaryArray::try_from_sparse_iter_with_size(
            external, 16,
        )?),
        Arc::new(FixedSizeBinaryArray::new(16, location_ids.into(), None)),
    ];
    Ok(RecordBatch::try_new(schema::STACKS.clone(), columns)?)
}

/// A node in its row of the table.
struct Placed {
    id: SymbolId,
    node: StackNode,
    /// The row of its parent, when the parent is in the table before it.
    parent_row: Option<u32>,
}

/// Every node once, parents before their children where the parent is in `stacks`.
///
/// Children are kept in one array sorted by (parent, id), each parent's run of them
/// indexed by a map, rather than in a map of child lists: a flush writes thousands of new
/// nodes, mostly chains of one child each, and a list per parent was an allocation per
/// node.
fn preorder(stacks: &IdMap<StackNode>) -> Vec<Placed> {
    let (mut edges, mut roots): (Vec<_>, Vec<_>) = stacks
        .iter()
        .map(|(&id, &node)| (id, node))
        .partition(|(_, node)| stacks.contains_key(&node.parent_id));
    edges.sort_unstable_by_key(|&(id, node)| (node.parent_id, id));
    roots.sort_unstable_by_key(|&(id, _)| id);
    // Each parent's run of children, found with one lookup: two binary searches per node
    // over a first flush's hundreds of thousands of edges missed the cache at every step
    // and were most of what writing a segment cost.
    let mut children: FastMap<SymbolId, (u32, u32)> = FastMap::default();
    children.reserve(edges.len());
    let mut start = 0u32;
    for run in edges.chunk_by(|a, b| a.1.parent_id == b.1.parent_id) {
        let end = start + run.len() as u32;
        children.insert(run[0].1.parent_id, (start, end));
        start = end;
    }
    let mut order = Vec::with_capacity(stacks.len());
    let mut todo: Vec<(SymbolId, StackNode, Option<u32>)> = roots
        .into_iter()
        .rev()
        .map(|(id, node)| (id, node, None))
        .collect();
    while let Some((id, node, parent_row)) = todo.pop() {
        let row = order.len() as u32;
        order.push(Placed { id, node, parent_row });
        if let Some(&(first, end)) = children.get(&id) {
            let run = edges[first as usize..end as usize].iter().rev();
            todo.extend(run.map(|&(child, node)| (child, node, Some(row))));
        }
    }
    // Content ids cannot form a cycle short of a hash collision; should one ever do, its
    // nodes are still written, by id, each naming its parent by row when that row came
    // before it and by id otherwise.
    if order.len() < stacks.len() {
        let placed: std::collections::HashSet<SymbolId> = order.iter().map(|p| p.id).collect();
        let mut rest: Vec<_> = stacks.iter().filter(|(id, _)| !placed.contains(id)).collect();
        rest.sort_unstable_by_key(|(id, _)| **id);
        let mut rows: FastMap<SymbolId, u32> = FastMap::default();
        for (&id, &node) in rest {
            let row = order.len() as u32;
            let parent_row = rows.get(&node.parent_id).copied();
            rows.insert(id, row);
            order.push(Placed { id, node, parent_row });
        }
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

    /// The table's rows as (up, external parent, location), for comparing tables.
    fn rows(table: &RecordBatch) -> Vec<(u32, Option<SymbolId>, SymbolId)> {
        let up = table.column(0).as_primitive::<UInt32Type>();
        let (parents, locations) = (
            table.column(1).as_fixed_size_binary(),
            table.column(2).as_fixed_size_binary(),
        );
        (0..table.num_rows())
            .map(|i| {
                let parent = (!parents.is_null(i)).then(|| id_at(parents, i));
                (up.value(i), parent, id_at(locations, i))
            })
            .collect()
    }

    /// The order as specified, walked plainly: roots by id, each node's children by id
    /// right after it, then any node no root reaches, by id.
    fn reference_rows(stacks: &IdMap<StackNode>) -> Vec<(u32, Option<SymbolId>, SymbolId)> {
        let mut ids: Vec<SymbolId> = stacks.keys().copied().collect();
        ids.sort();
        let mut order = Vec::new();
        fn visit(id: SymbolId, ids: &[SymbolId], stacks: &IdMap<StackNode>, order: &mut Vec<SymbolId>) {
            order.push(id);
            for &child in ids.iter().filter(|c| stacks[*c].parent_id == id) {
                visit(child, ids, stacks, order);
            }
        }
        for &id in ids
            .iter()
            .filter(|id| !stacks.contains_key(&stacks[*id].parent_id))
        {
            visit(id, &ids, stacks, &mut order);
        }
        order.extend(ids.iter().filter(|id| !order.contains(id)).collect::<Vec<_>>());
        order
            .iter()
            .enumerate()
            .map(|(i, id)| {
                let node = stacks[id];
                let before = order[..i].iter().position(|p| *p == node.parent_id);
                match before {
                    Some(row) => ((i - row) as u32, None, node.location_id),
                    None => (
                        0,
                        (!node.parent_id.is_zero()).then_some(node.parent_id),
                        node.location_id,
                    ),
                }
            })
            .collect()
    }

    #[test]
    fn rows_follow_the_specified_order_over_a_random_forest() {
        use rand::rngs::SmallRng;
        use rand::{Rng, SeedableRng};
        let mut rng = SmallRng::seed_from_u64(7);
        let mut batch = Batch::new("t");
        // Paths drawn from a few frames, so that prefixes are shared and nodes branch.
        for _ in 0..300 {
            let depth = rng.random_range(1..12);
            let path: Vec<SymbolId> = (0..depth).map(|_| id(rng.random_range(1..6))).collect();
            batch.add_stack(&path);
        }
        let mut stacks = batch.stacks.clone();
        assert_eq!(rows(&encode(&stacks).unwrap()), reference_rows(&stacks));
        // Without some nodes, as when an earlier object stored them: their children name
        // their parents by id.
        let dropped: Vec<SymbolId> = stacks.keys().copied().filter(|_| rng.random_bool(0.2)).collect();
        stacks.retain(|id, _| !dropped.contains(id));
        let table = encode(&stacks).unwrap();
        assert!(
            table.column(1).null_count() < table.num_rows(),
            "some parents are external"
        );
        assert_eq!(rows(&table), reference_rows(&stacks));
        assert_eq!(round_trip(&stacks), stacks);
    }

    #[test]
    fn a_cycle_is_still_written_whole() {
        // Only a hash collision could make one; the ids are made up for the purpose.
        let node = |parent: u8, location: u8| StackNode {
            parent_id: id(parent),
            location_id: id(location),
        };
        let stacks: IdMap<StackNode> = [(id(1), node(2, 9)), (id(2), node(1, 8)), (id(3), node(0, 7))]
            .into_iter()
            .collect();
        let table = encode(&stacks).unwrap();
        assert_eq!(table.num_rows(), 3);
        assert_eq!(rows(&table), reference_rows(&stacks));
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
