//! `Namespace`: a configuration opened into mounts and sources, the one
//! door to catalogs, editors and the namespace's files.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyString};
use skillstore::config::SourceConfig;
use skillstore::source::parse_dir;
use skillstore::{Config, Source, SourceList};
use skillstore_backends::{ReadOptions, VPath};

use crate::catalog::PyCatalog;
use crate::editor::PyEditor;
use crate::errors::{CoreResult, raise};
use crate::files;
use crate::grep;
use crate::runtime::block_on;
use crate::search::{self, PySearchResult};

/// A namespace: mounts (directories, `s3://bucket/prefix`, `memory:`
/// files or in-memory dicts), the ordered sources in it, and the load and
/// prompt options. Built by `Namespace(...)`, `Namespace.from_yaml(...)`
/// or `load_config(path)`; every one of them assembles through the
/// library's configuration, with its guards and rules.
#[pyclass(name = "Namespace", module = "skillstore", frozen)]
pub struct PyNamespace {
    pub(crate) inner: skillstore::Namespace,
    /// The configuration it was opened from (for `lock()`, which opens it
    /// again without its lock).
    config: Config,
    /// Where the namespace checks a lock or signatures: the checked
    /// catalog path reads go through and when it was loaded (see
    /// [`PyNamespace::served_catalog`]), shared with the catalogs it loads.
    served: Arc<ServedSlot>,
    /// Held (with the GIL released) by the one thread loading the checked
    /// catalog again, so concurrent reads share one load.
    reloading: Arc<tokio::sync::Mutex<()>>,
}

/// One source of a namespace.
#[pyclass(name = "Source", module = "skillstore", frozen, get_all)]
#[derive(Clone)]
pub struct PySource {
    /// The name used in provenance and by editors.
    pub name: String,
    /// The label shown in prompts.
    pub label: String,
    /// The virtual directory holding its skill directories.
    pub path: String,
    /// Whether skills may be written to it.
    pub writable: bool,
}

#[pymethods]
impl PySource {
    fn __repr__(&self) -> String {
        format!(
            "Source(name={:?}, path={:?}, writable={})",
            self.name,
            self.path,
            if self.writable { "True" } else { "False" }
        )
    }
}

/// `os.fspath(value)` as a string.
pub(crate) fn fspath(value: &Bound<'_, PyAny>) -> PyResult<String> {
    if let Ok(s) = value.cast::<PyString>() {
        return Ok(s.to_str()?.to_owned());
    }
    let os = value.py().import("os")?;
    os.call_method1("fspath", (value,))?.extract()
}

fn cwd(py: Python<'_>) -> PyResult<PathBuf> {
    std::env::current_dir().map_err(|e| raise(py, "usage", format!("cannot read the working directory: {e}"), None))
}

/// A mount's location: a location string, or a dict of `{path: content}`
/// held in memory.
enum MountValue {
    Location(String),
    Memory(skillstore::backends::MemoryBackend),
}

fn mount_value(py: Python<'_>, value: &Bound<'_, PyAny>) -> PyResult<MountValue> {
    let Ok(files) = value.cast::<PyDict>() else {
        return Ok(MountValue::Location(fspath(value)?));
    };
    let mut map = serde_json::Map::new();
    for (k, v) in files.iter() {
        let key: String = k.extract()?;
        let text = if let Ok(b) = v.cast::<PyBytes>() {
            String::from_utf8(b.as_bytes().to_vec())
                .map_err(|_| raise(py, "usage", format!("the content of {key:?} is not UTF-8 text"), None))?
        } else {
            v.extract::<String>()?
        };
        map.insert(key, serde_json::Value::String(text));
    }
    let json = serde_json::Value::Object(map).to_string();
    let files = skillstore::backends::MemoryBackend::from_json(&json)
        .map_err(|e| raise(py, e.kind().as_str(), format!("cannot mount the dict: {e}"), None))?;
    Ok(MountValue::Memory(files))
}

