//! Log levels: one per session, one per provider. A provider keeps one
//! level per callback service (so per consumer), so it is told the most
//! verbose level any session asked for, and each session gets the messages
//! of no call at or above its own level.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use switchboard_protocol::Principal;

use crate::consumer::backend::ProviderIdentity;

/// MCP's `LoggingLevel`, least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogLevel {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

impl LogLevel {
    pub fn parse(text: &str) -> Option<LogLevel> {
        serde_json::from_value(serde_json::Value::String(text.to_owned())).ok()
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Debug => "debug",
            LogLevel::Info => "info",
            LogLevel::Notice => "notice",
            LogLevel::Warning => "warning",
            LogLevel::Error => "error",
            LogLevel::Critical => "critical",
            LogLevel::Alert => "alert",
            LogLevel::Emergency => "emergency",
        }
    }
}

#[derive(Default)]
pub(super) struct Levels {
    by_session: HashMap<u64, LogLevel>,
    /// What each provider was told, by service id.
    told: HashMap<String, (ProviderIdentity, LogLevel)>,
}

impl Levels {
    /// The most verbose level any session asked for.
    fn wanted(&self) -> Option<LogLevel> {
        self.by_session.values().min().copied()
    }

    pub(super) fn set(&mut self, session: u64, level: LogLevel) -> LogLevel {
        self.by_session.insert(session, level);
        self.wanted().unwrap_or(level)
    }

    pub(super) fn forget(&mut self, session: u64) {
        self.by_session.remove(&session);
    }

    pub(super) fn sent(&mut self, provider: &ProviderIdentity, level: LogLevel) {
        self.told
            .insert(provider.service_id.clone(), (provider.clone(), level));
    }

    /// The level `provider` should have, and whether it was told it already.
    pub(super) fn wanted_by(&self, provider: &ProviderIdentity) -> Option<(LogLevel, bool)> {
        let wanted = self.wanted()?;
        let told = self
            .told
            .get(&provider.service_id)
            .is_some_and(|(identity, level)| identity == provider && *level == wanted);
        Some((wanted, told))
    }

    /// Whether a provider of `principal` was told a level (its log
    /// messages of no call are expected then).
    pub(super) fn told_a_provider_of(&self, principal: &Principal) -> bool {
        self.told
            .values()
            .any(|(identity, _)| identity.principal == *principal)
    }

    /// The sessions that want a message at `level`.
    pub(super) fn sessions_for(&self, level: LogLevel) -> Vec<u64> {
        self.by_session
            .iter()
            .filter(|(_, wanted)| **wanted <= level)
            .map(|(session, _)| *session)
            .collect()
    }
}
