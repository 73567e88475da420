//! Who listens to what the hosted server says on its own: the resource
//! subscriptions (URI → callback services) and the logging level of each
//! callback service. The server itself is subscribed to a URI while anyone
//! is, and logs at the most verbose level anyone asked for.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// MCP's logging levels, least severe first.
pub(crate) const LEVELS: &[&str] = &[
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// A level's place in [`LEVELS`]; `None` for a word that is no level.
pub(crate) fn severity(level: &str) -> Option<usize> {
    LEVELS.iter().position(|known| *known == level)
}

#[derive(Default)]
pub(crate) struct Listeners {
    subscriptions: BTreeMap<String, BTreeSet<String>>,
    /// Callback service → the severity it asked for.
    levels: HashMap<String, usize>,
    /// The level the server was last asked to log at.
    server_level: Option<usize>,
}

impl Listeners {
    /// Adds `service` to `uri`'s subscribers; whether it is the first (the
    /// server must be subscribed).
    pub(crate) fn subscribe(&mut self, uri: &str, service: &str) -> bool {
        let subscribers = self.subscriptions.entry(uri.to_owned()).or_default();
        let first = subscribers.is_empty();
        subscribers.insert(service.to_owned());
        first
    }

    /// Removes `service` from `uri`'s subscribers; whether it was the last
    /// (the server may be unsubscribed).
    pub(crate) fn unsubscribe(&mut self, uri: &str, service: &str) -> bool {
        let Some(subscribers) = self.subscriptions.get_mut(uri) else {
            return false;
        };
        let removed = subscribers.remove(service);
        if subscribers.is_empty() {
            self.subscriptions.remove(uri);
            return removed;
        }
        false
    }

    pub(crate) fn subscribers(&self, uri: &str) -> Vec<String> {
        self.subscriptions
            .get(uri)
            .map(|subscribers| subscribers.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Every URI someone is subscribed to (after a restart, the new server
    /// is subscribed to each again).
    pub(crate) fn subscribed_uris(&self) -> Vec<String> {
        self.subscriptions.keys().cloned().collect()
    }

    /// `service` logs at `severity` from now on; the level the server must
    /// be asked for, when it changes.
    pub(crate) fn set_level(&mut self, service: &str, severity: usize) -> Option<&'static str> {
        self.levels.insert(service.to_owned(), severity);
        self.server_level_change()
    }

    /// The level of the server, when it must change: the most verbose any
    /// service asked for. With nobody left it stays as it is (MCP has no
    /// "stop logging"); its messages then reach nobody.
    fn server_level_change(&mut self) -> Option<&'static str> {
        let wanted = self.levels.values().min().copied()?;
        if self.server_level == Some(wanted) {
            return None;
        }
        self.server_level = Some(wanted);
        Some(LEVELS[wanted])
    }

    /// The level the server was asked for (set again after a restart).
    pub(crate) fn server_level(&self) -> Option<&'static str> {
        self.server_level.map(|severity| LEVELS[severity])
    }

    /// The severity `service` asked for, if it set one.
    pub(crate) fn level_of(&self, service: &str) -> Option<usize> {
        self.levels.get(service).copied()
    }

    /// The services that take a message of `severity` that belongs to no call.
    pub(crate) fn log_listeners(&self, severity: usize) -> Vec<String> {
        let mut listeners: Vec<String> = self
            .levels
            .iter()
            .filter(|(_, wanted)| **wanted <= severity)
            .map(|(service, _)| service.clone())
            .collect();
        listeners.sort();
        listeners
    }

    /// Forgets a service that is gone: the URIs now without subscribers
    /// (to unsubscribe the server from) and the server's new level, if it
    /// changes.
    pub(crate) fn remove_service(&mut self, service: &str) -> (Vec<String>, Option<&'static str>) {
        let mut emptied = Vec::new();
        self.subscriptions.retain(|uri, subscribers| {
            if subscribers.remove(service) && subscribers.is_empty() {
                emptied.push(uri.clone());
            }
            !subscribers.is_empty()
        });
        let level = match self.levels.remove(service) {
            Some(_) => self.server_level_change(),
            None => None,
        };
        (emptied, level)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_is_subscribed_while_anyone_is() {
        let mut listeners = Listeners::default();
        assert!(listeners.subscribe("a://x", "svc-1"));
        assert!(!listeners.subscribe("a://x", "svc-2"));
        assert_eq!(listeners.subscribers("a://x"), ["svc-1", "svc-2"]);
        assert!(!listeners.unsubscribe("a://x", "svc-1"));
        assert!(!listeners.unsubscribe("a://x", "svc-9"));
        assert!(listeners.unsubscribe("a://x", "svc-2"));
        assert!(listeners.subscribers("a://x").is_empty());
    }

    #[test]
    fn the_server_logs_at_the_most_verbose_level_asked() {
        let mut listeners = Listeners::default();
        assert_eq!(
            listeners.set_level("svc-1", severity("warning").unwrap()),
            Some("warning")
        );
        assert_eq!(
            listeners.set_level("svc-2", severity("debug").unwrap()),
            Some("debug")
        );
        assert_eq!(
            listeners.set_level("svc-1", severity("error").unwrap()),
            None
        );
        assert_eq!(
            listeners.log_listeners(severity("info").unwrap()),
            ["svc-2"]
        );
        assert_eq!(
            listeners.log_listeners(severity("error").unwrap()),
            ["svc-1", "svc-2"]
        );
        let (emptied, level) = listeners.remove_service("svc-2");
        assert!(emptied.is_empty());
        assert_eq!(level, Some("error"));
        assert_eq!(listeners.server_level(), Some("error"));
    }

    #[test]
    fn a_service_that_goes_leaves_its_subscriptions() {
        let mut listeners = Listeners::default();
        listeners.subscribe("a://x", "svc-1");
        listeners.subscribe("a://y", "svc-1");
        listeners.subscribe("a://y", "svc-2");
        let (emptied, level) = listeners.remove_service("svc-1");
        assert_eq!(emptied, ["a://x"]);
        assert_eq!(level, None);
        assert_eq!(listeners.subscribed_uris(), ["a://y"]);
    }
}
