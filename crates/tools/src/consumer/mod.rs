//! The consumer side of tool calls: what the MCP gateway (`switchboard
//! mcp`) and the ACP front (`switchboard acp`) share to offer and call the
//! tools of the hub's tool providers.
//!
//! - [`HubTools`] (`hub.rs`): one hub connection per consumer, reached and
//!   kept with one backoff loop; the catalog followed by one index task
//!   (`index.rs`) that lists every `tool-provider` service's tools
//!   (`tools/list`, bounded by [`LIST_TIMEOUT`]), drops stale answers, and
//!   publishes an immutable [`ToolTable`] with a change signal and a
//!   readiness signal;
//! - [`naming`]: the one naming rule (`<namespace>__<tool>`, what MCP hosts
//!   see) and its model-safe form for model APIs; [`ToolTable`] maps both
//!   ways and settles contested names ([`TableBuilder`]: the earliest claim
//!   wins);
//! - [`ExposedTool::call`] (`tool.rs`, `call.rs`, and `backend.rs` for a
//!   hub provider): the `ToolCallRequest`, one timeout
//!   policy ([`call_timeout`]), cancellation by dropping the future, one
//!   reading of failures ([`CallError`]); a call that finds its listing stale
//!   has the provider listed again.
//!
//! - [`Profile`] (`profile.rs`): a `[profiles.NAME]` of the config file,
//!   which of the exposed tools and prompts a consumer shows and under
//!   which names.
//!
//! Tools of a source other than the hub plug in through [`ToolBackend`]:
//! list them as [`ListedTool`]s, wrap them in [`ExposedTool`]s under a
//! namespace of their own, and add them to a [`TableBuilder`] after the
//! hub's table ([`TableBuilder::include`]): they are then named, offered and
//! called exactly as hub tools are, and can never take a hub tool's name.

mod backend;
mod call;
mod callback;
mod error;
mod hub;
mod index;
mod listing;
pub mod naming;
mod profile;
mod providers;
mod published;
mod requests;
mod session;
mod surface;
mod table;
mod tasks;
mod template;
mod tool;

pub use backend::{HubProvider, ProviderIdentity};
pub use call::{call_timeout, fresh_call_key, CallError, LIST_TIMEOUT};
pub use callback::{CallGuard, CallSink, CallbackStats, Callbacks, LogLevel, NOTIFY_BOUND};
pub use hub::{ConsumerOptions, ConsumerStats, HubTools};
pub use listing::{ListKind, ListedItem, Listing};
pub use profile::{Profile, ProfileError};
pub use providers::provider_namespace;
pub use published::SurfaceRevisions;
pub use session::{ConsumerSession, RequestContext, SurfaceError};
pub use surface::{
    ExposedPrompt, ExposedResource, ExposedTemplate, ServingProvider, Surface, SurfaceConflict,
};
pub use table::{Conflict, TableBuilder, ToolTable};
pub use tasks::{MAX_TASKS, MAX_TASK_LIFETIME};
pub use template::UriTemplate;
pub use tool::{ExposedTool, Invocation, ListedTool, ToolBackend};
