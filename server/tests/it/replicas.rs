//! Two servers over one S3 bucket of our in-process S3 server: the object
//! store is the shared state (the body is `replicas_run`; `replicas_moto.rs`
//! runs it against moto). A write through one is seen by the other after a
//! refresh; writers hammering one skill through both lose no update (the
//! conditional puts decide); readers running meanwhile always get a whole
//! answer of one version.
//!
//! The test runs alone in a process of its own (`with_s3_env`): it sets
//! the `AWS_*` variables before any other thread runs.

use crate::common::*;
use crate::replicas_run;

#[test]
fn replicas_share_the_bucket_and_lose_no_update() {
    // The server lives as long as the test: its bucket is a directory of it.
    with_s3_env(|s3| async move {
        replicas_run::run(format!("s3://{}/skills", s3.create_bucket()), true).await;
        drop(s3);
    });
}
