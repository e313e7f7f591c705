//! `Catalog`, `Skill`, `Shadowed` and `Diagnostic`: the merged view of a
//! namespace's sources, as frozen Python objects.

use pyo3::exceptions::{PyKeyError, PyUnicodeDecodeError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use std::sync::Arc;

use skillstore::search::SearchIndex;
use skillstore::{Catalog, Diagnostic, PromptOptions, PromptStyle, Skill};

use crate::errors::CoreResult;
use crate::runtime::block_on;
use crate::search::{self, PySearchResult};

/// A merged view of all sources at one moment: the winning skill for each
/// name in deepagents' order, with provenance and diagnostics. Reads go
/// through the source that won. Immutable; `refresh()` gives a new one.
#[pyclass(name = "Catalog", module = "skillstore", frozen)]
pub struct PyCatalog {
    inner: Catalog,
    prompt: PromptOptions,
    /// The search index, built in memory at the first search and handed on
    /// to the catalogs refreshed from this one; held while a search brings
    /// it level with its catalog and queries it.
    search: SharedIndex,
    /// The kept catalog of the checked namespace this was loaded from:
    /// a refresh sets what its path reads see.
    served: Option<Arc<crate::namespace::ServedSlot>>,
}

type SharedIndex = Arc<tokio::sync::Mutex<Option<SearchIndex>>>;

impl PyCatalog {
    pub fn new(inner: Catalog, prompt: PromptOptions) -> Self {
        PyCatalog {
            inner,
            prompt,
            search: SharedIndex::default(),
            served: None,
        }
    }

    /// This catalog, setting `served` at each refresh.
    pub fn following(mut self, served: Arc<crate::namespace::ServedSlot>) -> Self {
        self.served = Some(served);
        self
    }

    fn skill(&self, name: &str) -> PyResult<&Skill> {
        self.inner.get(name).ok_or_else(|| PyKeyError::new_err(name.to_owned()))
    }
}

/// A skill of a catalog: the winner for its name. The fields are those of
/// `skillstore list --json`, plus the version of its SKILL.md when read.
#[pyclass(name = "Skill", module = "skillstore", frozen, eq)]
#[derive(PartialEq)]
pub struct PySkill {
    inner: Skill,
}

/// Where a shadowed skill was.
#[pyclass(name = "Shadowed", module = "skillstore", frozen, get_all, eq)]
#[derive(Clone, PartialEq)]
pub struct PyShadowed {
    /// The source's name.
    pub source: String,
    /// Its SKILL.md.
    pub path: String,
}

#[pymethods]
impl PyShadowed {
    fn __repr__(&self) -> String {
        format!("Shadowed(source={:?}, path={:?})", self.source, self.path)
    }
}

/// One problem met while loading: a stable `kind`, the source and virtual
/// path concerned, and a message naming no host path.
#[pyclass(name = "Diagnostic", module = "skillstore", frozen, get_all, eq)]
#[derive(Clone, PartialEq)]
pub struct PyDiagnostic {
    /// `warning` or `error`.
    pub severity: &'static str,
    /// The stable snake_case kind.
    pub kind: String,
    /// The source concerned.
    pub source: Option<String>,
    /// The virtual path concerned.
    pub path: Option<String>,
    /// What happened, for a person.
    pub message: String,
    /// True when an integrity check (a lock, a required signature)
    /// withheld the skill: it exists but is not served.
    pub withheld: bool,
}

impl From<&Diagnostic> for PyDiagnostic {
    fn from(d: &Diagnostic) -> Self {
        PyDiagnostic {
            severity: d.severity.as_str(),
            kind: d.kind.to_string(),
            source: d.source.clone(),
            path: d.path.as_ref().map(|p| p.as_str().to_owned()),
            message: d.message.clone(),
            withheld: d.kind.is_withheld(),
        }
    }
}

#[pymethods]
impl PyDiagnostic {
    fn __repr__(&self) -> String {
        format!(
            "Diagnostic(severity={:?}, kind={:?}, path={:?})",
            self.severity, self.kind, self.path
        )
    }

    /// The diagnostic as a dict, as `list --json` writes it.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("severity", self.severity)?;
        d.set_item("kind", &self.kind)?;
        d.set_item("source", &self.source)?;
        d.set_item("path", &self.path)?;
        d.set_item("message", &self.message)?;
        Ok(d)
    }
}

