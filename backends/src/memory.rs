//! [`MemoryBackend`]: files held in memory, such as an agent's own state.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::{Arc, RwLock};

use async_trait::async_trait;
use bytes::Bytes;

use crate::backend::{Blob, Capabilities, Entry, EntryKind, Metadata, PutMode, ReadOptions, SkillBackend, Version};
use crate::error::{Error, ErrorKind, Result};
use crate::vpath::VPath;

/// An in-memory tree of files keyed by [`VPath`].
///
/// Directories are implied by the paths of the files under them. Cloning is
/// cheap and clones share the same files. Every write gets a fresh version,
/// unique within the backend. All operations are safe from many threads.
#[derive(Clone, Default)]
pub struct MemoryBackend {
    state: Arc<RwLock<State>>,
}

#[derive(Default)]
struct State {
    files: BTreeMap<String, Object>,
    writes: u64,
}

#[derive(Clone)]
struct Object {
    data: Bytes,
    version: Version,
}

impl std::fmt::Debug for MemoryBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let files = self.read_state().files.len();
        f.debug_struct("MemoryBackend").field("files", &files).finish()
    }
}

impl MemoryBackend {
    /// An empty backend.
    pub fn new() -> Self {
        Self::default()
    }

    /// A backend holding the files of a flat JSON object mapping virtual
    /// paths to UTF-8 contents (`{"/base/x/SKILL.md": "---\n..."}`), the
    /// format `gen_fixture.py --json` writes. Every key must be a valid
    /// [`VPath`], and no file may sit where another needs a directory.
    pub fn from_json(json: &str) -> Result<Self> {
        let map: BTreeMap<String, String> = serde_json::from_str(json).map_err(|e| {
            Error::new(ErrorKind::Other)
                .with_detail(format!("not a flat JSON object of path to text: {e}"))
                .with_source(e)
        })?;
        let backend = Self::new();
        for (key, content) in map {
            let path = VPath::new(&key)?;
            backend.insert(&path, Bytes::from(content), &PutMode::Overwrite)?;
        }
        Ok(backend)
    }

    /// The files as a flat JSON object, the inverse of
    /// [`MemoryBackend::from_json`]. Files that are not UTF-8 are refused.
    pub fn to_json(&self) -> Result<String> {
        let state = self.read_state();
        let mut map = BTreeMap::new();
        for (key, object) in &state.files {
            let text = std::str::from_utf8(&object.data).map_err(|e| {
                let path = VPath::new(key).expect("keys are valid paths");
                Error::at(ErrorKind::Other, &path)
                    .with_detail("not UTF-8; JSON holds text only")
                    .with_source(e)
            })?;
            map.insert(key.as_str(), text);
        }
        serde_json::to_string(&map).map_err(|e| Error::new(ErrorKind::Other).with_source(e))
    }

    /// How many files the backend holds.
    pub fn len(&self) -> usize {
        self.read_state().files.len()
    }

    /// True when the backend holds no file.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn read_state(&self) -> std::sync::RwLockReadGuard<'_, State> {
        // A panic while holding the lock cannot leave `State` half-updated:
        // every mutation is a single map operation.
        self.state.read().unwrap_or_else(|p| p.into_inner())
    }

    fn write_state(&self) -> std::sync::RwLockWriteGuard<'_, State> {
        self.state.write().unwrap_or_else(|p| p.into_inner())
    }

    fn insert(&self, path: &VPath, data: Bytes, mode: &PutMode) -> Result<Version> {
        if path.is_root() {
            return Err(Error::at(ErrorKind::IsADirectory, path));
        }
        let mut state = self.write_state();
        if state.is_dir(path.as_str()) {
            return Err(Error::at(ErrorKind::IsADirectory, path));
        }
        let mut ancestor = path.parent();
        while let Some(dir) = ancestor.filter(|d| !d.is_root()) {
            if state.files.contains_key(dir.as_str()) {
                return Err(Error::at(ErrorKind::NotADirectory, &dir).with_detail(format!("cannot write {path}")));
            }
            ancestor = dir.parent();
        }
        let current = state.files.get(path.as_str()).map(|o| o.version.clone());
        match (mode, current) {
            (PutMode::Overwrite, _) => {}
            (PutMode::Create, Some(_)) => return Err(Error::at(ErrorKind::AlreadyExists, path)),
            (PutMode::Create, None) => {}
            (PutMode::IfVersion(expected), Some(v)) if v == *expected => {}
            (PutMode::IfVersion(expected), found) => {
                return Err(Error::version_conflict(path, expected, found.as_ref()));
            }
        }
        state.writes += 1;
        let version = version_of(state.writes);
        state.files.insert(
            path.as_str().to_owned(),
            Object {
                data,
                version: version.clone(),
            },
        );
        Ok(version)
    }
}

