//! What several fuzz targets share: HTTP requests and answers read with
//! `httparse` (independently of the hub's hyper), and the rules the HTTP
//! port is held to, written out from the reference.

pub mod http;
