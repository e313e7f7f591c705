//! The conformance suite against a second S3 implementation, moto.
//!
//! Ignored by default; `.ci/run` starts `moto_server`, sets
//! `SKILLSTORE_MOTO_ENDPOINT=http://127.0.0.1:PORT/BUCKET` and runs these
//! with `--include-ignored`. Run that way without the variable, every case
//! fails rather than passing untested.

mod s3_moto {
    skillstore_backends::conformance_tests!(
        #[ignore = "needs moto: set SKILLSTORE_MOTO_ENDPOINT and pass --include-ignored"]
        skillstore_backends::testkit::s3_server::moto_fixture
    );
}

/// Under CI the moto endpoint must be present: its absence fails the run
/// instead of leaving the S3 cases unexercised.
#[test]
fn s3_moto_endpoint_is_set_under_ci() {
    let var = skillstore_backends::testkit::s3_server::MOTO_ENV;
    if std::env::var_os("CI").is_some() {
        assert!(
            std::env::var_os(var).is_some(),
            "CI is set but {var} is not: the moto conformance run would not happen"
        );
    }
}
