//! The ACP front end to end: `switchboard acp` child processes driven by the
//! official ACP client, against a live hub with a real tool provider and a
//! scripted OpenAI-compatible model server on loopback.
//!
//! One module per concern, one support module of its own (the hub itself
//! comes from `switchboard_testkit`).

mod support;

mod concurrency;
mod files;
mod jobs;
mod mcp_servers;
mod model;
mod modes;
mod permissions;
mod requests;
mod store;
mod terminals;