fn metadata_dict<'py>(py: Python<'py>, skill: &Skill) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in &skill.metadata.metadata {
        d.set_item(k, v)?;
    }
    Ok(d)
}

#[pymethods]
impl PySkill {
    /// The skill's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }
    /// What it does and when to use it.
    #[getter]
    fn description(&self) -> &str {
        &self.inner.metadata.description
    }
    /// The licence, when given.
    #[getter]
    fn license(&self) -> Option<&str> {
        self.inner.metadata.license.as_deref()
    }
    /// Environment requirements, when given.
    #[getter]
    fn compatibility(&self) -> Option<&str> {
        self.inner.metadata.compatibility.as_deref()
    }
    /// Free-form string pairs, in file order (a new dict on each access).
    #[getter]
    fn metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        metadata_dict(py, &self.inner)
    }
    /// Tools the skill may use.
    #[getter]
    fn allowed_tools<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, &self.inner.metadata.allowed_tools)
    }
    /// Its SKILL.md in the namespace.
    #[getter]
    fn path(&self) -> &str {
        self.inner.path.as_str()
    }
    /// Its directory in the namespace.
    #[getter]
    fn dir(&self) -> String {
        self.inner.dir().as_str().to_owned()
    }
    /// The name of the source it came from.
    #[getter]
    fn source(&self) -> &str {
        &self.inner.source
    }
    /// Whether it is enabled (disabled skills stay out of prompts).
    #[getter]
    fn enabled(&self) -> bool {
        self.inner.enabled
    }
    /// Every skill of the same name it overrode, lowest priority first.
    #[getter]
    fn shadowed(&self) -> Vec<PyShadowed> {
        self.inner
            .shadowed
            .iter()
            .map(|s| PyShadowed {
                source: s.source.clone(),
                path: s.path.as_str().to_owned(),
            })
            .collect()
    }
    /// The version of its SKILL.md when read (the condition for an edit).
    #[getter]
    fn version(&self) -> &str {
        self.inner.version.as_str()
    }
    /// The Git commit its source is read at, for a source in a Git mount;
    /// None otherwise.
    #[getter]
    fn commit(&self) -> Option<&str> {
        self.inner.commit.as_deref()
    }
    /// Its skill digest (`sha256:` and 64 hex digits) when it was computed:
    /// by `Catalog.with_digests()`, or by the check of a lock or of a
    /// source's signatures; None otherwise. `Catalog.digest(name)` computes
    /// one.
    #[getter]
    fn digest(&self) -> Option<&str> {
        self.inner.digest.as_deref()
    }
    /// Who signed it, when its source checks signatures and its signature
    /// verified: the principals of the accepting `allowed_signers` line;
    /// None otherwise.
    #[getter]
    fn signer(&self) -> Option<&str> {
        self.inner.signer.as_deref()
    }

    /// The skill as a dict with the fields of `list --json`: `commit`,
    /// `digest` and `signer` only when known.
    fn to_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = &self.inner;
        let d = PyDict::new(py);
        d.set_item("name", s.name())?;
        d.set_item("description", &s.metadata.description)?;
        d.set_item("license", &s.metadata.license)?;
        d.set_item("compatibility", &s.metadata.compatibility)?;
        d.set_item("metadata", metadata_dict(py, s)?)?;
        d.set_item("allowed_tools", PyList::new(py, &s.metadata.allowed_tools)?)?;
        d.set_item("path", s.path.as_str())?;
        d.set_item("source", &s.source)?;
        d.set_item("enabled", s.enabled)?;
        let shadowed = PyList::empty(py);
        for sh in &s.shadowed {
            let e = PyDict::new(py);
            e.set_item("source", &sh.source)?;
            e.set_item("path", sh.path.as_str())?;
            shadowed.append(e)?;
        }
        d.set_item("shadowed", shadowed)?;
        for (key, value) in [("commit", &s.commit), ("digest", &s.digest), ("signer", &s.signer)] {
            if let Some(value) = value {
                d.set_item(key, value.as_ref())?;
            }
        }
        Ok(d)
    }

    fn __hash__(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.inner.path.hash(&mut h);
        self.inner.version.as_str().hash(&mut h);
        h.finish()
    }

    fn __repr__(&self) -> String {
        format!(
            "Skill(name={:?}, source={:?}, path={:?})",
            self.inner.name(),
            self.inner.source,
            self.inner.path.as_str()
        )
    }
}

