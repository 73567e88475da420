//! The bounds of `hub-protocol.md` section 8, keyed on the wire (in
//! `initialize.limits`, in `-32050` data, in the config file) by exactly the
//! names of the spec's table.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
/// Decoding tolerates unknown names (a newer hub may report more bounds);
/// the hub's config loader refuses them, where they can only be typos.
#[serde(rename_all = "camelCase")]
pub struct Limits {
    #[serde(default = "defaults::max_message_bytes")]
    pub max_message_bytes: u64,
    #[serde(default = "defaults::max_metadata_bytes")]
    pub max_metadata_bytes: u64,
    #[serde(default = "defaults::max_method_bytes")]
    pub max_method_bytes: u64,
    #[serde(default = "defaults::max_services_per_client")]
    pub max_services_per_client: u64,
    #[serde(default = "defaults::max_in_flight_per_client")]
    pub max_in_flight_per_client: u64,
    #[serde(default = "defaults::max_in_flight_per_service")]
    pub max_in_flight_per_service: u64,
    #[serde(default = "defaults::default_request_timeout_ms")]
    pub default_request_timeout_ms: u64,
    #[serde(default = "defaults::max_request_timeout_ms")]
    pub max_request_timeout_ms: u64,
    #[serde(default = "defaults::max_error_data_bytes")]
    pub max_error_data_bytes: u64,
    #[serde(default = "defaults::notify_shed_bytes")]
    pub notify_shed_bytes: u64,
    #[serde(default = "defaults::slow_consumer_bytes")]
    pub slow_consumer_bytes: u64,
    #[serde(default = "defaults::max_connections")]
    pub max_connections: u64,
}

/// The deepest nesting of a message the hub forwards. serde_json, the
/// reader of the Rust SDKs (this one and AHP's), refuses a 128th level by
/// default, so a forwarded message nests 127 levels at most: the hub refuses
/// (requests, registrations) or drops (notifications) anything deeper, never
/// forwarding what a receiver could not read. Not configurable: it is a
/// property of the receivers, not of the hub.
pub const MAX_FORWARDED_DEPTH: usize = 127;

/// The deepest a payload (`params` of `clientService/notify` and
/// `clientService/request`) may nest: it is forwarded two levels down
/// (`{"params":{"params":…}}`), as it arrived.
pub const MAX_PAYLOAD_DEPTH: usize = MAX_FORWARDED_DEPTH - 2;

/// The deepest service metadata may nest: the deepest place it is forwarded
/// is seven levels down, in `initialize`'s catalog snapshot
/// (`result.snapshots[].state.services[].metadata`).
pub const MAX_METADATA_DEPTH: usize = MAX_FORWARDED_DEPTH - 7;

/// The names of the limits, as they appear on the wire.
pub mod names {
    pub const MAX_MESSAGE_BYTES: &str = "maxMessageBytes";
    pub const MAX_METADATA_BYTES: &str = "maxMetadataBytes";
    pub const MAX_METHOD_BYTES: &str = "maxMethodBytes";
    pub const MAX_SERVICES_PER_CLIENT: &str = "maxServicesPerClient";
    pub const MAX_IN_FLIGHT_PER_CLIENT: &str = "maxInFlightPerClient";
    pub const MAX_IN_FLIGHT_PER_SERVICE: &str = "maxInFlightPerService";
    pub const DEFAULT_REQUEST_TIMEOUT_MS: &str = "defaultRequestTimeoutMs";
    pub const MAX_REQUEST_TIMEOUT_MS: &str = "maxRequestTimeoutMs";
    pub const MAX_ERROR_DATA_BYTES: &str = "maxErrorDataBytes";
    pub const NOTIFY_SHED_BYTES: &str = "notifyShedBytes";
    pub const SLOW_CONSUMER_BYTES: &str = "slowConsumerBytes";
    pub const MAX_CONNECTIONS: &str = "maxConnections";
}

mod defaults {
    pub fn max_message_bytes() -> u64 {
        16 * 1024 * 1024
    }
    pub fn max_metadata_bytes() -> u64 {
        64 * 1024
    }
    pub fn max_method_bytes() -> u64 {
        256
    }
    pub fn max_services_per_client() -> u64 {
        256
    }
    pub fn max_in_flight_per_client() -> u64 {
        1024
    }
    pub fn max_in_flight_per_service() -> u64 {
        4096
    }
    pub fn default_request_timeout_ms() -> u64 {
        60_000
    }
    pub fn max_request_timeout_ms() -> u64 {
        600_000
    }
    pub fn max_error_data_bytes() -> u64 {
        64 * 1024
    }
    pub fn notify_shed_bytes() -> u64 {
        8 * 1024 * 1024
    }
    pub fn slow_consumer_bytes() -> u64 {
        64 * 1024 * 1024
    }
    pub fn max_connections() -> u64 {
        4096
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_message_bytes: defaults::max_message_bytes(),
            max_metadata_bytes: defaults::max_metadata_bytes(),
            max_method_bytes: defaults::max_method_bytes(),
            max_services_per_client: defaults::max_services_per_client(),
            max_in_flight_per_client: defaults::max_in_flight_per_client(),
            max_in_flight_per_service: defaults::max_in_flight_per_service(),
            default_request_timeout_ms: defaults::default_request_timeout_ms(),
            max_request_timeout_ms: defaults::max_request_timeout_ms(),
            max_error_data_bytes: defaults::max_error_data_bytes(),
            notify_shed_bytes: defaults::notify_shed_bytes(),
            slow_consumer_bytes: defaults::slow_consumer_bytes(),
            max_connections: defaults::max_connections(),
        }
    }
}

