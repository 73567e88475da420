//! The ACP front end to end: `switchboard acp` child processes driven by the
//! official ACP client, against a live hub with a real tool provider and a
//! scripted OpenAI-compatible model server on loopback.
//!
//! These tests live in the cli crate because they run the `switchboard`
//! binary (`CARGO_BIN_EXE_switchboard` is only set for this package's
//! tests). One module per concern, one support module of its own.

mod support;

mod concurrency;
mod jobs;
mod model;
mod permissions;
mod requests;
mod store;
