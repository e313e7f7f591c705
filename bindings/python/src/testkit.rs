//! Test helpers (feature `testkit`): the hostile-path corpus and an
//! in-process S3 server, so Python tests use the same corpus and server as
//! the Rust tests.

use pyo3::prelude::*;
use skillstore_backends::testkit::{hostile, s3_server::S3TestServer};

/// Every path string the storage layer must refuse, then valid look-alike
/// paths that must lead nowhere but their literal name.
#[pyfunction]
fn hostile_paths() -> (Vec<String>, Vec<String>) {
    (hostile::refused_corpus(), hostile::lookalike_corpus())
}

/// An S3 server (s3s-fs) on 127.0.0.1, serving until the process exits.
#[pyclass(name = "S3Server", module = "skillstore._native.testkit", frozen)]
struct PyS3Server {
    inner: S3TestServer,
}

#[pymethods]
impl PyS3Server {
    /// Starts a server.
    #[new]
    fn new() -> Self {
        PyS3Server {
            inner: S3TestServer::start(),
        }
    }

    /// `http://127.0.0.1:PORT`.
    #[getter]
    fn endpoint(&self) -> &str {
        self.inner.endpoint()
    }

    /// The `AWS_*` variables that point skillstore at this server.
    fn env(&self) -> Vec<(&'static str, String)> {
        self.inner.env()
    }

    /// Creates a new, empty bucket and returns its name.
    fn create_bucket(&self) -> String {
        self.inner.create_bucket()
    }
}

/// Adds the submodule `testkit`.
pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let sub = PyModule::new(m.py(), "testkit")?;
    sub.add_function(wrap_pyfunction!(hostile_paths, &sub)?)?;
    sub.add_class::<PyS3Server>()?;
    m.add_submodule(&sub)?;
    Ok(())
}
