//! A source that serves releases: the backend of a source with a
//! selection, where `/NAME/...` is the selected release's files for every
//! skill the selection covers.
//!
//! The choice is made again at every listing of the source's root (what
//! each catalog load and refresh starts with), and at the first call before
//! any. For a selected skill:
//!
//! - with a matching release, `/NAME/` is that release's files directory:
//!   only the files its manifest names are listed, stated or read, every
//!   read is confined to that directory, and a whole read is refused unless
//!   its bytes are the ones the manifest hashed;
//! - with none, `/NAME/` is listed (so the catalog meets it) and every read
//!   below it fails with `release_not_found`: the skill is not served, and
//!   the catalog says why in a diagnostic of that kind.
//!
//! Every other path (skills the selection does not cover, `.releases/`
//! itself) is the source's own. Nothing is ever written through it.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, RwLock};

use async_trait::async_trait;
use bytes::Bytes;
use skillstore_backends::{
    Blob, Capabilities, DeepLimits, DeepListing, Entry, EntryKind, ErrorKind, Layered, Listing, Metadata, PutMode,
    ReadOptions, SkillBackend, VPath, Version,
};

use super::layout::{self, RELEASES_DIR};
use super::manifest::Manifest;
use super::selection::Selection;
use super::{select, store};
use crate::integrity::digest::sha256_hex;

/// What a selected skill is served as.
#[derive(Debug, Clone)]
enum Served {
    /// A release: its manifest and its files directory.
    Release(Arc<Manifest>, VPath),
    /// Nothing matched the selector (shown in the message).
    Missing(String),
}

/// Where a path leads.
enum Route {
    /// The source's own path.
    Own,
    /// Below a served release: the path there, and the path relative to
    /// the skill's directory (empty for the directory itself).
    Release(Arc<Manifest>, VPath, VPath, String),
    /// Below a selected skill with no release: why.
    Missing(String),
}

/// The backend of a source with a selection (see the module's description).
#[derive(Debug)]
pub struct SelectedReleases {
    inner: Arc<dyn SkillBackend>,
    selection: Selection,
    served: RwLock<Option<Arc<HashMap<String, Served>>>>,
    /// Manifests read, by skill and version: a release never changes, so
    /// each is read once (at most [`MAX_KEPT_MANIFESTS`], then afresh).
    manifests: Mutex<HashMap<(String, semver::Version), Arc<Manifest>>>,
}

/// The most manifests kept by one source.
const MAX_KEPT_MANIFESTS: usize = 4096;

impl SelectedReleases {
    /// The source whose own backend (rooted at its directory) is `inner`,
    /// serving what `selection` selects.
    pub fn new(inner: Arc<dyn SkillBackend>, selection: Selection) -> Self {
        SelectedReleases {
            inner,
            selection,
            served: RwLock::new(None),
            manifests: Mutex::new(HashMap::new()),
        }
    }

    /// The version served for the skill `name`, when a release is served
    /// for it (as chosen at the last listing of the source).
    pub fn served_version(&self, name: &str) -> Option<String> {
        let served = self.served.read().unwrap_or_else(|e| e.into_inner()).clone()?;
        match served.get(name)? {
            Served::Release(manifest, _) => Some(manifest.version.clone()),
            Served::Missing(_) => None,
        }
    }

    /// Chooses again: every skill the source holds or has released, each
    /// the selection covers given its release (or none).
    async fn choose(&self, own: &[Entry]) -> Arc<HashMap<String, Served>> {
        let root = VPath::root();
        let mut names: Vec<String> = own
            .iter()
            .filter(|e| e.kind != EntryKind::File && !e.name.starts_with('.'))
            .map(|e| e.name.clone())
            .collect();
        if let Ok(released) = self.inner.list(&root.join(RELEASES_DIR).expect("a segment")).await {
            names.extend(
                released
                    .into_iter()
                    .filter(|e| e.kind == EntryKind::Dir)
                    .map(|e| e.name),
            );
        }
        names.extend(self.selection.named().map(str::to_owned));
        names.sort();
        names.dedup();
        let mut served = HashMap::new();
        for name in names {
            if name.starts_with('.') || !skillstore_backends::is_valid_segment(&name) {
                continue;
            }
            let Some(selector) = self.selection.for_skill(&name) else {
                continue;
            };
            let chosen = self.release_of(&name, selector).await;
            let entry = match chosen {
                Ok(Some((manifest, dir))) => Served::Release(manifest, dir),
                Ok(None) => Served::Missing(format!("no release of `{name}` matches `{selector}`")),
                Err(e) => Served::Missing(format!("the releases of `{name}` cannot be read: {e}")),
            };
            served.insert(name, entry);
        }
        let served = Arc::new(served);
        *self.served.write().unwrap_or_else(|e| e.into_inner()) = Some(Arc::clone(&served));
        served
    }