fn sources_of(ns: &skillstore::Namespace) -> Vec<PySource> {
    py_sources(ns.sources())
}

fn py_sources(list: &SourceList) -> Vec<PySource> {
    list.iter()
        .map(|s| PySource {
            name: s.name().to_owned(),
            label: s.label().to_owned(),
            path: s.path().as_str().to_owned(),
            writable: s.is_writable(),
        })
        .collect()
}

#[pymethods]
impl PyNamespace {
    /// Builds a namespace. `location` is mounted at `/`; `mounts` maps
    /// virtual directories to locations (a directory, `s3://bucket/prefix`,
    /// `memory:FILE.json`, or a dict `{"/path": "content"}` held in memory).
    /// `sources` are `[LABEL=]VPATH` specs, lowest priority first (default:
    /// the mount points, in order). `writable` names sources (by name or
    /// path) that may be written to.
    #[new]
    #[pyo3(signature = (location=None, *, mounts=None, sources=None, writable=Vec::new(), symlinks=None, max_file_bytes=None, concurrency=None, prompt_style=None, max_chars=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        location: Option<Bound<'_, PyAny>>,
        mounts: Option<Bound<'_, PyDict>>,
        sources: Option<Vec<String>>,
        writable: Vec<String>,
        symlinks: Option<String>,
        max_file_bytes: Option<u64>,
        concurrency: Option<usize>,
        prompt_style: Option<String>,
        max_chars: Option<usize>,
    ) -> PyResult<Self> {
        let base = cwd(py)?;
        let mut config = Config::default();
        config.base_dir = Some(base.clone());
        let mut pairs: Vec<(String, MountValue)> = Vec::new();
        if let Some(location) = &location {
            pairs.push(("/".to_owned(), mount_value(py, location)?));
        }
        if let Some(mounts) = &mounts {
            for (at, value) in mounts.iter() {
                pairs.push((at.extract()?, mount_value(py, &value)?));
            }
        }
        if pairs.is_empty() {
            return Err(raise(
                py,
                "usage",
                "a namespace needs a location or mounts".into(),
                None,
            ));
        }
        let mount_points: Vec<String> = pairs.iter().map(|(at, _)| at.clone()).collect();
        for (at, value) in pairs {
            match value {
                MountValue::Location(text) => config.set_mount(&at, &text, &base).py(py)?,
                MountValue::Memory(files) => config.set_memory_mount(&at, files).py(py)?,
            }
        }
        if let Some(policy) = symlinks {
            for mount in &mut config.mounts {
                let local = skillstore::Location::parse(&mount.location).is_ok_and(|l| l.is_local_dir());
                if local {
                    mount.symlinks = Some(policy.clone());
                }
            }
        }
        let specs: Vec<String> = match sources {
            Some(specs) => specs,
            None => mount_points,
        };
        config.set_sources(specs.iter().map(String::as_str)).py(py)?;
        mark_writable(py, &mut config, &writable)?;
        config.limits.max_file_bytes = max_file_bytes;
        config.limits.concurrency = concurrency;
        config.prompt.style = prompt_style;
        config.prompt.max_chars = max_chars;
        let inner = open(py, &config)?;
        Ok(PyNamespace::opened(inner, config))
    }

    /// A namespace from `skillstore.yaml` text; relative locations resolve
    /// against `base_dir` (default: the working directory).
    #[staticmethod]
    #[pyo3(signature = (text, base_dir=None))]
    fn from_yaml(py: Python<'_>, text: &str, base_dir: Option<Bound<'_, PyAny>>) -> PyResult<Self> {
        let mut config = Config::parse(text).py(py)?;
        config.base_dir = Some(match base_dir {
            Some(dir) => PathBuf::from(fspath(&dir)?),
            None => cwd(py)?,
        });
        let inner = open(py, &config)?;
        Ok(PyNamespace::opened(inner, config))
    }

    /// A new namespace opened again from the same configuration: each Git
    /// mount asks its remote for its reference again (a moved branch is
    /// seen; a pinned commit stays), and the lock and signature files are
    /// read again. Mounts of dicts held in memory are shared with this
    /// namespace. A catalog's `refresh()` rereads the sources of the
    /// namespace it came from, at the commits that namespace fetched.
    fn reopen(&self, py: Python<'_>) -> PyResult<PyNamespace> {
        let config = self.config.clone();
        let inner = open(py, &config)?;
        Ok(PyNamespace::opened(inner, config))
    }

    /// Every Git mount's location and the commit it was read at (None when
    /// its remote could not be reached and nothing was fetched before), in
    /// mount order.
    #[getter]
    fn git_commits(&self) -> Vec<(String, Option<String>)> {
        self.inner
            .git_mounts()
            .iter()
            .map(|(location, commit)| (location.to_string(), commit.clone()))
            .collect()
    }

    /// The sources, lowest priority first.
    #[getter]
    fn sources(&self) -> Vec<PySource> {
        sources_of(&self.inner)
    }

    /// Loads the catalog (GIL released).
    fn load(&self, py: Python<'_>) -> PyResult<PyCatalog> {
        let options = self.inner.prompt_options().py(py)?;
        let catalog = block_on(py, self.inner.load());
        self.loaded(&catalog);
        Ok(self.catalog(catalog, options))
    }

    /// Loads a catalog of other sources (`[LABEL=]VPATH` specs, lowest
    /// priority first) over this namespace's mounts and guards, with its
    /// load options (GIL released). Where the namespace checks a lock or
    /// signatures, a spec at a configured source's directory must carry
    /// that source's name (`load_at` names them so), or it is refused.
    fn load_sources(&self, py: Python<'_>, specs: Vec<String>) -> PyResult<PyCatalog> {
        let mut list = SourceList::new();
        for spec in &specs {
            list.push(Source::parse(spec).py(py)?).py(py)?;
        }
        let options = self.inner.prompt_options().py(py)?;
        let namespace = &self.inner;
        let catalog = block_on(py, namespace.load_sources(list)).py(py)?;
        self.loaded(&catalog);
        Ok(self.catalog(catalog, options))
    }

    /// The sources at the directories `paths`, lowest priority first, as
    /// `load_at` names them: a directory this namespace's configuration
    /// names a source at is that source (so its lock entries and signature
    /// policy apply); any other is named as `--source PATH` names it (a
    /// name taken already becomes the whole path, `team/skills`).
    fn sources_at(&self, py: Python<'_>, paths: Vec<String>) -> PyResult<Vec<PySource>> {
        Ok(py_sources(&self.inner.sources_at(&paths).py(py)?))
    }

    /// Loads a catalog of the sources at the directories `paths` (lowest
    /// priority first, named as `sources_at` names them) over this
    /// namespace's mounts and guards, with its load options: a lock or a
    /// signature policy of the configuration applies (GIL released).
    fn load_at(&self, py: Python<'_>, paths: Vec<String>) -> PyResult<PyCatalog> {
        let list = self.inner.sources_at(&paths).py(py)?;
        let options = self.inner.prompt_options().py(py)?;
        let namespace = &self.inner;
        let catalog = block_on(py, namespace.load_sources(list)).py(py)?;
        self.loaded(&catalog);
        Ok(self.catalog(catalog, options))
    }

    /// The skills that best match `query`, best first, at most `limit`
    /// (1 to 1000), as `skillstore search --json` gives them: the catalog
    /// is loaded now, and the index is the one the command keeps in the
    /// local cache (reading again only the SKILL.md files that changed), or
    /// one in memory when the cache is off or a source is a `memory:` file.
    /// Only winners are results; disabled skills only with
    /// `include_disabled` (GIL released).
    #[pyo3(signature = (query, limit=10, include_disabled=false))]
    fn search(&self, py: Python<'_>, query: &str, limit: i64, include_disabled: bool) -> PyResult<Vec<PySearchResult>> {
        let options = search::options(py, limit, include_disabled)?;
        let namespace = &self.inner;
        let catalog = block_on(py, namespace.load());
        self.loaded(&catalog);
        block_on(py, async move {
            let index = namespace.search_index_for(&catalog).await?;
            search::run(&index, &catalog, query, options)
        })
        .py(py)
    }

    /// The text of a lock file pinning this namespace now, as `skillstore
    /// lock` writes it: every enabled winner's name, source and digest (and
    /// Git commit), and every Git mount's commit. The namespace is opened
    /// again without its own lock, so a lock can be renewed; its signature
    /// policies still apply. A source that could not be loaded, or a skill
    /// that cannot be digested, raises (GIL released).
    fn lock(&self, py: Python<'_>) -> PyResult<String> {
        let mut config = self.config.clone();
        config.clear_lock();
        let namespace = open(py, &config)?;
        let catalog = block_on(py, namespace.load());
        let incomplete: Vec<&str> = catalog.incomplete_sources().iter().map(|s| s.name()).collect();
        if !incomplete.is_empty() {
            let names = incomplete.join(", ");
            return Err(raise(
                py,
                "unavailable",
                format!("cannot lock: not every skill of {names} could be loaded"),
                None,
            ));
        }
        let withheld: Vec<String> = catalog
            .withheld()
            .map(|d| format!("{} ({})", d.path.as_ref().map_or("-", |p| p.as_str()), d.kind.as_str()))
            .collect();
        if !withheld.is_empty() {
            let names = withheld.join(", ");
            return Err(raise(
                py,
                "usage",
                format!("cannot lock skills that are not served: {names}"),
                None,
            ));
        }
        let lock = block_on(py, skillstore::integrity::Lock::of(&namespace, &catalog)).py(py)?;
        Ok(lock.to_json())
    }

    /// Every winner, loaded without withholding any, as `skillstore verify
    /// --json` reports it: a dict of `name`, `source`, `digest` (None when
    /// it cannot be computed, with `digest_error`), `lock` (`no_lock`,
    /// `matches`, `mismatch` with `locked_digest` and `locked_source`, or
    /// `not_locked`),
    /// `signature` (`not_checked`, `unsigned`, `signed`, or the refusal's
    /// kind), and when signed `signer` and `fingerprint`; `problem` says
    /// why one would not be served (GIL released).
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let reports = block_on(py, skillstore::integrity::verify::verify(&self.inner));
        let text = serde_json::to_string(&reports)
            .map_err(|e| raise(py, "other", format!("cannot encode the report: {e}"), None))?;
        py.import("json")?.call_method1("loads", (text,))
    }

    /// An editor of the source named `source` (default: the highest-priority
    /// writable one), recording `author` in the history.
    #[pyo3(signature = (source=None, *, author=None))]
    fn editor(&self, py: Python<'_>, source: Option<&str>, author: Option<String>) -> PyResult<PyEditor> {
        let mut editor = self.inner.editor(source).py(py)?;
        if let Some(author) = author {
            editor = editor.with_author(author);
        }
        Ok(PyEditor { inner: editor })
    }

    /// The entries of the directory `path`, sorted by name; at most
    /// `max_entries` (the first by name) when given. No path a skill may
    /// not offer is named (a `.skillstore/` entry other than the signature,
    /// and what the library's content rule adds); such a directory itself
    /// is not found.
    #[pyo3(signature = (path, *, max_entries=None))]
    fn ls(&self, py: Python<'_>, path: &str, max_entries: Option<usize>) -> PyResult<Vec<files::PyEntry>> {
        files::ls(
            py,
            &self.inner.backend(),
            self.inner.sources(),
            path,
            max_entries.unwrap_or(usize::MAX),
        )
    }

    /// What the path holds, without reading it; a path a skill may not
    /// offer is not found.
    fn stat(&self, py: Python<'_>, path: &str) -> PyResult<files::PyEntry> {
        files::stat(py, &self.inner.backend(), self.inner.sources(), path)
    }

    /// Reads a file under the read limit (or `limit`), whole or its first
    /// `prefix` bytes. A path a skill may not offer is not found, and not
    /// read.
    /// Refused (`UsageError`) when the namespace checks a lock or
    /// signatures: a path read would bypass the catalog, where those checks
    /// withhold a skill and hold its reads to the checked versions.
    #[pyo3(signature = (path, *, limit=None, prefix=None))]
    fn read(&self, py: Python<'_>, path: &str, limit: Option<u64>, prefix: Option<u64>) -> PyResult<files::PyBlob> {
        let limit = limit.unwrap_or(self.inner.load_options().read_limit);
        if self.checks_integrity() {
            let read = self
                .served_reads(py, &[path.to_owned()], limit)?
                .pop()
                .expect("one result per path");
            return match read {
                Ok(blob) => Ok(files::prefix_of(py, blob, prefix)),
                Err(e) => Err(e),
            };
        }
        files::read(py, &self.inner.backend(), self.inner.sources(), path, limit, prefix)
    }

    /// Reads many files concurrently: one `Blob` or exception object per
    /// path, in order. Through the checked catalog like `read` when the
    /// namespace checks a lock or signatures; a path a skill may not offer
    /// is not found, and not read.
    #[pyo3(signature = (paths, *, limit=None))]
    fn read_many(&self, py: Python<'_>, paths: Vec<String>, limit: Option<u64>) -> PyResult<Vec<Py<PyAny>>> {
        let limit = limit.unwrap_or(self.inner.load_options().read_limit);
        if self.checks_integrity() {
            return self
                .served_reads(py, &paths, limit)?
                .into_iter()
                .map(|read| match read {
                    Ok(blob) => Ok(Py::new(py, blob)?.into_any()),
                    Err(e) => Ok(e.into_value(py).into_any()),
                })
                .collect();
        }
        files::read_many(py, &self.inner.backend(), self.inner.sources(), paths, limit)
    }

    /// Writes a file: only where nothing exists (`create`), only over
    /// version `expected`, or over anything. Returns the new version.
    #[pyo3(signature = (path, data, *, create=false, expected=None))]
    fn write(
        &self,
        py: Python<'_>,
        path: &str,
        data: Vec<u8>,
        create: bool,
        expected: Option<String>,
    ) -> PyResult<String> {
        files::write(py, &self.inner.backend(), path, data, create, expected)
    }

    /// Deletes a file, only at version `expected` when given.
    #[pyo3(signature = (path, *, expected=None))]
    fn delete(&self, py: Python<'_>, path: &str, expected: Option<String>) -> PyResult<()> {
        files::delete(py, &self.inner.backend(), path, expected)
    }

    /// Every file and directory below `path`, breadth first, sorted within
    /// each directory; at most `max_entries` (the second value is then
    /// True). Directories that cannot be listed are skipped; a path a skill
    /// may not offer is neither named nor entered.
    #[pyo3(signature = (path, *, max_entries=None))]
    fn walk(&self, py: Python<'_>, path: &str, max_entries: Option<usize>) -> PyResult<(Vec<files::PyEntry>, bool)> {
        files::walk(
            py,
            &self.inner.backend(),
            self.inner.sources(),
            path,
            max_entries.unwrap_or(usize::MAX),
        )
    }

    /// The lines holding the literal `pattern` in `files`, searched in the
    /// order given (GIL released while reading and searching). Files are
    /// read in batches of `max(1, batch_bytes // max_file_bytes)` (at most
    /// 64) and let go before the next batch; a file not found, refused,
    /// over the read limit, not UTF-8 text, or one a skill may not offer is
    /// skipped. At most `max_matches` matches are returned, each line cut
    /// to `max_line_chars` characters; no batch starts once `max_bytes`
    /// were read. A search stopped by a bound says so (`truncated`,
    /// `reason`). Through the checked catalog like `read` when the
    /// namespace checks a lock or signatures.
    #[pyo3(signature = (pattern, files, *, max_matches=grep::DEFAULT_MAX_MATCHES, max_bytes=grep::DEFAULT_MAX_BYTES, max_line_chars=grep::DEFAULT_MAX_LINE_CHARS, batch_bytes=grep::DEFAULT_BATCH_BYTES))]
    #[allow(clippy::too_many_arguments)]
    fn grep(
        &self,
        py: Python<'_>,
        pattern: &str,
        files: Vec<String>,
        max_matches: usize,
        max_bytes: u64,
        max_line_chars: usize,
        batch_bytes: u64,
    ) -> PyResult<grep::PyGrepReport> {
        let limit = self.inner.load_options().read_limit;
        let bounds = grep::Bounds {
            max_matches,
            max_bytes,
            max_line_chars,
            batch: grep::Bounds::batch_for(batch_bytes, limit),
        };
        let backend = self.inner.backend();
        let mut search = grep::Search::new(pattern, bounds);
        let mut rest: &[String] = &files;
        while !rest.is_empty() && search.may_read_more() {
            let (now, later) = rest.split_at(bounds.batch.min(rest.len()));
            rest = later;
            let paths: Vec<VPath> = now
                .iter()
                .filter_map(|p| files::offered(self.inner.sources(), p, false).ok())
                .collect();
            search.skip(now.len() - paths.len());
            let reads: Vec<Result<bytes::Bytes, ()>> = if self.checks_integrity() {
                self.served_reads_raw(py, &paths, limit)
                    .into_iter()
                    .map(|r| r.map(|b| b.data).map_err(drop))
                    .collect()
            } else {
                block_on(
                    py,
                    crate::offered::read_confined(
                        &*backend,
                        self.inner.sources(),
                        &paths,
                        ReadOptions::with_limit(limit),
                    ),
                )
                .into_iter()
                .map(|r| r.map(|b| b.data).map_err(drop))
                .collect()
            };
            let mut read = Vec::with_capacity(reads.len());
            let mut unread = 0;
            for (path, data) in paths.iter().zip(reads) {
                match data {
                    Ok(data) => read.push((path.as_str().to_owned(), data)),
                    Err(()) => unread += 1,
                }
            }
            py.detach(|| search.batch(read, unread));
        }
        Ok(search.finish())
    }

    /// The read limit in bytes.
    #[getter]
    fn max_file_bytes(&self) -> u64 {
        self.inner.load_options().read_limit
    }

    fn __repr__(&self) -> String {
        let names: Vec<String> = self.inner.sources().iter().map(|s| s.name().to_owned()).collect();
        format!("Namespace(sources={names:?})")
    }
}