/// A set of limits that cannot work together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LimitsError {
    #[error("{name} must be at least 1")]
    Zero { name: &'static str },
    #[error("{smaller} ({small}) must not exceed {larger} ({large})")]
    Order {
        smaller: &'static str,
        small: u64,
        larger: &'static str,
        large: u64,
    },
}

impl Limits {
    /// Every limit as `(wire name, value)`, in the spec's order.
    pub fn entries(&self) -> [(&'static str, u64); 12] {
        use names::*;
        [
            (MAX_MESSAGE_BYTES, self.max_message_bytes),
            (MAX_METADATA_BYTES, self.max_metadata_bytes),
            (MAX_METHOD_BYTES, self.max_method_bytes),
            (MAX_SERVICES_PER_CLIENT, self.max_services_per_client),
            (MAX_IN_FLIGHT_PER_CLIENT, self.max_in_flight_per_client),
            (MAX_IN_FLIGHT_PER_SERVICE, self.max_in_flight_per_service),
            (DEFAULT_REQUEST_TIMEOUT_MS, self.default_request_timeout_ms),
            (MAX_REQUEST_TIMEOUT_MS, self.max_request_timeout_ms),
            (MAX_ERROR_DATA_BYTES, self.max_error_data_bytes),
            (NOTIFY_SHED_BYTES, self.notify_shed_bytes),
            (SLOW_CONSUMER_BYTES, self.slow_consumer_bytes),
            (MAX_CONNECTIONS, self.max_connections),
        ]
    }

    /// Checks that every bound is usable and that ordered bounds are ordered.
    pub fn validate(&self) -> Result<(), LimitsError> {
        use names::*;
        for (name, value) in self.entries() {
            // A zero error-data bound is meaningful: it strips all data.
            if value == 0 && name != MAX_ERROR_DATA_BYTES {
                return Err(LimitsError::Zero { name });
            }
        }
        let ordered = [
            (
                DEFAULT_REQUEST_TIMEOUT_MS,
                self.default_request_timeout_ms,
                MAX_REQUEST_TIMEOUT_MS,
                self.max_request_timeout_ms,
            ),
            (
                NOTIFY_SHED_BYTES,
                self.notify_shed_bytes,
                SLOW_CONSUMER_BYTES,
                self.slow_consumer_bytes,
            ),
            (
                MAX_METADATA_BYTES,
                self.max_metadata_bytes,
                MAX_MESSAGE_BYTES,
                self.max_message_bytes,
            ),
            (
                MAX_MESSAGE_BYTES,
                self.max_message_bytes,
                SLOW_CONSUMER_BYTES,
                self.slow_consumer_bytes,
            ),
        ];
        for (smaller, small, larger, large) in ordered {
            if small > large {
                return Err(LimitsError::Order {
                    smaller,
                    small,
                    larger,
                    large,
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_spec_table() {
        let json = serde_json::to_value(Limits::default()).unwrap();
        assert_eq!(
            json,
            serde_json::json!({
                "maxMessageBytes": 16777216, "maxMetadataBytes": 65536, "maxMethodBytes": 256,
                "maxServicesPerClient": 256, "maxInFlightPerClient": 1024,
                "maxInFlightPerService": 4096, "defaultRequestTimeoutMs": 60000,
                "maxRequestTimeoutMs": 600000, "maxErrorDataBytes": 65536,
                "notifyShedBytes": 8388608, "slowConsumerBytes": 67108864, "maxConnections": 4096
            })
        );
        assert_eq!(Limits::default().validate(), Ok(()));
    }

    #[test]
    fn partial_config_keeps_other_defaults() {
        let limits: Limits = serde_json::from_str(r#"{"maxConnections": 3}"#).unwrap();
        assert_eq!(limits.max_connections, 3);
        assert_eq!(limits.max_method_bytes, 256);
    }

    #[test]
    fn inconsistent_limits_are_refused() {
        let limits = Limits {
            notify_shed_bytes: 10,
            slow_consumer_bytes: 5,
            ..Limits::default()
        };
        assert!(limits.validate().is_err());
        let limits = Limits {
            max_connections: 0,
            ..Limits::default()
        };
        assert_eq!(
            limits.validate().unwrap_err().to_string(),
            "maxConnections must be at least 1"
        );
    }
}