    async fn release_of(
        &self,
        name: &str,
        selector: &super::Selector,
    ) -> crate::Result<Option<(Arc<Manifest>, VPath)>> {
        let root = VPath::root();
        let existing = store::versions(&*self.inner, &root, name).await?;
        if existing.is_empty() {
            return Ok(None);
        }
        let (channels, _) = store::channels(&*self.inner, &root, name).await?;
        let Some(version) = select::select(selector, &existing, &channels) else {
            return Ok(None);
        };
        let key = (name.to_owned(), version.clone());
        let kept = self
            .manifests
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
            .cloned();
        let manifest = match kept {
            Some(manifest) => manifest,
            None => {
                let Some(manifest) = store::manifest(&*self.inner, &root, name, &version).await? else {
                    return Ok(None);
                };
                let manifest = Arc::new(manifest);
                let mut manifests = self.manifests.lock().unwrap_or_else(|e| e.into_inner());
                if manifests.len() >= MAX_KEPT_MANIFESTS {
                    manifests.clear();
                }
                manifests.insert(key, Arc::clone(&manifest));
                manifest
            }
        };
        let dir = layout::files_dir(&root, name, &version, &manifest.files_id)?;
        Ok(Some((manifest, dir)))
    }

    /// The choice, made now when none was made yet.
    async fn served(&self) -> Arc<HashMap<String, Served>> {
        if let Some(served) = self.served.read().unwrap_or_else(|e| e.into_inner()).clone() {
            return served;
        }
        let own = self.inner.list(&VPath::root()).await.unwrap_or_default();
        self.choose(&own).await
    }

    async fn route(&self, path: &VPath) -> Route {
        let mut segments = path.segments();
        let Some(name) = segments.next() else {
            return Route::Own;
        };
        let rest: Vec<&str> = segments.collect();
        let served = self.served().await;
        match served.get(name) {
            None => Route::Own,
            Some(Served::Missing(message)) => Route::Missing(message.clone()),
            Some(Served::Release(manifest, dir)) => {
                let relative = rest.join("/");
                let there = if relative.is_empty() {
                    dir.clone()
                } else {
                    match dir.join(&relative) {
                        Ok(there) => there,
                        Err(_) => return Route::Missing("not a path of the release".into()),
                    }
                };
                Route::Release(Arc::clone(manifest), dir.clone(), there, relative)
            }
        }
    }

    fn missing(path: &VPath, message: &str) -> skillstore_backends::Error {
        skillstore_backends::Error::at(ErrorKind::ReleaseNotFound, path).with_detail(message.to_owned())
    }

    /// The root's entries: the source's own, a directory for every selected
    /// skill (released or not), with the choice made again.
    async fn root_listing(&self) -> skillstore_backends::Result<Listing> {
        let mut own = self.inner.list_detailed(&VPath::root()).await?;
        let served = self.choose(&own.entries).await;
        own.entries.retain(|e| !served.contains_key(&e.name));
        for name in served.keys() {
            own.entries.push(Entry {
                name: name.clone(),
                kind: EntryKind::Dir,
                size: None,
                version: None,
                symlink: false,
            });
        }
        own.entries.sort_by(|a, b| a.name.cmp(&b.name));
        Ok(own)
    }

    /// The entries of a directory of a release: only what its manifest
    /// names (files, and directories on the way to them).
    async fn release_listing(
        &self,
        manifest: &Manifest,
        there: &VPath,
        relative: &str,
    ) -> skillstore_backends::Result<Vec<Entry>> {
        let prefix = if relative.is_empty() {
            String::new()
        } else {
            format!("{relative}/")
        };
        let mut wanted: BTreeMap<&str, EntryKind> = BTreeMap::new();
        for file in &manifest.files {
            if let Some(below) = file.path.strip_prefix(prefix.as_str()) {
                match below.split_once('/') {
                    Some((dir, _)) => wanted.entry(dir).or_insert(EntryKind::Dir),
                    None => wanted.entry(below).or_insert(EntryKind::File),
                };
            }
        }
        let entries = self.inner.list(there).await?;
        Ok(entries
            .into_iter()
            .filter(|e| !e.symlink && wanted.get(e.name.as_str()) == Some(&e.kind))
            .collect())
    }
}

/// Read-only capabilities, listed directory by directory, with the links
/// `inner` may hold.
fn read_only(inner: Capabilities) -> Capabilities {
    let mut capabilities = Capabilities::READ_ONLY;
    capabilities.symlinks = inner.symlinks;
    capabilities
}

