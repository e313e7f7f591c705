//! The FUSE mount's integration tests, in one test binary: a module for each
//! subject, and `common`, the helpers they share.

mod busy;
mod common;
mod mount;
mod stalled;

#[path = "../../../tests/support/own_process.rs"]
mod own_process;
