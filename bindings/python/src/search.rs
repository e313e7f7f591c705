//! `SearchResult` and the searches of `Namespace` and `Catalog`: the
//! library's full-text index over a catalog's winners.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use skillstore::search::{MAX_LIMIT, SearchHit, SearchIndex, SearchOptions};

use crate::errors::raise;

/// One search result: the fields of `skillstore search --json`, plus
/// whether the skill is enabled.
#[pyclass(name = "SearchResult", module = "skillstore", frozen, get_all, eq)]
#[derive(Clone, PartialEq)]
pub struct PySearchResult {
    /// The skill's name.
    pub name: String,
    /// What it does and when to use it.
    pub description: String,
    /// The name of the source it comes from.
    pub source: String,
    /// Its SKILL.md in the namespace.
    pub path: String,
    /// The BM25 score: higher is better, comparable within one query only.
    pub score: f64,
    /// Whether it is enabled (always True unless disabled skills were asked for).
    pub enabled: bool,
}

impl From<SearchHit> for PySearchResult {
    fn from(hit: SearchHit) -> Self {
        PySearchResult {
            name: hit.name,
            description: hit.description,
            source: hit.source,
            path: hit.path.as_str().to_owned(),
            score: f64::from(hit.score),
            enabled: hit.enabled,
        }
    }
}

#[pymethods]
impl PySearchResult {
    /// The result as a dict with the fields of `skillstore search --json`
    /// (`name`, `description`, `source`, `path`, `score`).
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("name", &self.name)?;
        d.set_item("description", &self.description)?;
        d.set_item("source", &self.source)?;
        d.set_item("path", &self.path)?;
        d.set_item("score", self.score)?;
        Ok(d)
    }

    fn __repr__(&self) -> String {
        format!(
            "SearchResult(name={:?}, source={:?}, score={:.3})",
            self.name, self.source, self.score
        )
    }
}

/// The options of one query, checked: `limit` from 1 to the library's
/// most results per query.
pub fn options(py: Python<'_>, limit: i64, include_disabled: bool) -> PyResult<SearchOptions> {
    match usize::try_from(limit) {
        Ok(limit) if (1..=MAX_LIMIT).contains(&limit) => Ok(SearchOptions {
            limit,
            include_disabled,
        }),
        _ => Err(raise(
            py,
            "usage",
            format!("limit must be from 1 to {MAX_LIMIT}, not {limit}"),
            None,
        )),
    }
}

/// The hits of `index` (level with `catalog`) for `query`.
pub fn run(
    index: &SearchIndex,
    catalog: &skillstore::Catalog,
    query: &str,
    options: SearchOptions,
) -> skillstore::Result<Vec<PySearchResult>> {
    Ok(index
        .search(catalog, query, options)?
        .into_iter()
        .map(PySearchResult::from)
        .collect())
}
