//! The namespace's files: list, stat, read, write, delete and walk, each
//! through the namespace's backend and its guards.

use std::sync::Arc;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use skillstore_backends::{EntryKind, PutMode, ReadOptions, SkillBackend, VPath, Version};

use crate::errors::{CoreResult, backend as backend_error};
use crate::runtime::block_on;

/// One entry of a listing or walk.
#[pyclass(name = "Entry", module = "skillstore", frozen, get_all)]
#[derive(Clone)]
pub struct PyEntry {
    /// The entry's name (its last segment).
    pub name: String,
    /// Its virtual path.
    pub path: String,
    /// `file`, `dir` or `other` (a special file, or a link the policy does
    /// not resolve).
    pub kind: &'static str,
    /// The size in bytes, for files where known.
    pub size: Option<u64>,
    /// The version, for files where known.
    pub version: Option<String>,
}

#[pymethods]
impl PyEntry {
    /// True for a directory.
    #[getter]
    fn is_dir(&self) -> bool {
        self.kind == "dir"
    }

    fn __repr__(&self) -> String {
        format!(
            "Entry(path={:?}, kind={:?}, size={:?})",
            self.path, self.kind, self.size
        )
    }
}

/// The bytes of one read.
#[pyclass(name = "Blob", module = "skillstore", frozen, get_all)]
pub struct PyBlob {
    /// The virtual path read.
    pub path: String,
    /// The bytes read: the whole file, or its prefix.
    pub data: Py<PyBytes>,
    /// The whole file's size in bytes.
    pub size: u64,
    /// The file's version when read.
    pub version: String,
}

#[pymethods]
impl PyBlob {
    fn __repr__(&self, py: Python<'_>) -> String {
        format!(
            "Blob(path={:?}, size={}, read={})",
            self.path,
            self.size,
            self.data.bind(py).as_bytes().len()
        )
    }
}

fn kind_name(kind: EntryKind) -> &'static str {
    match kind {
        EntryKind::File => "file",
        EntryKind::Dir => "dir",
        EntryKind::Other => "other",
    }
}

fn vpath(py: Python<'_>, path: &str) -> PyResult<VPath> {
    VPath::new(path).py(py)
}

fn entry(dir: &VPath, e: skillstore_backends::Entry) -> Option<PyEntry> {
    let path = dir.join(&e.name).ok()?;
    Some(PyEntry {
        path: path.as_str().to_owned(),
        name: e.name,
        kind: kind_name(e.kind),
        size: e.size,
        version: e.version.map(|v| v.as_str().to_owned()),
    })
}

pub fn ls(py: Python<'_>, backend: &Arc<dyn SkillBackend>, path: &str) -> PyResult<Vec<PyEntry>> {
    let dir = vpath(py, path)?;
    let mut entries = block_on(py, backend.list(&dir)).py(py)?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries.into_iter().filter_map(|e| entry(&dir, e)).collect())
}

pub fn stat(py: Python<'_>, backend: &Arc<dyn SkillBackend>, path: &str) -> PyResult<PyEntry> {
    let p = vpath(py, path)?;
    let meta = block_on(py, backend.stat(&p)).py(py)?;
    Ok(PyEntry {
        name: p.file_name().unwrap_or("").to_owned(),
        path: p.as_str().to_owned(),
        kind: kind_name(meta.kind),
        size: meta.size,
        version: meta.version.map(|v| v.as_str().to_owned()),
    })
}

/// The Python blob of `b`, read at `path`.
pub fn blob(py: Python<'_>, path: &VPath, b: skillstore_backends::Blob) -> PyBlob {
    PyBlob {
        path: path.as_str().to_owned(),
        data: PyBytes::new(py, &b.data).unbind(),
        size: b.size,
        version: b.version.as_str().to_owned(),
    }
}

/// `blob` cut to its first `prefix` bytes, when given (its size stays the
/// file's).
pub fn prefix_of(py: Python<'_>, blob: PyBlob, prefix: Option<u64>) -> PyBlob {
    let Some(prefix) = prefix else {
        return blob;
    };
    let data = blob.data.bind(py).as_bytes();
    let end = data.len().min(usize::try_from(prefix).unwrap_or(usize::MAX));
    PyBlob {
        data: PyBytes::new(py, &data[..end]).unbind(),
        ..blob
    }
}

