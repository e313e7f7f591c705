//! The replica test of `replicas.rs` against moto, an S3 server we did not
//! write: two servers over one prefix of the bucket named by
//! `SKILLSTORE_MOTO_ENDPOINT`, readers always answered whole, writers on
//! both never leaving a line twice or a torn file. moto checks a
//! conditional write and then writes, so two patches of one version can
//! both succeed: a lost line is printed here, not failed (our S3 double
//! and real S3 decide such races atomically; `replicas.rs` requires no
//! loss there).
//!
//! Ignored by default; `scripts/test.sh` starts moto, sets the variable and
//! runs it with `--include-ignored` (without the variable it then fails).
//! The test runs alone in a process of its own (`in_own_process`): it sets
//! the `AWS_*` variables before any other thread runs.

use crate::own_process::in_own_process;
use crate::replicas_run;
use skillstore_backends::testkit::s3_server::{ACCESS_KEY, MOTO_ENV, REGION, SECRET_KEY, unique_name};

#[test]
#[ignore = "needs moto: set SKILLSTORE_MOTO_ENDPOINT and pass --include-ignored"]
fn replicas_share_a_moto_bucket_and_answer_whole_versions() {
    if !in_own_process() {
        return;
    }
    let url = std::env::var(MOTO_ENV).unwrap_or_else(|_| panic!("{MOTO_ENV} is not set"));
    let (endpoint, bucket) = url
        .trim_end_matches('/')
        .rsplit_once('/')
        .expect("http://host:port/bucket");
    for (key, value) in [
        ("AWS_ENDPOINT_URL", endpoint),
        ("AWS_ALLOW_HTTP", "true"),
        ("AWS_REGION", REGION),
        ("AWS_ACCESS_KEY_ID", ACCESS_KEY),
        ("AWS_SECRET_ACCESS_KEY", SECRET_KEY),
    ] {
        // SAFETY: no other thread of this process has started yet.
        unsafe { std::env::set_var(key, value) };
    }
    let location = format!("s3://{bucket}/{}", unique_name("replicas"));
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        // moto's conditional writes are a check and then a write.
        .block_on(replicas_run::run(location, false));
}
