//! A log filter for the gateway: rmcp writes a WARN line (`response error`)
//! for every error answer a server sends, including an unknown tool, which
//! is an ordinary client mistake. The gateway logs its own answers at the
//! level they deserve, so that line is left out; every other rmcp line
//! passes.

use std::fmt;

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata};
use tracing_subscriber::layer::{Context, Filter};

/// rmcp's message for each error answer it sends.
const RMCP_ERROR_ANSWER: &str = "response error";

/// Drops rmcp's WARN line for each error answer; see the module docs.
#[derive(Debug, Clone, Copy, Default)]
pub struct GatewayLogFilter;

impl<S> Filter<S> for GatewayLogFilter {
    fn enabled(&self, _metadata: &Metadata<'_>, _context: &Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &Event<'_>, _context: &Context<'_, S>) -> bool {
        let metadata = event.metadata();
        if *metadata.level() != Level::WARN || !metadata.target().starts_with("rmcp") {
            return true;
        }
        let mut message = MessageIs {
            wanted: RMCP_ERROR_ANSWER,
            found: false,
        };
        event.record(&mut message);
        !message.found
    }
}

struct MessageIs {
    wanted: &'static str,
    found: bool,
}

impl Visit for MessageIs {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.found = value == self.wanted;
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if field.name() == "message" {
            self.found = format!("{value:?}") == self.wanted;
        }
    }
}
