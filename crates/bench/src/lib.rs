//! Benchmarks of the Switchboard hub against NATS and against the floor (a
//! minimal relay between Unix socket connections), all driven by one harness
//! with the same payloads. `bench/run.sh` builds and runs it; `main.rs` is
//! the command line, [`plan`] the plan of workloads and runs, [`measure`]
//! the one loop each workload's measurement goes through.
//!
//! Fairness rules the code keeps: every system gets the same payload bytes,
//! the same number of senders, receivers and requests in flight, and the
//! same client-side CPU when `--pin` is given. The hub and the floor are
//! driven by a lean client (pre-built messages, batched writes, a reader
//! that counts and scans lines without building JSON values on the hot
//! path); NATS by `async-nats`, its official Rust client.

pub mod floor;
pub mod handoff;
pub mod lines;
pub mod measure;
pub mod messages;
pub mod plan;
pub mod process;
pub mod report;
pub mod stats;
pub mod stdio_relay;
pub mod systems;
pub mod workloads;
