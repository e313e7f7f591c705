//! `SkillEditor` and `Change`: writing skills into a writable source, each
//! change conditional on the version it was based on.

use pyo3::prelude::*;
use pyo3::types::PyDict;
use skillstore::{Patch, SkillEditor};
use skillstore_backends::Version;

use crate::errors::CoreResult;
use crate::runtime::block_on;

/// Writes skills into one writable source. Every write is create-only or
/// conditional on a version: of two writers who read the same version, one
/// wins and the other gets `ConflictError` (kind `version_conflict`).
#[pyclass(name = "SkillEditor", module = "skillstore", frozen)]
pub struct PyEditor {
    pub(crate) inner: SkillEditor,
}

/// A change that landed: its history record, the new version of each file
/// it wrote, and the content check's warnings.
#[pyclass(name = "Change", module = "skillstore", frozen, get_all)]
pub struct PyChange {
    /// The history entry's number.
    pub id: u64,
    /// What was done: `create`, `edit`, `patch`, `delete`, `write_file`,
    /// `remove_file` or `rollback`.
    pub action: String,
    /// The new version of each file written (None for a removed file).
    pub versions: Vec<(String, Option<String>)>,
    /// Warnings from the content check.
    pub warnings: Vec<String>,
    /// The history record as a dict.
    pub record: Py<PyDict>,
}

#[pymethods]
impl PyChange {
    /// The new version of `file` (`SKILL.md`, `scripts/run.sh`), if the
    /// change wrote it.
    #[pyo3(signature = (file="SKILL.md"))]
    fn version_of(&self, file: &str) -> Option<String> {
        self.versions
            .iter()
            .find(|(f, _)| f == file)
            .and_then(|(_, v)| v.clone())
    }

    fn __repr__(&self) -> String {
        format!("Change(id={}, action={:?})", self.id, self.action)
    }
}

fn record_dict(py: Python<'_>, record: &skillstore::Record) -> PyResult<Py<PyDict>> {
    let text = serde_json::to_string(record).expect("a record serializes");
    let json = py.import("json")?;
    Ok(json.call_method1("loads", (text,))?.cast_into::<PyDict>()?.unbind())
}

fn change(py: Python<'_>, c: skillstore::Change) -> PyResult<PyChange> {
    Ok(PyChange {
        id: c.record.id,
        action: c.record.action.as_str().to_owned(),
        versions: c
            .record
            .files
            .iter()
            .map(|f| (f.path.clone(), f.new_version.as_ref().map(|v| v.as_str().to_owned())))
            .collect(),
        warnings: c.warnings.clone(),
        record: record_dict(py, &c.record)?,
    })
}

fn version(expected: Option<String>) -> Option<Version> {
    expected.map(Version::new)
}

#[pymethods]
impl PyEditor {
    /// The name of the source written to.
    #[getter]
    fn source(&self) -> &str {
        self.inner.source().name()
    }

    /// Creates the skill `name` with this SKILL.md; `ConflictError`
    /// (`already_exists`) when the source has it.
    fn create(&self, py: Python<'_>, name: &str, skill_md: Vec<u8>) -> PyResult<PyChange> {
        let c = block_on(py, self.inner.create(name, skill_md)).py(py)?;
        change(py, c)
    }

    /// Replaces the SKILL.md of `name`, only at version `expected` when
    /// given.
    #[pyo3(signature = (name, skill_md, *, expected=None))]
    fn edit(&self, py: Python<'_>, name: &str, skill_md: Vec<u8>, expected: Option<String>) -> PyResult<PyChange> {
        let expected = version(expected);
        let c = block_on(py, self.inner.edit(name, skill_md, expected.as_ref())).py(py)?;
        change(py, c)
    }

    /// Replaces `find` by `replace` in one file of `name` (SKILL.md by
    /// default); the file must hold exactly `count` occurrences. With
    /// `attempts` > 1, a patch that lost a race is applied again to the new
    /// version (and `expected` is ignored).
    #[pyo3(signature = (name, find, replace, *, file="SKILL.md".to_owned(), count=1, expected=None, attempts=1))]
    #[allow(clippy::too_many_arguments)]
    fn patch(
        &self,
        py: Python<'_>,
        name: &str,
        find: String,
        replace: String,
        file: String,
        count: usize,
        expected: Option<String>,
        attempts: u32,
    ) -> PyResult<PyChange> {
        let patch = Patch {
            file,
            find,
            replace,
            count,
            expected: version(expected),
        };
        let c = if attempts > 1 {
            block_on(py, self.inner.patch_with_retry(name, &patch, attempts)).py(py)?
        } else {
            block_on(py, self.inner.patch(name, &patch)).py(py)?
        };
        change(py, c)
    }

    /// Deletes the skill `name` from the source, only at version `expected`
    /// of its SKILL.md when given.
    #[pyo3(signature = (name, *, expected=None))]
    fn delete(&self, py: Python<'_>, name: &str, expected: Option<String>) -> PyResult<PyChange> {
        let expected = version(expected);
        let c = block_on(py, self.inner.delete(name, expected.as_ref())).py(py)?;
        change(py, c)
    }

    /// Writes a supporting file (`references/x.md`, `LICENSE.txt`; never a
    /// hidden path) of an existing skill, only over version `expected` when
    /// given.
    #[pyo3(signature = (name, relative, data, *, expected=None))]
    fn write_file(
        &self,
        py: Python<'_>,
        name: &str,
        relative: &str,
        data: Vec<u8>,
        expected: Option<String>,
    ) -> PyResult<PyChange> {
        let expected = version(expected);
        let c = block_on(py, self.inner.write_file(name, relative, data, expected.as_ref())).py(py)?;
        change(py, c)
    }

    /// Removes a supporting file, only at version `expected` when given.
    #[pyo3(signature = (name, relative, *, expected=None))]
    fn remove_file(&self, py: Python<'_>, name: &str, relative: &str, expected: Option<String>) -> PyResult<PyChange> {
        let expected = version(expected);
        let c = block_on(py, self.inner.remove_file(name, relative, expected.as_ref())).py(py)?;
        change(py, c)
    }

    /// The history of `name`, oldest entry first, as dicts.
    fn history(&self, py: Python<'_>, name: &str) -> PyResult<Vec<Py<PyDict>>> {
        let records = block_on(py, self.inner.history(name)).py(py)?;
        records.iter().map(|r| record_dict(py, r)).collect()
    }

    /// Restores every file the history of `name` mentions to what it was
    /// right after entry `id`; the rollback is itself recorded.
    fn rollback(&self, py: Python<'_>, name: &str, id: u64) -> PyResult<PyChange> {
        let c = block_on(py, self.inner.rollback(name, id)).py(py)?;
        change(py, c)
    }
}

crate::async_variants!(PyEditor {
    acreate => "create",
    aedit => "edit",
    apatch => "patch",
    adelete => "delete",
    awrite_file => "write_file",
    aremove_file => "remove_file",
    ahistory => "history",
    arollback => "rollback",
});
