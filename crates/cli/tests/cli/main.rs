//! The `switchboard` binary's integration tests, linked into one test
//! binary: one link instead of one per file keeps the release test build
//! (CI) short. Each module is one former test file (`acp` a directory of
//! them); `support` is shared by all of them.

mod support;

mod acp;
mod cli_commands;
mod dashboard;
mod faults;
mod federation;
mod mcp_clients;
mod mcp_gateway;
mod mcp_http;
mod mcp_oauth;
mod mcp_remote;
mod modules;
mod newcomer;
mod process;
mod provide_mcp_fence;
mod provide_mcp_v2;
mod remote;
mod secrets_at_rest;
mod security;
mod stderr;
