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
