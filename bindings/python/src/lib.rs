//! The Python package `skillstore`: the skillstore library over PyO3.
//!
//! Every call that touches storage runs on one shared Tokio runtime with
//! the GIL released, so other Python threads run meanwhile. Errors become
//! exceptions carrying the library's stable kind.

mod catalog;
mod editor;
mod errors;
mod files;
mod grep;
mod namespace;
mod offered;
mod runtime;
mod search;
#[cfg(feature = "testkit")]
mod testkit;
mod validate;

use pyo3::prelude::*;

/// The extension module `skillstore._native`.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    errors::register(m)?;
    m.add_class::<namespace::PyNamespace>()?;
    m.add_class::<namespace::PySource>()?;
    m.add_class::<catalog::PyCatalog>()?;
    m.add_class::<catalog::PySkill>()?;
    m.add_class::<catalog::PyShadowed>()?;
    m.add_class::<catalog::PyDiagnostic>()?;
    m.add_class::<editor::PyEditor>()?;
    m.add_class::<editor::PyChange>()?;
    m.add_class::<search::PySearchResult>()?;
    m.add_class::<files::PyEntry>()?;
    m.add_class::<files::PyBlob>()?;
    m.add_class::<grep::PyGrepReport>()?;
    m.add_class::<validate::PyProblem>()?;
    m.add_class::<validate::PyValidation>()?;
    m.add_function(wrap_pyfunction!(namespace::load_config, m)?)?;
    m.add_function(wrap_pyfunction!(validate::validate, m)?)?;
    m.add_function(wrap_pyfunction!(validate::parse_skill_md, m)?)?;
    #[cfg(feature = "testkit")]
    testkit::register(m)?;
    Ok(())
}
