//! The services the soak's clients currently own, so callers pick real
//! targets (and, after churn, sometimes stale ones, as real callers do).

use parking_lot::RwLock;

#[derive(Debug, Default)]
pub struct Directory {
    ids: RwLock<Vec<String>>,
}

impl Directory {
    pub fn add(&self, id: &str) {
        self.ids.write().push(id.to_owned());
    }

    pub fn remove(&self, id: &str) {
        let mut ids = self.ids.write();
        if let Some(at) = ids.iter().position(|known| known == id) {
            ids.swap_remove(at);
        }
    }

    pub fn pick(&self, rng: &mut fastrand::Rng) -> Option<String> {
        let ids = self.ids.read();
        if ids.is_empty() {
            return None;
        }
        Some(ids[rng.usize(..ids.len())].clone())
    }

    pub fn len(&self) -> usize {
        self.ids.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
