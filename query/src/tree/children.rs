//! Child lists laid out once from parent links.

/// Every node's children in one array, in creation order: node `i`'s are
/// `list[start[i]..start[i + 1]]`.
#[derive(Debug)]
pub(crate) struct Children {
    start: Vec<usize>,
    list: Vec<usize>,
}

impl Children {
    /// From every node's parent, by index; node 0, the root, is its own.
    pub(crate) fn of(parents: impl ExactSizeIterator<Item = usize> + Clone) -> Children {
        let n = parents.len();
        let mut start = vec![0usize; n + 1];
        for parent in parents.clone().skip(1) {
            start[parent + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut fill = start.clone();
        let mut list = vec![0usize; n.saturating_sub(1)];
        for (child, parent) in parents.enumerate().skip(1) {
            list[fill[parent]] = child;
            fill[parent] += 1;
        }
        Children { start, list }
    }

    pub(crate) fn get(&self, id: usize) -> &[usize] {
        &self.list[self.start[id]..self.start[id + 1]]
    }

    pub(super) fn get_mut(&mut self, id: usize) -> &mut [usize] {
        &mut self.list[self.start[id]..self.start[id + 1]]
    }
}
