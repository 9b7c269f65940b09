//! Parsed debug files kept between queries, least recently used dropped first once their
//! files' sizes add up to more than the budget.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

pub(crate) struct FileCache<T> {
    budget_bytes: usize,
    inner: Mutex<Inner<T>>,
}

struct Inner<T> {
    /// Key → (value, its weight in bytes, when it was last used).
    files: HashMap<String, (Arc<T>, usize, u64)>,
    bytes: usize,
    clock: u64,
}

impl<T> FileCache<T> {
    pub(super) fn new(budget_bytes: usize) -> FileCache<T> {
        FileCache {
            budget_bytes,
            inner: Mutex::new(Inner {
                files: HashMap::new(),
                bytes: 0,
                clock: 0,
            }),
        }
    }

    pub(super) fn get(&self, key: &str) -> Option<Arc<T>> {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.clock += 1;
        let now = inner.clock;
        let (file, _, used) = inner.files.get_mut(key)?;
        *used = now;
        Some(file.clone())
    }

    /// Keeps `file`, weighing `bytes`, unless it alone is over the budget; evicts others
    /// to make room. A query holding an evicted file keeps using it until it ends.
    pub(super) fn insert(&self, key: String, file: Arc<T>, bytes: usize) {
        if bytes > self.budget_bytes {
            return;
        }
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        inner.clock += 1;
        let now = inner.clock;
        inner.bytes += bytes;
        if let Some((_, old, _)) = inner.files.insert(key, (file, bytes, now)) {
            inner.bytes -= old;
        }
        while inner.bytes > self.budget_bytes {
            let Some(oldest) = inner
                .files
                .iter()
                .min_by_key(|(_, (_, _, used))| *used)
                .map(|(k, _)| k.clone())
            else {
                break;
            };
            if let Some((_, evicted, _)) = inner.files.remove(&oldest) {
                inner.bytes -= evicted;
            }
        }
    }

    /// Drops every key that starts with `prefix` (a tenant's files after a deletion).
    pub(super) fn remove_prefix(&self, prefix: &str) {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let keys: Vec<String> = inner
            .files
            .keys()
            .filter(|k| k.starts_with(prefix))
            .cloned()
            .collect();
        for key in keys {
            if let Some((_, bytes, _)) = inner.files.remove(&key) {
                inner.bytes -= bytes;
            }
        }
    }

    #[cfg(test)]
    fn bytes(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn least_recently_used_files_go_first() {
        let cache = FileCache::new(100);
        cache.insert("a".into(), Arc::new(1), 40);
        cache.insert("b".into(), Arc::new(2), 40);
        assert!(cache.get("a").is_some(), "a is now more recent than b");
        cache.insert("c".into(), Arc::new(3), 40);
        assert_eq!(cache.get("b"), None);
        assert_eq!(cache.get("a").as_deref(), Some(&1));
        assert_eq!(cache.get("c").as_deref(), Some(&3));
        assert_eq!(cache.bytes(), 80);
        cache.insert("huge".into(), Arc::new(4), 101);
        assert_eq!(cache.get("huge"), None, "a file over the budget is not kept");
        cache.insert("a".into(), Arc::new(5), 10);
        assert_eq!(cache.bytes(), 50, "a replaced entry gives its bytes back");
        cache.remove_prefix("a");
        assert_eq!((cache.get("a"), cache.bytes()), (None, 40));
    }
}
