//! What several fuzz targets share: HTTP requests and answers read with
//! `httparse` (independently of the hub's hyper), and the rules the HTTP
//! port is held to, written out from the reference (`http`); a hub with a
//! tool provider for the MCP targets (`mcp`).

pub mod http;
pub mod mcp;