fn parse_style(py: Python<'_>, style: &str) -> PyResult<PromptStyle> {
    style.parse::<PromptStyle>().py(py)
}

#[pymethods]
impl PyCatalog {
    /// The skills, in deepagents' order, one per name.
    #[getter]
    fn skills(&self) -> Vec<PySkill> {
        self.inner
            .skills()
            .iter()
            .map(|s| PySkill { inner: s.clone() })
            .collect()
    }

    /// The names of the skills, in order.
    fn names(&self) -> Vec<String> {
        self.inner.skills().iter().map(|s| s.name().to_owned()).collect()
    }

    /// Everything worth reporting about the load, sources first.
    #[getter]
    fn diagnostics(&self) -> Vec<PyDiagnostic> {
        self.inner.diagnostics().iter().map(PyDiagnostic::from).collect()
    }

    /// True when some source could not be listed at the last refresh and
    /// its skills are those of an earlier load.
    #[getter]
    fn is_stale(&self) -> bool {
        self.inner.is_stale()
    }

    /// The skill named `name`, or `default`.
    #[pyo3(signature = (name, default=None))]
    fn get(&self, py: Python<'_>, name: &str, default: Option<Py<PyAny>>) -> PyResult<Py<PyAny>> {
        match self.inner.get(name) {
            Some(s) => Ok(Py::new(py, PySkill { inner: s.clone() })?.into_any()),
            None => Ok(default.unwrap_or_else(|| py.None())),
        }
    }

    fn __getitem__(&self, name: &str) -> PyResult<PySkill> {
        Ok(PySkill {
            inner: self.skill(name)?.clone(),
        })
    }

    fn __contains__(&self, name: &str) -> bool {
        self.inner.get(name).is_some()
    }

    fn __len__(&self) -> usize {
        self.inner.skills().len()
    }

    fn __iter__(slf: &Bound<'_, Self>) -> PyResult<Py<PyAny>> {
        let list = PyList::new(slf.py(), slf.get().skills())?;
        Ok(list.call_method0("__iter__")?.unbind())
    }

    /// A new catalog reflecting the sources now; unchanged SKILL.md files are
    /// not read again (GIL released).
    fn refresh(&self, py: Python<'_>) -> PyCatalog {
        let inner = block_on(py, self.inner.refresh());
        if let Some(served) = &self.served {
            served.loaded(&inner);
        }
        PyCatalog {
            inner,
            prompt: self.prompt.clone(),
            search: Arc::clone(&self.search),
            served: self.served.clone(),
        }
    }

    /// The skills that best match `query`, best first, at most `limit`
    /// (1 to 1000): the winners of this catalog only, disabled ones only
    /// with `include_disabled`. The index is built in memory at the first
    /// search, reading each SKILL.md, and kept with the catalogs refreshed
    /// from this one, which read again only the SKILL.md files that
    /// changed (GIL released).
    #[pyo3(signature = (query, limit=10, include_disabled=false))]
    fn search(&self, py: Python<'_>, query: &str, limit: i64, include_disabled: bool) -> PyResult<Vec<PySearchResult>> {
        let options = search::options(py, limit, include_disabled)?;
        let catalog = &self.inner;
        let shared = &self.search;
        block_on(py, async move {
            let mut held = shared.lock().await;
            let index = held.get_or_insert_with(SearchIndex::in_memory);
            index.refresh(catalog).await?;
            search::run(index, catalog, query, options)
        })
        .py(py)
    }

    /// This catalog with every winner's `digest` computed, as `list
    /// --digests` shows them: a skill that cannot be digested keeps None,
    /// with a warning diagnostic. Each file is hashed once per version for
    /// the life of the namespace (GIL released).
    fn with_digests(&self, py: Python<'_>) -> PyCatalog {
        let inner = block_on(py, self.inner.clone().with_digests());
        PyCatalog {
            inner,
            prompt: self.prompt.clone(),
            search: Arc::clone(&self.search),
            served: self.served.clone(),
        }
    }

    /// The skill digest of the winner `name`, computed now over the files a
    /// confined read of it serves (as `show` gives it); raises when a file
    /// cannot be read or the listing was cut short (GIL released).
    fn digest(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        let digest = block_on(py, self.inner.skill_digest(name)).py(py)?;
        Ok(digest.digest)
    }

