//! What the log says of the NATS connection.
//!
//! async-nats reports every failed connection attempt as an event: several
//! a second at first, then one every 4 s, for as long as NATS is away.
//! Logging each buried the log (`client error: nats: IO error`, four times a
//! second). So each change of state is logged once (NATS lost or not
//! reachable: warn; connected again: info), and what repeats while a state
//! lasts (failed attempts, server errors, messages dropped for a slow
//! subscription) at most once a minute, with the count of what was left
//! out. [`ConnectionLog::see`] decides, and is pure (the time is given), so
//! the tests below hold the rule; [`Say::log`] writes the line.
//!
//! The client's own line for each event (target `async_nats`, at info) is
//! kept out by the binary's log filter ([`crate::NATS_CLIENT_LOG_DIRECTIVE`]).

use std::time::{Duration, Instant};

use async_nats::Event;

/// The least time between two lines about the same lasting state.
pub const REPEAT_EVERY: Duration = Duration::from_secs(60);

/// At most one line per [`REPEAT_EVERY`] for something that repeats.
#[derive(Debug, Default)]
struct Throttle {
    /// When the last line was written.
    said_at: Option<Instant>,
    /// Occurrences since then that were not.
    left_out: u64,
}

impl Throttle {
    /// `Some(left_out)` when a line is due at `now` (and counts it as
    /// written); `None` when this occurrence is left out.
    fn due(&mut self, now: Instant) -> Option<u64> {
        match self.said_at {
            Some(at) if now.saturating_duration_since(at) < REPEAT_EVERY => {
                self.left_out += 1;
                None
            }
            _ => {
                self.said_at = Some(now);
                Some(std::mem::take(&mut self.left_out))
            }
        }
    }
}

/// One line of the log, as [`ConnectionLog::see`] decided it.
#[derive(Debug, PartialEq, Eq)]
pub enum Say {
    /// Connected (again), info; `failed`: the attempts that failed before.
    Connected { failed: u64 },
    /// The connection was lost, warn.
    Lost,
    /// The first failed attempt while not connected (at start, or after
    /// the connection was up), warn.
    Unreachable { error: String },
    /// Still failing, warn, at most once a minute: `failed` attempts since
    /// the connection was up, `left_out` of them not logged since the last
    /// line.
    StillUnreachable {
        error: String,
        failed: u64,
        left_out: u64,
    },
    /// An error the server sent (a permissions violation, …), warn, at
    /// most once a minute.
    ServerError { error: String, left_out: u64 },
    /// The client dropped messages of a subscription that fell behind,
    /// warn, at most once a minute.
    SlowConsumer { left_out: u64 },
    /// The server is going away (lame duck mode), info.
    LameDuck,
}

impl Say {
    /// Writes the line; `nats` is the server's URL without its secrets.
    pub fn log(&self, nats: &str) {
        match self {
            Say::Connected { failed: 0 } => tracing::info!(nats = %nats, "NATS connected"),
            Say::Connected { failed } => {
                tracing::info!(nats = %nats, failed_attempts = failed, "NATS connected")
            }
            Say::Lost => tracing::warn!(nats = %nats, "NATS connection lost; reconnecting"),
            Say::Unreachable { error } => {
                tracing::warn!(nats = %nats, %error, "NATS is not reachable; trying again")
            }
            Say::StillUnreachable {
                error,
                failed,
                left_out,
            } => tracing::warn!(
                nats = %nats,
                %error,
                failed_attempts = failed,
                not_logged = left_out,
                "NATS is still not reachable; trying again"
            ),
            Say::ServerError { error, left_out } => {
                tracing::warn!(nats = %nats, %error, not_logged = left_out, "NATS server error")
            }
            Say::SlowConsumer { left_out } => tracing::warn!(
                nats = %nats,
                not_logged = left_out,
                "NATS dropped messages of a subscription that fell behind"
            ),
            Say::LameDuck => {
                tracing::info!(nats = %nats, "the NATS server is going away (lame duck mode)")
            }
        }
    }
}

/// The connection's state as the log last told it, and the repeats left
/// out since. One per hub, shared by the clients `join::prepare` makes.
#[derive(Debug, Default)]
pub struct ConnectionLog {
    /// `Some(true)`: connected; `Some(false)`: not; `None`: nothing yet.
    up: Option<bool>,
    /// Attempts that failed since the connection was last up.
    failed: u64,
    /// The lines while not connected.
    down: Throttle,
    server_errors: Throttle,
    slow_consumers: Throttle,
}