/// Opens `config` with the GIL released (a Git mount fetches from its
/// remote).
fn open(py: Python<'_>, config: &Config) -> PyResult<skillstore::Namespace> {
    py.detach(|| config.open()).py(py)
}

fn mark_writable(py: Python<'_>, config: &mut Config, writable: &[String]) -> PyResult<()> {
    for w in writable {
        if w.starts_with('/') {
            let wanted = parse_dir(w).py(py)?;
            let found: Option<&mut SourceConfig> = config
                .sources
                .iter_mut()
                .find(|s| parse_dir(&s.path).is_ok_and(|p| p == wanted));
            match found {
                Some(source) => source.writable = true,
                None => return Err(raise(py, "source_not_found", format!("no source at `{w}`"), Some(w))),
            }
        } else {
            config.make_writable(w);
        }
    }
    Ok(())
}

/// Opens `skillstore.yaml` at `path` (relative locations resolve against
/// its directory), with optional sources marked writable.
#[pyfunction]
#[pyo3(signature = (path="skillstore.yaml".into(), *, writable=Vec::new()))]
pub fn load_config(py: Python<'_>, path: PathBuf, writable: Vec<String>) -> PyResult<PyNamespace> {
    let mut config = Config::load(Path::new(&path)).py(py)?;
    mark_writable(py, &mut config, &writable)?;
    let inner = open(py, &config)?;
    Ok(PyNamespace::opened(inner, config))
}

