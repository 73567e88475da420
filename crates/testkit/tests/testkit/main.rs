//! The test kit's integration tests, linked into one test binary: one link instead of one per
//! file keeps the release test build (CI) short. Each module is one
//! former test file; `support` is shared by all of them.

mod architecture_map;
mod docs_links;
mod fault_client;
mod mcp_test_server;
mod soak;