impl ConnectionLog {
    /// What to log of `event`, seen at `now`; `None`: nothing.
    pub fn see(&mut self, event: &Event, now: Instant) -> Option<Say> {
        match event {
            Event::Connected => {
                let failed = std::mem::take(&mut self.failed);
                self.down = Throttle::default();
                (self.up.replace(true) != Some(true)).then_some(Say::Connected { failed })
            }
            Event::Disconnected => {
                if self.up.replace(false) == Some(false) {
                    return None;
                }
                self.down = Throttle::default();
                self.down.due(now);
                Some(Say::Lost)
            }
            Event::ClientError(error) => self.failed(error.to_string(), now),
            Event::ServerError(error) => {
                self.server_errors
                    .due(now)
                    .map(|left_out| Say::ServerError {
                        error: error.to_string(),
                        left_out,
                    })
            }
            Event::SlowConsumer(_) => self
                .slow_consumers
                .due(now)
                .map(|left_out| Say::SlowConsumer { left_out }),
            Event::LameDuckMode => Some(Say::LameDuck),
            Event::Draining | Event::Closed => None,
        }
    }

    /// An attempt to connect failed with `error`: the first while not
    /// connected is a change of state, the next ones repeat it.
    pub fn failed(&mut self, error: String, now: Instant) -> Option<Say> {
        self.failed += 1;
        if self.up.replace(false) != Some(false) {
            self.down = Throttle::default();
            self.down.due(now);
            return Some(Say::Unreachable { error });
        }
        self.down.due(now).map(|left_out| Say::StillUnreachable {
            error,
            failed: self.failed,
            left_out,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use async_nats::ClientError;

    fn io_error() -> Event {
        Event::ClientError(ClientError::Other("IO error".into()))
    }

    /// Every `Say` of `events`, one each `step` from `start`.
    fn said(log: &mut ConnectionLog, start: Instant, step: Duration, events: &[Event]) -> Vec<Say> {
        let mut now = start;
        let mut said = Vec::new();
        for event in events {
            said.extend(log.see(event, now));
            now += step;
        }
        said
    }

    #[test]
    fn nats_away_from_the_start_is_said_once_then_once_a_minute_with_the_count() {
        let mut log = ConnectionLog::default();
        let start = Instant::now();
        // `join::prepare`'s first attempt.
        assert_eq!(
            log.failed("connection refused".into(), start),
            Some(Say::Unreachable {
                error: "connection refused".into()
            })
        );
        // Four attempts a second for a minute: nothing more...
        let quarter = Duration::from_millis(250);
        let minute = vec![io_error(); 239];
        assert_eq!(said(&mut log, start + quarter, quarter, &minute), vec![]);
        // ...until a minute has passed: one line, with what it left out.
        let said = log.see(&io_error(), start + REPEAT_EVERY);
        assert_eq!(
            said,
            Some(Say::StillUnreachable {
                error: "nats: IO error".into(),
                failed: 241,
                left_out: 239,
            })
        );
        assert_eq!(log.see(&io_error(), start + REPEAT_EVERY + quarter), None);
        // NATS comes: said once, with the attempts that failed.
        assert_eq!(
            log.see(&Event::Connected, start + REPEAT_EVERY * 2),
            Some(Say::Connected { failed: 242 })
        );
        assert_eq!(log.see(&Event::Connected, start + REPEAT_EVERY * 2), None);
    }

    #[test]
    fn a_lost_connection_is_one_warning_and_its_retries_are_repeats() {
        let mut log = ConnectionLog::default();
        let start = Instant::now();
        let second = Duration::from_secs(1);
        let said = said(
            &mut log,
            start,
            second,
            &[
                Event::Connected,
                Event::Disconnected,
                io_error(),
                io_error(),
                Event::Disconnected,
                io_error(),
                Event::Connected,
                // Lost again: a new state, said at once.
                Event::Disconnected,
                io_error(),
                Event::Connected,
            ],
        );
        assert_eq!(
            said,
            vec![
                Say::Connected { failed: 0 },
                Say::Lost,
                Say::Connected { failed: 3 },
                Say::Lost,
                Say::Connected { failed: 1 },
            ]
        );
    }

    #[test]
    fn server_errors_and_slow_consumers_repeat_at_most_once_a_minute() {
        let mut log = ConnectionLog::default();
        let start = Instant::now();
        let violation = || {
            Event::ServerError(async_nats::ServerError::Other(
                "Permissions Violation".into(),
            ))
        };
        let tenth = Duration::from_millis(100);
        let events: Vec<Event> = (0..20)
            .flat_map(|_| [violation(), Event::SlowConsumer(7)])
            .collect();
        let said = said(&mut log, start, tenth, &events);
        assert_eq!(
            said,
            vec![
                Say::ServerError {
                    error: "nats: Permissions Violation".into(),
                    left_out: 0
                },
                Say::SlowConsumer { left_out: 0 },
            ]
        );
        assert_eq!(
            log.see(&violation(), start + REPEAT_EVERY),
            Some(Say::ServerError {
                error: "nats: Permissions Violation".into(),
                left_out: 19
            })
        );
    }
}
