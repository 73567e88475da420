//! Tools that drive a real Switchboard hub from outside, as separate
//! processes: `hub-fault-client` (an owner or a caller the fault-injection
//! tests can SIGKILL) and `switchboard-soak` (the load and soak driver of
//! `bench/soak.sh`).
//!
//! Nothing here is part of the product; `publish = false`.

pub mod connections;
pub mod growth;
pub mod procfs;
pub mod sampler;
pub mod soak;
pub mod target;
pub mod wire;