    /// The report of the winner `name` as JSON text: byte for byte what
    /// `skillstore show --json NAME` prints and `GET /v1/skills/{name}`
    /// answers (GIL released).
    fn report_json(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        let report = block_on(py, self.inner.report(name)).py(py)?;
        let mut text = serde_json::to_string_pretty(&report)
            .map_err(|e| pyo3::exceptions::PyRuntimeError::new_err(e.to_string()))?;
        text.push('\n');
        Ok(text)
    }

    /// The whole SKILL.md of the skill `name`, as text.
    fn read_skill(&self, py: Python<'_>, name: &str) -> PyResult<String> {
        let bytes = block_on(py, self.inner.read_skill(name)).py(py)?;
        String::from_utf8(bytes.to_vec()).map_err(|e| {
            let b = PyBytes::new(py, e.as_bytes());
            match PyUnicodeDecodeError::new_utf8(py, b.as_bytes(), e.utf8_error()) {
                Ok(err) => PyErr::from_value(err.into_any()),
                Err(err) => err,
            }
        })
    }

    /// A file inside the skill's directory by a relative path such as
    /// `references/forms.md`; `..`, absolute paths and anything that could
    /// leave the directory are refused before any read.
    fn read_file<'py>(&self, py: Python<'py>, name: &str, relative: &str) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = block_on(py, self.inner.read_file(name, relative)).py(py)?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// The files of a skill as relative paths: exactly those
    /// `read_file` serves (no directory link followed, no link out of the
    /// skill, nothing over the read limit, regular files only), each
    /// directory's files before its subdirectories'; the second value is
    /// True when the listing was cut short.
    #[pyo3(signature = (name, *, max_depth=8, max_files=1000))]
    fn list_files(
        &self,
        py: Python<'_>,
        name: &str,
        max_depth: usize,
        max_files: usize,
    ) -> PyResult<(Vec<String>, bool)> {
        let limits = skillstore::FileLimits {
            max_depth,
            max_files,
            ..skillstore::FileLimits::default()
        };
        let listed = block_on(py, self.inner.skill_files(name, limits)).py(py)?;
        Ok((listed.relatives(), listed.truncated))
    }

    /// The enabled skills rendered for a system prompt: `markdown` (the
    /// default, or the configuration's) or `xml`, within `max_chars`
    /// characters when given.
    #[pyo3(signature = (*, style=None, max_chars=None, template=None))]
    fn render_prompt(
        &self,
        py: Python<'_>,
        style: Option<&str>,
        max_chars: Option<usize>,
        template: Option<String>,
    ) -> PyResult<String> {
        let mut options = self.prompt.clone();
        if let Some(style) = style {
            options.style = parse_style(py, style)?;
        }
        if max_chars.is_some() {
            options.max_chars = max_chars;
        }
        if template.is_some() {
            options.template = template;
        }
        let catalog = &self.inner;
        Ok(py.detach(|| skillstore::render(catalog, &options).text))
    }

    /// The skills as deepagents' `SkillMetadata` dicts (`path`, `name`,
    /// `description`, `license`, `compatibility`, `metadata`,
    /// `allowed_tools`), enabled skills only, in order: what deepagents'
    /// `SkillsMiddleware` puts in `skills_metadata`.
    fn deepagents_metadata<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for s in self.inner.enabled() {
            let d = PyDict::new(py);
            d.set_item("path", s.path.as_str())?;
            d.set_item("name", s.name())?;
            d.set_item("description", &s.metadata.description)?;
            d.set_item("license", &s.metadata.license)?;
            d.set_item("compatibility", &s.metadata.compatibility)?;
            d.set_item("metadata", metadata_dict(py, s)?)?;
            d.set_item("allowed_tools", PyList::new(py, &s.metadata.allowed_tools)?)?;
            out.append(d)?;
        }
        Ok(out)
    }

    fn __repr__(&self) -> String {
        format!(
            "Catalog(skills={}, diagnostics={})",
            self.inner.skills().len(),
            self.inner.diagnostics().len()
        )
    }
}

crate::async_variants!(PyCatalog {
    arefresh => "refresh",
    aread_skill => "read_skill",
    aread_file => "read_file",
    alist_files => "list_files",
    arender_prompt => "render_prompt",
    asearch => "search",
    awith_digests => "with_digests",
    adigest => "digest",
});