pub fn read(
    py: Python<'_>,
    backend: &Arc<dyn SkillBackend>,
    path: &str,
    limit: u64,
    prefix: Option<u64>,
) -> PyResult<PyBlob> {
    let p = vpath(py, path)?;
    let b = block_on(
        py,
        backend.read(
            &p,
            ReadOptions {
                limit,
                prefix,
                ..ReadOptions::default()
            },
        ),
    )
    .py(py)?;
    Ok(blob(py, &p, b))
}

pub fn read_many(
    py: Python<'_>,
    backend: &Arc<dyn SkillBackend>,
    paths: Vec<String>,
    limit: u64,
) -> PyResult<Vec<Py<PyAny>>> {
    // Paths that are not valid virtual paths fail alone, before any read.
    let parsed: Vec<skillstore_backends::Result<VPath>> = paths.iter().map(VPath::new).collect();
    let valid: Vec<VPath> = parsed.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
    let mut results = block_on(py, backend.read_many(&valid, ReadOptions::with_limit(limit))).into_iter();
    let mut out = Vec::with_capacity(paths.len());
    for p in parsed {
        let item: Py<PyAny> = match p {
            Err(e) => backend_error(py, e).into_value(py).into_any(),
            Ok(p) => match results.next().expect("one result per valid path") {
                Ok(b) => Py::new(py, blob(py, &p, b))?.into_any(),
                Err(e) => backend_error(py, e).into_value(py).into_any(),
            },
        };
        out.push(item);
    }
    Ok(out)
}

pub fn write(
    py: Python<'_>,
    backend: &Arc<dyn SkillBackend>,
    path: &str,
    data: Vec<u8>,
    create: bool,
    expected: Option<String>,
) -> PyResult<String> {
    let p = vpath(py, path)?;
    let mode = match (create, expected) {
        (_, Some(v)) => PutMode::IfVersion(Version::new(v)),
        (true, None) => PutMode::Create,
        (false, None) => PutMode::Overwrite,
    };
    let version = block_on(py, backend.put(&p, Bytes::from(data), mode)).py(py)?;
    Ok(version.as_str().to_owned())
}

pub fn delete(py: Python<'_>, backend: &Arc<dyn SkillBackend>, path: &str, expected: Option<String>) -> PyResult<()> {
    let p = vpath(py, path)?;
    match expected {
        Some(v) => block_on(py, backend.delete_if_version(&p, &Version::new(v))).py(py),
        None => block_on(py, backend.delete(&p)).py(py),
    }
}

pub fn walk(
    py: Python<'_>,
    backend: &Arc<dyn SkillBackend>,
    path: &str,
    max_entries: usize,
) -> PyResult<(Vec<PyEntry>, bool)> {
    let root = vpath(py, path)?;
    let backend = Arc::clone(backend);
    let work = async move {
        let first = backend.list(&root).await?;
        let mut out = Vec::new();
        let mut level = vec![(root, first)];
        loop {
            let mut dirs = Vec::new();
            for (dir, mut entries) in level {
                entries.sort_by(|a, b| a.name.cmp(&b.name));
                for e in entries {
                    if out.len() == max_entries {
                        return Ok((out, true));
                    }
                    // A link to a directory is listed, never descended into, so a
                    // link such as `up -> ..` cannot make a walk loop.
                    let is_dir = e.kind == EntryKind::Dir && !e.symlink;
                    if let Some(entry) = entry(&dir, e) {
                        if is_dir {
                            dirs.push(VPath::new(&entry.path).expect("joined from a valid path"));
                        }
                        out.push(entry);
                    }
                }
            }
            if dirs.is_empty() {
                return Ok((out, false));
            }
            // Each level's directories are listed concurrently; a directory
            // that cannot be listed is left out.
            let lists = futures::future::join_all(dirs.iter().map(|d| backend.list(d))).await;
            level = dirs
                .into_iter()
                .zip(lists)
                .filter_map(|(d, r)| r.ok().map(|entries| (d, entries)))
                .collect();
        }
    };
    let result: skillstore_backends::Result<(Vec<PyEntry>, bool)> = block_on(py, work);
    result.py(py)
}
