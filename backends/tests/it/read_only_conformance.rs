//! The read part of the conformance suite, for backends that cannot be
//! written: on a seeded memory backend (the reference) and on a discovery
//! endpoint served from a local HTTP server.

#![cfg(all(feature = "testkit", feature = "discovery"))]

mod memory {
    skillstore_backends::read_only_conformance_tests!(skillstore_backends::testkit::read_only::memory_seeded);
}

mod discovery {
    skillstore_backends::read_only_conformance_tests!(skillstore_backends::testkit::read_only::discovery_seeded);
}
