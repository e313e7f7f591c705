//! The conformance suite, run against every backend of the matrix declared
//! in `testkit`.

skillstore_backends::conformance_matrix!();
