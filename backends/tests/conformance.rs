//! The conformance suite, run against every backend.

mod memory {
    skillstore_backends::conformance_tests!(skillstore_backends::testkit::memory_fixture);
}

mod fs {
    skillstore_backends::conformance_tests!(skillstore_backends::testkit::fs_fixture);
}

mod object_store {
    skillstore_backends::conformance_tests!(skillstore_backends::testkit::object_store_memory_fixture);
}

mod s3 {
    skillstore_backends::conformance_tests!(skillstore_backends::testkit::s3_server::s3_fixture);
}

mod mount {
    skillstore_backends::conformance_tests!(skillstore_backends::testkit::mount_fixture);
}
