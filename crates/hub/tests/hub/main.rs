//! The hub's integration tests, linked into one test binary: one link instead of one per
//! file keeps the release test build (CI) short. Each module is one
//! former test file; `support` is shared by all of them.

mod support;

mod ahp;
mod authorization;
mod callbacks;
mod dashboard;
mod dashboard_forgery;
mod end_to_end;
mod in_process;
mod lifecycle;
mod limits;
mod malformed;
mod modules;
mod notifications;
mod overload;
mod remote_listener;
mod requests;
mod security;
mod services_catalog;
mod websocket;
mod ws_idle;
