//! The namespace's files: list, stat, read, write, delete and walk, each
//! through the namespace's backend and its guards. Listings and reads
//! leave out what no skill offers ([`crate::offered`]).

use std::collections::VecDeque;
use std::sync::Arc;

use bytes::Bytes;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use skillstore::SourceList;
use skillstore_backends::{EntryKind, PutMode, ReadOptions, SkillBackend, VPath, Version};

use crate::errors::{CoreResult, backend as backend_error};
use crate::offered::{is_withheld, withheld_error};
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

/// The entries of the directory `path`, sorted by name, without those
/// [`is_withheld`] names; at most `max_entries` of them (the first by name).
pub fn ls(
    py: Python<'_>,
    backend: &Arc<dyn SkillBackend>,
    sources: &SourceList,
    path: &str,
    max_entries: usize,
) -> PyResult<Vec<PyEntry>> {
    let dir = offered_path(py, sources, path, true)?;
    let mut entries = block_on(py, backend.list(&dir)).py(py)?;
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(entries
        .into_iter()
        .filter_map(|e| entry(&dir, e))
        .filter(|e| !withheld_str(sources, &e.path, e.kind == "dir"))
        .take(max_entries)
        .collect())
}

/// What `path` holds; a path [`is_withheld`] names is not found.
pub fn stat(py: Python<'_>, backend: &Arc<dyn SkillBackend>, sources: &SourceList, path: &str) -> PyResult<PyEntry> {
    let p = offered_path(py, sources, path, true)?;
    let meta = block_on(py, backend.stat(&p)).py(py)?;
    if meta.kind != EntryKind::Dir && is_withheld(sources, &p, false) {
        return Err(backend_error(py, withheld_error(&p)));
    }
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

/// A read of `path` under `limit`; a path [`is_withheld`] names is not
/// found, and not read.
pub fn read(
    py: Python<'_>,
    backend: &Arc<dyn SkillBackend>,
    sources: &SourceList,
    path: &str,
    limit: u64,
    prefix: Option<u64>,
) -> PyResult<PyBlob> {
    let p = offered_path(py, sources, path, false)?;
    let options = ReadOptions {
        limit,
        prefix,
        ..ReadOptions::default()
    };
    let b = block_on(py, backend.read(&p, crate::offered::confined(sources, &p, options))).py(py)?;
    Ok(blob(py, &p, b))
}

/// Reads of `paths` under `limit`, concurrently: one `Blob` or exception
/// object per path, in order. A path that is not a virtual path, or that
/// [`is_withheld`] names, fails alone and is not read.
pub fn read_many(
    py: Python<'_>,
    backend: &Arc<dyn SkillBackend>,
    sources: &SourceList,
    paths: Vec<String>,
    limit: u64,
) -> PyResult<Vec<Py<PyAny>>> {
    let parsed: Vec<skillstore_backends::Result<VPath>> = paths.iter().map(|p| offered(sources, p, false)).collect();
    let valid: Vec<VPath> = parsed.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
    let mut results = block_on(
        py,
        crate::offered::read_confined(&**backend, sources, &valid, ReadOptions::with_limit(limit)),
    )
    .into_iter();
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

/// How many directories a walk lists at once.
const WALK_BATCH: usize = 16;

/// Every entry below `path`, breadth first and sorted within each
/// directory, without what [`is_withheld`] names (nor anything below it);
/// at most `max_entries` (the second value is then True). Directories are
/// listed [`WALK_BATCH`] at a time and the walk stops at the bound, so
/// what it holds stays within the bound and one batch of listings. A link
/// to a directory is listed, never descended into; a directory that cannot
/// be listed is left out.
pub fn walk(
    py: Python<'_>,
    backend: &Arc<dyn SkillBackend>,
    sources: &SourceList,
    path: &str,
    max_entries: usize,
) -> PyResult<(Vec<PyEntry>, bool)> {
    let root = offered_path(py, sources, path, true)?;
    let backend = Arc::clone(backend);
    let work = async move {
        let first = backend.list(&root).await?;
        let mut out: Vec<PyEntry> = Vec::new();
        let mut queue: VecDeque<VPath> = VecDeque::new();
        let mut batch = vec![(root, Ok(first))];
        loop {
            for (dir, listed) in batch {
                let Ok(mut entries) = listed else {
                    continue;
                };
                entries.sort_by(|a, b| a.name.cmp(&b.name));
                for e in entries {
                    // A link such as `up -> ..` cannot make a walk loop.
                    let is_dir = e.kind == EntryKind::Dir && !e.symlink;
                    let Some(entry) = entry(&dir, e) else {
                        continue;
                    };
                    if withheld_str(sources, &entry.path, entry.kind == "dir") {
                        continue;
                    }
                    if out.len() == max_entries {
                        return Ok((out, true));
                    }
                    if is_dir {
                        queue.push_back(VPath::new(&entry.path).expect("joined from a valid path"));
                    }
                    out.push(entry);
                }
            }
            if queue.is_empty() {
                return Ok((out, false));
            }
            let dirs: Vec<VPath> = queue.drain(..queue.len().min(WALK_BATCH)).collect();
            let lists = futures::future::join_all(dirs.iter().map(|d| backend.list(d))).await;
            batch = dirs.into_iter().zip(lists).collect();
        }
    };
    let result: skillstore_backends::Result<(Vec<PyEntry>, bool)> = block_on(py, work);
    result.py(py)
}

/// `path` as a virtual path offered to a caller: not one [`is_withheld`]
/// names, as a directory (`dir`) or as a file.
pub fn offered(sources: &SourceList, path: &str, dir: bool) -> skillstore_backends::Result<VPath> {
    let p = VPath::new(path)?;
    if is_withheld(sources, &p, dir) {
        return Err(withheld_error(&p));
    }
    Ok(p)
}

fn offered_path(py: Python<'_>, sources: &SourceList, path: &str, dir: bool) -> PyResult<VPath> {
    offered(sources, path, dir).py(py)
}

/// [`is_withheld`] of a path joined from valid segments.
fn withheld_str(sources: &SourceList, path: &str, dir: bool) -> bool {
    match VPath::new(path) {
        Ok(p) => is_withheld(sources, &p, dir),
        Err(_) => true,
    }
}
