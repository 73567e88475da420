//! The MCP gateway in process (`switchboard_mcp::Gateway`), on a real hub,
//! against version-2 providers written with the SDK in the test and MCP
//! clients on pipes: one test binary (one link in CI). Each module is one
//! concern; `support` is shared by all of them.

mod support;

mod callbacks;
mod fast;
mod profiles;
mod surface;
mod tool_search;
mod versions;