/// `options` for a path moved from `/NAME/...` to `dir/...`: a read
/// confined to the skill's directory is confined to the release's.
fn moved(options: ReadOptions, dir: &VPath) -> ReadOptions {
    match options.confinement {
        Some(segments) if segments >= 1 => options.confined(segments - 1 + dir.segments().count()),
        _ => options,
    }
}

#[async_trait]
impl Layered for SelectedReleases {
    fn inner(&self) -> &dyn SkillBackend {
        &*self.inner
    }

    fn capabilities(&self) -> Capabilities {
        // Listed directory by directory, so the choice is made at each
        // listing of the root; nothing is written.
        read_only(self.inner.capabilities())
    }

    fn capabilities_at(&self, path: &VPath) -> Capabilities {
        read_only(self.inner.capabilities_at(path))
    }

    async fn list(&self, dir: &VPath) -> skillstore_backends::Result<Vec<Entry>> {
        if dir.is_root() {
            return Ok(self.root_listing().await?.entries);
        }
        match self.route(dir).await {
            Route::Own => self.inner.list(dir).await,
            Route::Missing(message) => Err(Self::missing(dir, &message)),
            Route::Release(manifest, _, there, relative) => self.release_listing(&manifest, &there, &relative).await,
        }
    }

    async fn list_detailed(&self, dir: &VPath) -> skillstore_backends::Result<Listing> {
        if dir.is_root() {
            return self.root_listing().await;
        }
        match self.route(dir).await {
            Route::Own => self.inner.list_detailed(dir).await,
            _ => Ok(Listing {
                entries: Layered::list(self, dir).await?,
                invalid: Vec::new(),
            }),
        }
    }

    async fn list_deep(&self, dir: &VPath, _limits: DeepLimits) -> skillstore_backends::Result<DeepListing> {
        Err(skillstore_backends::Error::at(ErrorKind::Unsupported, dir))
    }

    async fn stat(&self, path: &VPath) -> skillstore_backends::Result<Metadata> {
        match self.route(path).await {
            Route::Own => self.inner.stat(path).await,
            Route::Missing(message) => Err(Self::missing(path, &message)),
            Route::Release(manifest, _, there, relative) => {
                let prefix = format!("{relative}/");
                let known = relative.is_empty()
                    || manifest.file(&relative).is_some()
                    || manifest.files.iter().any(|f| f.path.starts_with(&prefix));
                if !known {
                    return Err(skillstore_backends::Error::at(ErrorKind::NotFound, path));
                }
                self.inner.stat(&there).await
            }
        }
    }

    async fn read(&self, path: &VPath, options: ReadOptions) -> skillstore_backends::Result<Blob> {
        match self.route(path).await {
            Route::Own => self.inner.read(path, options).await,
            Route::Missing(message) => Err(Self::missing(path, &message)),
            Route::Release(manifest, dir, there, relative) => {
                let Some(file) = manifest.file(&relative) else {
                    return Err(skillstore_backends::Error::at(ErrorKind::NotFound, path));
                };
                let blob = self.inner.read(&there, moved(options, &dir)).await?;
                let whole = blob.data.len() as u64 == blob.size;
                if blob.size != file.size || whole && sha256_hex(&blob.data) != file.sha256 {
                    return Err(
                        skillstore_backends::Error::at(ErrorKind::Other, path).with_detail(format!(
                            "not the file released in `{}@{}`: its bytes changed in storage",
                            manifest.skill, manifest.version
                        )),
                    );
                }
                Ok(blob)
            }
        }
    }

    async fn put(&self, path: &VPath, _data: Bytes, _mode: PutMode) -> skillstore_backends::Result<Version> {
        Err(skillstore_backends::Error::at(ErrorKind::ReadOnly, path))
    }

    async fn delete(&self, path: &VPath) -> skillstore_backends::Result<()> {
        Err(skillstore_backends::Error::at(ErrorKind::ReadOnly, path))
    }

    async fn delete_if_version(&self, path: &VPath, _expected: &Version) -> skillstore_backends::Result<()> {
        Err(skillstore_backends::Error::at(ErrorKind::ReadOnly, path))
    }

    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<skillstore_backends::Result<Blob>> {
        futures::future::join_all(paths.iter().map(|p| Layered::read(self, p, options))).await
    }

    async fn stat_many(&self, paths: &[VPath]) -> Vec<skillstore_backends::Result<Metadata>> {
        futures::future::join_all(paths.iter().map(|p| Layered::stat(self, p))).await
    }

    async fn list_many(&self, dirs: &[VPath]) -> Vec<skillstore_backends::Result<Vec<Entry>>> {
        futures::future::join_all(dirs.iter().map(|d| Layered::list(self, d))).await
    }
}