/// Where a checked namespace keeps the catalog its path reads go through,
/// shared with the catalogs loaded from it so that every load or refresh
/// of them sets what those reads see.
pub(crate) struct ServedSlot {
    /// True when the namespace checks a lock or signatures.
    checks: bool,
    /// The namespace's configured sources.
    own: SourceList,
    kept: std::sync::Mutex<Option<(Arc<skillstore::Catalog>, std::time::Instant)>>,
}

impl ServedSlot {
    /// Keeps `catalog`, just loaded, as the one path reads go through, or
    /// (`None`) has the next path read load one.
    fn keep(&self, catalog: Option<&Arc<skillstore::Catalog>>) {
        let mut slot = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        *slot = catalog.map(|catalog| (Arc::clone(catalog), std::time::Instant::now()));
    }

    /// After a load or refresh on a checked namespace: what it shows is
    /// what path reads see. A catalog of the namespace's own sources (equal
    /// in every setting) becomes the one they go through; one of other
    /// sources has the next path read load the namespace's catalog again.
    pub(crate) fn loaded(&self, catalog: &skillstore::Catalog) {
        if !self.checks {
            return;
        }
        let same = catalog.sources().iter().count() == self.own.iter().count()
            && catalog.sources().iter().zip(self.own.iter()).all(|(a, b)| a == b);
        if same {
            self.keep(Some(&Arc::new(catalog.clone())));
        } else {
            self.keep(None);
        }
    }
}

