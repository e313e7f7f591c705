//! The integration tests of `skillstore-backends`, in one test binary: a
//! module for each subject.

mod conformance;
mod fs_guards;
mod git;
mod git_ssh;
mod isolation;
// These run against the in-process S3 server.
#[cfg(feature = "s3-server")]
mod messages;
#[cfg(feature = "s3-server")]
mod moto;
mod mount_and_memory;
#[cfg(feature = "s3-server")]
mod odd_keys;
mod read_only_conformance;

#[path = "../../../tests/support/own_process.rs"]
mod own_process;
