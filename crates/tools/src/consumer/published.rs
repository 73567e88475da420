//! The tables as the index last published them, and the signals around
//! them. The index task is the only writer; readers take an `Arc` (no lock
//! held while they use it) and may wait for a change of the part they show.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use tokio::sync::watch;

use super::surface::Surface;
use super::table::ToolTable;

/// How many times each part of the [`Surface`] changed: a front sends
/// `notifications/<kind>/list_changed` when its number moves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SurfaceRevisions {
    /// Resources or resource templates.
    pub resources: u64,
    pub prompts: u64,
    /// The version-2 providers serving (or their capabilities).
    pub providers: u64,
}

pub(super) struct Published {
    table: ArcSwap<ToolTable>,
    surface: ArcSwap<Surface>,
    revision: watch::Sender<u64>,
    surface_revisions: watch::Sender<SurfaceRevisions>,
    ready: watch::Sender<bool>,
    stale_lists_dropped: AtomicU64,
    lists_failed: AtomicU64,
    resource_collisions: AtomicU64,
}

impl Published {
    pub(super) fn new() -> Self {
        Published {
            table: ArcSwap::from_pointee(ToolTable::default()),
            surface: ArcSwap::from_pointee(Surface::default()),
            revision: watch::Sender::new(0),
            surface_revisions: watch::Sender::new(SurfaceRevisions::default()),
            ready: watch::Sender::new(false),
            stale_lists_dropped: AtomicU64::new(0),
            lists_failed: AtomicU64::new(0),
            resource_collisions: AtomicU64::new(0),
        }
    }

    pub(super) fn table(&self) -> Arc<ToolTable> {
        self.table.load_full()
    }

    pub(super) fn surface(&self) -> Arc<Surface> {
        self.surface.load_full()
    }

    pub(super) fn changes(&self) -> watch::Receiver<u64> {
        self.revision.subscribe()
    }

    pub(super) fn surface_changes(&self) -> watch::Receiver<SurfaceRevisions> {
        self.surface_revisions.subscribe()
    }

    pub(super) fn ready(&self) -> watch::Receiver<bool> {
        self.ready.subscribe()
    }

    pub(super) fn stale_lists_dropped(&self) -> u64 {
        self.stale_lists_dropped.load(Ordering::Relaxed)
    }

    pub(super) fn lists_failed(&self) -> u64 {
        self.lists_failed.load(Ordering::Relaxed)
    }

    pub(super) fn resource_collisions(&self) -> u64 {
        self.resource_collisions.load(Ordering::Relaxed)
    }

    /// Swaps `table` in and signals a change, unless it equals the current one.
    pub(super) fn publish(&self, table: ToolTable) {
        if **self.table.load() == table {
            return;
        }
        tracing::debug!(tools = table.len(), "tool table updated");
        self.table.store(Arc::new(table));
        self.revision.send_modify(|revision| *revision += 1);
    }

    /// Swaps `surface` in and moves the revision of each part that differs.
    pub(super) fn publish_surface(&self, surface: Surface) {
        let current = self.surface.load();
        let resources = surface.resources_differ(&current);
        let prompts = surface.prompts_differ(&current);
        let providers = surface.providers_differ(&current);
        if !(resources || prompts || providers) {
            return;
        }
        tracing::debug!(
            resources = surface.resources().len(),
            templates = surface.templates().len(),
            prompts = surface.prompts().count(),
            providers = surface.providers().len(),
            "surface updated"
        );
        self.surface.store(Arc::new(surface));
        self.surface_revisions.send_modify(|revisions| {
            revisions.resources += u64::from(resources);
            revisions.prompts += u64::from(prompts);
            revisions.providers += u64::from(providers);
        });
    }

    pub(super) fn set_ready(&self) {
        self.ready
            .send_if_modified(|ready| !std::mem::replace(ready, true));
    }

    pub(super) fn count_stale_list(&self) {
        self.stale_lists_dropped.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count_failed_list(&self) {
        self.lists_failed.fetch_add(1, Ordering::Relaxed);
    }

    pub(super) fn count_resource_collision(&self) {
        self.resource_collisions.fetch_add(1, Ordering::Relaxed);
    }
}