impl State {
    fn is_dir(&self, path: &str) -> bool {
        if path == "/" {
            return true;
        }
        let prefix = format!("{path}/");
        self.files
            .range::<str, _>((Bound::Included(prefix.as_str()), Bound::Unbounded))
            .next()
            .is_some_and(|(k, _)| k.starts_with(&prefix))
    }
}

fn version_of(counter: u64) -> Version {
    Version::new(format!("m{counter}"))
}

#[async_trait]
impl SkillBackend for MemoryBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            if_version_delete: true,
            ..Capabilities::READ_WRITE
        }
    }

    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        let state = self.read_state();
        if state.files.contains_key(dir.as_str()) {
            return Err(Error::at(ErrorKind::NotADirectory, dir));
        }
        let prefix = if dir.is_root() {
            "/".to_owned()
        } else {
            format!("{dir}/")
        };
        let mut entries = Vec::new();
        let mut start = prefix.clone();
        loop {
            let next = state
                .files
                .range::<str, _>((Bound::Included(start.as_str()), Bound::Unbounded))
                .next();
            let Some((key, object)) = next.filter(|(k, _)| k.starts_with(&prefix)) else {
                break;
            };
            let rest = &key[prefix.len()..];
            match rest.split_once('/') {
                None => {
                    entries.push(Entry {
                        name: rest.to_owned(),
                        kind: EntryKind::File,
                        size: Some(object.data.len() as u64),
                        version: Some(object.version.clone()),
                        symlink: false,
                    });
                    start = format!("{key}\0");
                }
                Some((child, _)) => {
                    entries.push(Entry {
                        name: child.to_owned(),
                        kind: EntryKind::Dir,
                        size: None,
                        version: None,
                        symlink: false,
                    });
                    // '0' is the character after '/': skip the child's subtree.
                    start = format!("{prefix}{child}0");
                }
            }
        }
        if entries.is_empty() && !dir.is_root() {
            return Err(Error::at(ErrorKind::NotFound, dir));
        }
        Ok(entries)
    }

    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        let state = self.read_state();
        if let Some(object) = state.files.get(path.as_str()) {
            return Ok(Metadata {
                kind: EntryKind::File,
                size: Some(object.data.len() as u64),
                version: Some(object.version.clone()),
            });
        }
        if state.is_dir(path.as_str()) {
            return Ok(Metadata {
                kind: EntryKind::Dir,
                size: None,
                version: None,
            });
        }
        Err(Error::at(ErrorKind::NotFound, path))
    }

    /// Holds no links: a confined read stays in its directory by its path.
    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        options.confining_dir(path)?;
        let object = {
            let state = self.read_state();
            match state.files.get(path.as_str()) {
                Some(object) => object.clone(),
                None if state.is_dir(path.as_str()) => return Err(Error::at(ErrorKind::IsADirectory, path)),
                None => return Err(Error::at(ErrorKind::NotFound, path)),
            }
        };
        let size = object.data.len() as u64;
        if size > options.limit {
            return Err(Error::too_large(path, size, options.limit));
        }
        let wanted = options.wanted(size) as usize;
        Ok(Blob {
            data: object.data.slice(..wanted),
            size,
            version: object.version,
        })
    }

    fn preferred_batch(&self) -> usize {
        256
    }

    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        self.insert(path, data, &mode)
    }

    async fn delete(&self, path: &VPath) -> Result<()> {
        let mut state = self.write_state();
        if state.files.remove(path.as_str()).is_some() {
            return Ok(());
        }
        if state.is_dir(path.as_str()) {
            return Err(Error::at(ErrorKind::IsADirectory, path));
        }
        Err(Error::at(ErrorKind::NotFound, path))
    }

    async fn delete_if_version(&self, path: &VPath, expected: &Version) -> Result<()> {
        let mut state = self.write_state();
        if state.is_dir(path.as_str()) {
            return Err(Error::at(ErrorKind::IsADirectory, path));
        }
        let found = state.files.get(path.as_str()).map(|o| o.version.clone());
        if found.as_ref() != Some(expected) {
            return Err(Error::version_conflict(path, expected, found.as_ref()));
        }
        state.files.remove(path.as_str());
        Ok(())
    }
}