/// The oldest a checked namespace's kept catalog may be when a path read
/// uses it: a skill changed, lost or withheld since is seen at most this
/// late by reads that do not come upon the change themselves.
const SERVED_MAX_AGE: std::time::Duration = std::time::Duration::from_secs(30);

/// How old the kept catalog must be before a path read that finds nothing
/// served loads it again: a missed path costs a checked load at most this
/// often.
const SERVED_MISS_AGE: std::time::Duration = std::time::Duration::from_secs(2);

crate::async_variants!(PyNamespace {
    aload => "load",
    aload_sources => "load_sources",
    aload_at => "load_at",
    als => "ls",
    astat => "stat",
    aread => "read",
    aread_many => "read_many",
    awrite => "write",
    adelete => "delete",
    awalk => "walk",
    agrep => "grep",
    asearch => "search",
    alock => "lock",
    areopen => "reopen",
    averify => "verify",
});

impl PyNamespace {
    fn opened(inner: skillstore::Namespace, config: Config) -> Self {
        let served = Arc::new(ServedSlot {
            checks: inner.integrity().is_some(),
            own: inner.sources().clone(),
            kept: std::sync::Mutex::new(None),
        });
        PyNamespace {
            inner,
            config,
            served,
            reloading: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    fn checks_integrity(&self) -> bool {
        self.inner.integrity().is_some()
    }

    /// The checked catalog path reads go through: the one kept when it is
    /// younger than `max_age`, and one loaded (and checked) now otherwise.
    /// The slot is locked only to take or put a catalog, never across the
    /// load (which releases the GIL): a thread waiting for it holds the
    /// GIL, and the loading one needs it back.
    fn served_catalog(&self, py: Python<'_>, max_age: std::time::Duration) -> Arc<skillstore::Catalog> {
        let asked = std::time::Instant::now();
        let kept = |fresh: &dyn Fn(std::time::Instant) -> bool| {
            let slot = self.served.kept.lock().unwrap_or_else(|e| e.into_inner());
            slot.as_ref()
                .filter(|(_, loaded)| fresh(*loaded))
                .map(|(catalog, _)| Arc::clone(catalog))
        };
        if let Some(catalog) = kept(&|loaded| loaded.elapsed() < max_age) {
            return catalog;
        }
        // One load at a time, waited for with the GIL released; a load
        // that began after this call did is as fresh as one of its own.
        let _turn = block_on(py, Arc::clone(&self.reloading).lock_owned());
        if let Some(catalog) = kept(&|loaded| loaded >= asked) {
            return catalog;
        }
        let catalog = Arc::new(block_on(py, self.inner.load()));
        self.served.keep(Some(&catalog));
        catalog
    }

    /// After a load: see [`ServedSlot::loaded`].
    fn loaded(&self, catalog: &skillstore::Catalog) {
        self.served.loaded(catalog);
    }

    /// A Python catalog of `catalog`, loaded from this namespace: its
    /// refreshes set what path reads see, as this namespace's loads do.
    fn catalog(&self, catalog: skillstore::Catalog, prompt: skillstore::PromptOptions) -> PyCatalog {
        PyCatalog::new(catalog, prompt).following(Arc::clone(&self.served))
    }

    /// Path reads where the namespace checks a lock or signatures: each
    /// path is read through the checked catalog
    /// ([`skillstore::Catalog::read_served_path`]), so only files of the
    /// skills it serves are read, at the versions their check digested.
    /// The catalog is loaded and checked again (at most once a call, and
    /// every path read again) when it is older than [`SERVED_MAX_AGE`],
    /// when a read finds a skill changed since its check, and when a read
    /// finds nothing served at a path (a skill added or put back since)
    /// and the catalog is older than [`SERVED_MISS_AGE`]. A load replaces
    /// it ([`PyNamespace::loaded`]), so what an agent is shown is what its
    /// reads see.
    fn served_reads(&self, py: Python<'_>, paths: &[String], limit: u64) -> PyResult<Vec<PyResult<files::PyBlob>>> {
        let parsed: Vec<skillstore_backends::Result<VPath>> = paths
            .iter()
            .map(|p| files::offered(self.inner.sources(), p, false))
            .collect();
        let valid: Vec<VPath> = parsed.iter().filter_map(|p| p.as_ref().ok().cloned()).collect();
        let mut read = self.served_reads_raw(py, &valid, limit).into_iter();
        Ok(parsed
            .into_iter()
            .map(|p| match p {
                Err(e) => Err(crate::errors::backend(py, e)),
                Ok(p) => match read.next().expect("one result per valid path") {
                    Ok(b) => Ok(files::blob(py, &p, b)),
                    Err(e) => Err(crate::errors::core(py, e)),
                },
            })
            .collect())
    }

    /// The reads of [`PyNamespace::served_reads`], of valid paths, one
    /// result per path in order.
    fn served_reads_raw(
        &self,
        py: Python<'_>,
        valid: &[VPath],
        limit: u64,
    ) -> Vec<skillstore::Result<skillstore_backends::Blob>> {
        let read_all = |catalog: Arc<skillstore::Catalog>| {
            block_on(py, async move {
                futures::future::join_all(valid.iter().map(|p| catalog.read_served_path(p, limit))).await
            })
        };
        let catalog = self.served_catalog(py, SERVED_MAX_AGE);
        let withdrawn = catalog.withdrawn_count();
        let mut read = read_all(Arc::clone(&catalog));
        // A read that withdrew a skill (a checked file found gone, grown or
        // changed) may have come after another read of the same skill
        // succeeded: the whole call is read again.
        let withdrew = catalog.withdrawn_count() > withdrawn;
        let changed = |e: &skillstore::Error| skillstore::integrity::pin::is_changed(e);
        let missed = |e: &skillstore::Error| matches!(e, skillstore::Error::Backend(b) if b.kind() == skillstore_backends::ErrorKind::NotFound);
        if withdrew || read.iter().any(|r| matches!(r, Err(e) if changed(e))) {
            read = read_all(self.served_catalog(py, std::time::Duration::ZERO));
        } else if read.iter().any(|r| matches!(r, Err(e) if missed(e))) {
            read = read_all(self.served_catalog(py, SERVED_MISS_AGE));
        }
        read
    }
}
