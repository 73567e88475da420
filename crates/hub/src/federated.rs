//! What the hub knows of the federation it is part of (the
//! `switchboard-federation` crate makes it): a name and a part of
//! `/metrics`. Everything else of a federation reaches the hub through
//! `link.rs`. Imports nothing of the hub, so any file may name it.

use std::sync::Arc;

/// The hub's name in the fabric and the figures `/metrics` adds.
#[derive(Debug, Clone)]
pub struct Federated {
    pub name: String,
    pub metrics: Arc<dyn FederationMetrics>,
}

/// The federation's part of `/metrics`.
pub trait FederationMetrics: std::fmt::Debug + Send + Sync {
    /// Appends Prometheus text (format 0.0.4) to `out`.
    fn render_metrics(&self, out: &mut String);
}
