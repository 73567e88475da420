//! The tool-provider SDK's integration tests, linked into one test binary: one link instead of one per
//! file keeps the release test build (CI) short. Each module is one
//! former test file; `support` is shared by all of them.

mod support;

mod consumer;
mod fence;
mod provider;
mod version2;
