//! Answers for objects already read, bounded in bytes, least recently used
//! evicted first. An object id names immutable content, so a cached answer
//! never goes stale; the key also holds the repository so an object read
//! from one repository is never reported as present in another.

use std::sync::{Arc, Mutex, MutexGuard};

use gix::ObjectId;
use lru::LruCache;
use serde::Serialize;

/// Bookkeeping bytes counted per entry on top of its content.
const ENTRY_OVERHEAD: usize = 96;

/// One object as `getObjects` answers it.
#[derive(Debug)]
pub struct CachedObject {
    /// `blob`, `tree`, `commit` or `tag`.
    pub kind: &'static str,
    /// The object's size in bytes (before encoding).
    pub size: u64,
    /// The content, base64 (standard alphabet, padded).
    pub content_base64: String,
}

impl CachedObject {
    fn cost(&self) -> usize {
        self.content_base64.len() + ENTRY_OVERHEAD
    }
}

type Key = (usize, ObjectId);

/// The cache; its lock is held only for map operations, never while reading
/// a repository.
pub struct ObjectCache {
    budget: usize,
    state: Mutex<State>,
}

struct State {
    entries: LruCache<Key, Arc<CachedObject>>,
    /// Sum of `cost()` over `entries`; invariant: `bytes <= budget`.
    bytes: usize,
    hits: u64,
    misses: u64,
    evictions: u64,
}

#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CacheStats {
    pub entries: usize,
    pub bytes: usize,
    pub budget_bytes: usize,
    pub hits: u64,
    pub misses: u64,
    pub evictions: u64,
}

impl ObjectCache {
    pub fn new(budget: usize) -> Self {
        ObjectCache {
            budget,
            state: Mutex::new(State {
                entries: LruCache::unbounded(),
                bytes: 0,
                hits: 0,
                misses: 0,
                evictions: 0,
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // No code path panics while holding the lock; if one did, the map
        // is still consistent enough to serve from.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The cached answer for `id` in repository `repo`, marked most recently used.
    pub fn get(&self, repo: usize, id: ObjectId) -> Option<Arc<CachedObject>> {
        let mut state = self.state();
        let found = state.entries.get(&(repo, id)).cloned();
        match found {
            Some(_) => state.hits += 1,
            None => state.misses += 1,
        }
        found
    }

    /// Keeps `object`, evicting the least recently used answers until it
    /// fits. An object larger than the whole budget is not kept.
    pub fn insert(&self, repo: usize, id: ObjectId, object: Arc<CachedObject>) {
        let cost = object.cost();
        if cost > self.budget {
            return;
        }
        let mut state = self.state();
        if let Some(previous) = state.entries.pop(&(repo, id)) {
            state.bytes -= previous.cost();
        }
        while state.bytes + cost > self.budget {
            let Some((_, evicted)) = state.entries.pop_lru() else {
                break;
            };
            state.bytes -= evicted.cost();
            state.evictions += 1;
        }
        state.bytes += cost;
        state.entries.put((repo, id), object);
    }

    pub fn stats(&self) -> CacheStats {
        let state = self.state();
        CacheStats {
            entries: state.entries.len(),
            bytes: state.bytes,
            budget_bytes: self.budget,
            hits: state.hits,
            misses: state.misses,
            evictions: state.evictions,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(len: usize) -> Arc<CachedObject> {
        Arc::new(CachedObject {
            kind: "blob",
            size: len as u64,
            content_base64: "A".repeat(len),
        })
    }

    fn id(n: u8) -> ObjectId {
        ObjectId::from_bytes_or_panic(&[n; 20])
    }

    #[test]
    fn evicts_least_recently_used_to_stay_within_budget() {
        let cache = ObjectCache::new(3 * (100 + ENTRY_OVERHEAD));
        for n in 1..=3 {
            cache.insert(0, id(n), object(100));
        }
        assert!(
            cache.get(0, id(1)).is_some(),
            "1 becomes most recently used"
        );
        cache.insert(0, id(4), object(100));
        assert!(cache.get(0, id(2)).is_none(), "2 was least recently used");
        assert!(cache.get(0, id(1)).is_some());
        assert!(cache.get(0, id(3)).is_some());
        assert!(cache.get(0, id(4)).is_some());
        let stats = cache.stats();
        assert_eq!(stats.entries, 3);
        assert_eq!(stats.bytes, stats.budget_bytes, "exactly at the bound");
        assert_eq!(stats.evictions, 1);
    }

    #[test]
    fn an_object_over_the_whole_budget_is_not_kept() {
        let cache = ObjectCache::new(100 + ENTRY_OVERHEAD);
        cache.insert(0, id(1), object(100));
        cache.insert(0, id(2), object(101));
        assert!(cache.get(0, id(1)).is_some(), "nothing was evicted for it");
        assert!(cache.get(0, id(2)).is_none());
    }

    #[test]
    fn the_repository_is_part_of_the_key() {
        let cache = ObjectCache::new(10_000);
        cache.insert(0, id(1), object(10));
        assert!(cache.get(1, id(1)).is_none());
    }
}
