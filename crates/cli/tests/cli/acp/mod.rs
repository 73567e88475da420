//! The ACP front end to end: `switchboard acp` child processes driven by the
//! official ACP client, against a live hub with a real tool provider and a
//! scripted OpenAI-compatible model server on loopback.
//!
//! One module per concern, one support module of its own (the hub itself
//! comes from `switchboard_testkit`).

mod support;

mod concurrency;
mod directories;
mod files;
mod jobs;
mod js;
mod mcp_servers;
mod model;
mod modes;
mod permissions;
mod requests;
mod resume;
mod settings;
mod store;
mod terminals;
