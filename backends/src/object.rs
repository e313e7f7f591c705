//! [`ObjectStoreBackend`]: any `object_store` store (S3-compatible servers,
//! GCS, Azure, R2, or `object_store`'s in-memory store) under a key prefix.
//!
//! A [`VPath`] becomes a key with `object_store::path::Path::parse` (which
//! refuses `.`/`..` segments instead of encoding them), under the prefix.
//! Reads are one ranged GET of at most `limit + 1` bytes: the object's whole
//! size comes from that response's metadata, so an oversized object is
//! refused without its body being downloaded.

use std::sync::Arc;

use async_trait::async_trait;
use bytes::{Bytes, BytesMut};
use futures::StreamExt;
use object_store::list::{PaginatedListOptions, PaginatedListStore};
use object_store::path::Path as KeyPath;
use object_store::{
    GetOptions, GetRange, ObjectMeta, ObjectStore, ObjectStoreExt, PutMode as StorePutMode, PutOptions, PutPayload,
    UpdateVersion,
};

use crate::backend::{
    Blob, Capabilities, DeepFile, DeepLimits, DeepListing, Entry, EntryKind, Listing, Metadata, PutMode, ReadOptions,
    SkillBackend, Version, grew_past_limit,
};
use crate::error::{Error, ErrorKind, Result};
use crate::vpath::VPath;

/// Requests one batched call keeps in flight. A catalog runs several
/// batches at once; with its default of eight, that is 64 requests.
const REQUESTS_PER_BATCH: usize = 8;

/// A [`SkillBackend`] over an `object_store` store, rooted at a key prefix.
///
/// Cheap to clone. Versions are ETags (or, for stores without them, the
/// modification time and size). Conditional writes map to `PutMode::Create`
/// and `PutMode::Update`; object_store's own retries apply to every request.
#[derive(Clone)]
pub struct ObjectStoreBackend {
    store: Arc<dyn ObjectStore>,
    /// The same store's raw paginated listing, where it has one: used to
    /// list past keys `object_store` cannot parse.
    paginated: Option<Arc<dyn PaginatedListStore>>,
    prefix: KeyPath,
    writable: bool,
    /// Where the store is (endpoint, region, bucket), when known.
    identity: Option<Arc<str>>,
}

/// Requests a tolerant listing may make before giving up.
const MAX_TOLERANT_REQUESTS: usize = 4096;
/// Keys per page of a listing.
const PAGE_KEYS: usize = 1000;

impl std::fmt::Debug for ObjectStoreBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObjectStoreBackend")
            .field("store", &self.store.to_string())
            .field("prefix", &self.prefix.as_ref())
            .field("writable", &self.writable)
            .finish()
    }
}

impl ObjectStoreBackend {
    /// A backend whose root is `prefix` (`""` for the whole store, or
    /// `tenants/acme/skills`). The prefix obeys the same rules as a
    /// [`VPath`]'s segments.
    pub fn new(store: Arc<dyn ObjectStore>, prefix: &str) -> Result<Self> {
        let trimmed = prefix.trim_matches('/');
        let prefix = if trimmed.is_empty() {
            KeyPath::default()
        } else {
            VPath::new(format!("/{trimmed}"))?;
            KeyPath::parse(trimmed).map_err(|e| {
                Error::new(ErrorKind::InvalidPath)
                    .with_detail(format!("bad key prefix `{trimmed}`"))
                    .with_source(e)
            })?
        };
        Ok(ObjectStoreBackend {
            store,
            paginated: None,
            prefix,
            writable: true,
            identity: None,
        })
    }

    /// The same store, refusing `put` and `delete`.
    pub fn read_only(mut self) -> Self {
        self.writable = false;
        self
    }

    /// A backend over the same store rooted at the directory `dir` of this
    /// one (its key prefix extended by `dir`), writable only if this one is.
    pub fn subdir(&self, dir: &VPath) -> Result<ObjectStoreBackend> {
        let prefix = self.key(dir)?;
        Ok(ObjectStoreBackend {
            store: Arc::clone(&self.store),
            paginated: self.paginated.clone(),
            prefix,
            writable: self.writable,
            identity: self.identity.clone(),
        })
    }

    /// Lets listings go past keys `object_store` cannot parse (a control
    /// character, an empty or `..` segment): given the same store's raw
    /// paginated listing, a page that fails to parse is split until the odd
    /// key is alone, that key is reported by
    /// [`SkillBackend::list_detailed`], and the listing resumes after it.
    /// Without it, one such key fails the whole listing.
    pub fn with_paginated_listing(mut self, paginated: Arc<dyn PaginatedListStore>) -> Self {
        self.paginated = Some(paginated);
        self
    }

    /// Names where the store is (say its endpoint, region and bucket), so
    /// that [`SkillBackend::location_id`] can name each directory for
    /// caches kept outside the store. Two backends given the same identity
    /// must reach the same objects. Without it nothing is cached.
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = Some(Arc::from(identity.into()));
        self
    }

    /// The underlying store.
    pub fn store(&self) -> &Arc<dyn ObjectStore> {
        &self.store
    }

    /// The key of `path` under the prefix.
    fn key(&self, path: &VPath) -> Result<KeyPath> {
        if path.is_root() {
            return Ok(self.prefix.clone());
        }
        let raw = if self.prefix.as_ref().is_empty() {
            path.relative_str().to_owned()
        } else {
            format!("{}/{}", self.prefix.as_ref(), path.relative_str())
        };
        KeyPath::parse(&raw).map_err(|e| Error::at(ErrorKind::InvalidPath, path).with_source(e))
    }

    fn check_writable(&self, path: &VPath) -> Result<()> {
        if self.writable {
            Ok(())
        } else {
            Err(Error::at(ErrorKind::ReadOnly, path).with_detail("this store is opened read-only"))
        }
    }

    async fn list_raw(&self, path: &VPath) -> Result<object_store::ListResult> {
        let key = self.key(path)?;
        let prefix = if key.as_ref().is_empty() { None } else { Some(&key) };
        self.store
            .list_with_delimiter(prefix)
            .await
            .map_err(|e| store_error(e, path))
    }

    /// The listing of `path`, and the raw keys or prefixes (relative to
    /// it) that no [`KeyPath`] can hold.
    async fn list_tolerant(&self, path: &VPath) -> Result<(object_store::ListResult, Vec<String>)> {
        let plain = self.list_raw(path).await;
        let paginated = match (&plain, &self.paginated) {
            (Err(e), Some(paginated)) if e.kind() == ErrorKind::InvalidPath => Arc::clone(paginated),
            _ => return plain.map(|listing| (listing, Vec::new())),
        };
        let key = self.key(path)?;
        let prefix = if key.as_ref().is_empty() {
            String::new()
        } else {
            format!("{}/", key.as_ref())
        };
        let mut listing = object_store::ListResult {
            common_prefixes: Vec::new(),
            objects: Vec::new(),
            extensions: Default::default(),
        };
        let mut invalid = Vec::new();
        let mut token: Option<String> = None;
        let mut offset: Option<String> = None;
        let mut max_keys = PAGE_KEYS;
        for _ in 0..MAX_TOLERANT_REQUESTS {
            let options = PaginatedListOptions {
                offset: if token.is_none() { offset.clone() } else { None },
                delimiter: Some("/".into()),
                max_keys: Some(max_keys),
                page_token: token.clone(),
                ..PaginatedListOptions::default()
            };
            let asked = (!prefix.is_empty()).then_some(prefix.as_str());
            match paginated.list_paginated(asked, options).await {
                Ok(page) => {
                    listing.common_prefixes.extend(page.result.common_prefixes);
                    listing.objects.extend(page.result.objects);
                    max_keys = (max_keys * 2).min(PAGE_KEYS);
                    match page.page_token {
                        Some(next) => token = Some(next),
                        None => return Ok((listing, invalid)),
                    }
                }
                Err(object_store::Error::InvalidPath { source }) => {
                    if max_keys > 1 {
                        max_keys /= 2;
                        continue;
                    }
                    let raw = unparsable_key(&source).ok_or_else(|| {
                        Error::at(ErrorKind::InvalidPath, path).with_source(object_store::Error::InvalidPath {
                            source: object_store::path::Error::EmptySegment { path: String::new() },
                        })
                    })?;
                    let relative = raw.strip_prefix(&prefix).unwrap_or(&raw);
                    invalid.push(relative.trim_end_matches('/').escape_debug().to_string());
                    // Resume after the odd key, or past everything under an
                    // odd common prefix.
                    offset = Some(if raw.ends_with('/') {
                        format!("{raw}\u{10FFFF}")
                    } else {
                        raw
                    });
                    token = None;
                    max_keys = PAGE_KEYS;
                }
                Err(e) => return Err(store_error(e, path)),
            }
        }
        Err(Error::at(ErrorKind::Unavailable, path).with_detail("the listing did not end"))
    }

    /// True when some object lives below `path`.
    async fn has_children(&self, path: &VPath) -> Result<bool> {
        let listing = self.list_raw(path).await?;
        Ok(!listing.objects.is_empty() || !listing.common_prefixes.is_empty())
    }

    /// The error for a missing object: a directory, or nothing at all.
    async fn missing(&self, path: &VPath, err: Error) -> Error {
        match self.has_children(path).await {
            Ok(true) => Error::at(ErrorKind::IsADirectory, path),
            _ => err,
        }
    }

    /// One ranged GET, telling a failed request from a body that broke
    /// off (which is worth reading again).
    async fn read_once(&self, path: &VPath, options: ReadOptions) -> Result<Blob, Failure> {
        if path.is_root() {
            return Err(Failure::Request(Error::at(ErrorKind::IsADirectory, path)));
        }
        let key = self.key(path).map_err(Failure::Request)?;
        // Never more than one byte past the limit, even from a server that
        // ignores the range.
        let cap = options.prefix.unwrap_or(u64::MAX).min(options.limit.saturating_add(1));
        if cap == 0 {
            let meta = self
                .store
                .head(&key)
                .await
                .map_err(|e| Failure::Request(store_error(e, path)))?;
            if meta.size > options.limit {
                return Err(Failure::Request(Error::too_large(path, meta.size, options.limit)));
            }
            return Ok(Blob {
                data: Bytes::new(),
                size: meta.size,
                version: version_of(&meta),
            });
        }
        let result = match self.ranged_get(path, &key, cap).await {
            Ok(result) => result,
            Err(e) if e.kind() == ErrorKind::NotFound => return Err(Failure::Request(self.missing(path, e).await)),
            Err(e) => {
                // A range over an empty object is unsatisfiable on S3 (416);
                // a HEAD tells an empty object from a real failure.
                return match self.store.head(&key).await {
                    Ok(meta) if meta.size == 0 => Ok(Blob {
                        data: Bytes::new(),
                        size: 0,
                        version: version_of(&meta),
                    }),
                    _ => Err(Failure::Request(e)),
                };
            }
        };
        let size = result.meta.size;
        if size > options.limit {
            return Err(Failure::Request(Error::too_large(path, size, options.limit)));
        }
        let version = version_of(&result.meta);
        let expected = result.range.end.saturating_sub(result.range.start);
        let mut data = BytesMut::with_capacity(expected.min(cap) as usize);
        let mut stream = result.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| Failure::Body(store_error(e, path)))?;
            let room = (cap - data.len() as u64) as usize;
            data.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if data.len() as u64 >= cap {
                break;
            }
        }
        let read = data.len() as u64;
        if read > options.limit {
            return Err(Failure::Request(grew_past_limit(path, options.limit)));
        }
        if read < expected.min(cap) {
            return Err(Failure::Body(
                Error::at(ErrorKind::Unavailable, path)
                    .with_detail(format!("the response ended after {read} of {expected} bytes")),
            ));
        }
        Ok(Blob {
            data: data.freeze(),
            size,
            version,
        })
    }

    async fn ranged_get(&self, path: &VPath, key: &KeyPath, cap: u64) -> Result<object_store::GetResult> {
        let options = GetOptions {
            range: Some(GetRange::Bounded(0..cap)),
            ..GetOptions::default()
        };
        self.store
            .get_opts(key, options)
            .await
            .map_err(|e| store_error(e, path))
    }
}

/// How one read attempt failed.
enum Failure {
    /// The request failed (after object_store's own retries) or was refused.
    Request(Error),
    /// The response began and its body broke off.
    Body(Error),
}

/// Reads again after a body that broke off, at most this many times.
const BODY_RETRIES: u32 = 3;

/// The version a listing reports: the ETag, or nothing when the store's
/// listings carry none (a version from other metadata would not match the
/// one a read reports).
fn listed_version(meta: &ObjectMeta) -> Option<Version> {
    meta.e_tag.as_ref().map(|tag| Version::new(tag.clone()))
}

fn version_of(meta: &ObjectMeta) -> Version {
    match &meta.e_tag {
        Some(tag) => Version::new(tag.clone()),
        None => Version::new(format!(
            "{}-{}",
            meta.last_modified.timestamp_nanos_opt().unwrap_or(0),
            meta.size
        )),
    }
}

/// Maps an `object_store` error to a kind. The store's own message names
/// the endpoint, the bucket and the key; it stays in the source, for logs,
/// and is never shown.
/// The raw key or prefix a listing could not parse, as the parse error
/// names it.
fn unparsable_key(err: &object_store::path::Error) -> Option<String> {
    use object_store::path::Error as P;
    match err {
        P::EmptySegment { path } | P::BadSegment { path, .. } => Some(path.clone()),
        _ => None,
    }
}

fn store_error(err: object_store::Error, path: &VPath) -> Error {
    use object_store::Error as E;
    let kind = match &err {
        E::NotFound { .. } => ErrorKind::NotFound,
        E::AlreadyExists { .. } => ErrorKind::AlreadyExists,
        E::Precondition { .. } => ErrorKind::VersionConflict,
        E::InvalidPath { .. } => ErrorKind::InvalidPath,
        E::NotSupported { .. } | E::NotImplemented { .. } => ErrorKind::Unsupported,
        E::PermissionDenied { .. } | E::Unauthenticated { .. } => ErrorKind::PermissionDenied,
        E::Generic { .. } => ErrorKind::Unavailable,
        _ => ErrorKind::Other,
    };
    Error::at(kind, path).with_source(err)
}

#[async_trait]
impl SkillBackend for ObjectStoreBackend {
    fn capabilities(&self) -> Capabilities {
        let caps = if self.writable {
            Capabilities::READ_WRITE
        } else {
            Capabilities::READ_ONLY
        };
        caps.with_deep_list(true)
    }

    /// One delimiter-less listing of the keys under `dir`, page after page
    /// (1,000 keys each on S3), stopped by `limits`. A key no [`VPath`] can
    /// hold fails it with [`ErrorKind::InvalidPath`].
    async fn list_deep(&self, dir: &VPath, limits: DeepLimits) -> Result<DeepListing> {
        let key = self.key(dir)?;
        let strip = if key.as_ref().is_empty() {
            String::new()
        } else {
            format!("{}/", key.as_ref())
        };
        let prefix = if key.as_ref().is_empty() { None } else { Some(&key) };
        let mut stream = self.store.list(prefix);
        let mut listing = DeepListing::default();
        let mut dirs: std::collections::HashSet<String> = std::collections::HashSet::new();
        while let Some(item) = stream.next().await {
            let meta = item.map_err(|e| store_error(e, dir))?;
            let Some(relative) = meta.location.as_ref().strip_prefix(&strip) else {
                continue;
            };
            if relative.is_empty() {
                continue;
            }
            if limits.skips(relative) {
                continue;
            }
            if !relative.split('/').all(crate::vpath::is_valid_segment) || dir.join(relative).is_err() {
                return Err(Error::at(ErrorKind::InvalidPath, dir).with_detail("a key below it cannot be a path"));
            }
            if let Some((top, _)) = relative.split_once('/')
                && !dirs.contains(top)
            {
                dirs.insert(top.to_owned());
            }
            listing.files.push(DeepFile {
                relative: relative.to_owned(),
                size: Some(meta.size),
                version: listed_version(&meta),
            });
            let n = listing.files.len();
            if n > limits.max_files || (n > 2000 && n > limits.max_files_per_dir.saturating_mul(dirs.len())) {
                listing.files.truncate(limits.max_files);
                listing.truncated = true;
                break;
            }
        }
        // A key that is also a prefix (`a/SKILL.md` beside `a/SKILL.md/x`,
        // or a directory marker) is not a file here either, as in
        // `list_detailed`.
        let prefixes: std::collections::HashSet<String> = listing
            .files
            .iter()
            .flat_map(|f| {
                f.relative
                    .match_indices('/')
                    .map(|(i, _)| f.relative[..i].to_owned())
                    .collect::<Vec<_>>()
            })
            .collect();
        listing.files.retain(|f| !prefixes.contains(&f.relative));
        Ok(listing)
    }

    fn location_id(&self, dir: &VPath) -> Option<String> {
        let identity = self.identity.as_ref()?;
        let key = self.key(dir).ok()?;
        Some(format!("{identity}|{}", key.as_ref()))
    }

    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        Ok(self.list_detailed(dir).await?.entries)
    }

    /// A directory's listing. A directory marker (an empty object whose
    /// key is the directory's own, `dir/`) is never a file: the directory
    /// is listed, empty when the marker is all it holds. A name that is an
    /// object and a prefix at once (`a/file` beside `a/file/inner.txt`) is
    /// listed as the directory, and the object as [`EntryKind::Other`]:
    /// not a regular file, so no walk or copy serves it beside the files
    /// below it.
    async fn list_detailed(&self, dir: &VPath) -> Result<Listing> {
        let (listing, mut invalid) = self.list_tolerant(dir).await?;
        let own_key = self.key(dir)?;
        let mut entries = Vec::with_capacity(listing.common_prefixes.len() + listing.objects.len());
        let mut odd = |name: &str| invalid.push(name.escape_debug().to_string());
        let prefixes: std::collections::HashSet<&str> =
            listing.common_prefixes.iter().filter_map(|p| p.filename()).collect();
        let mut marker = false;
        for prefix in &listing.common_prefixes {
            let Some(name) = prefix.filename() else { continue };
            if dir.join(name).is_err() {
                odd(name);
                continue;
            }
            {
                entries.push(Entry {
                    name: name.to_owned(),
                    kind: EntryKind::Dir,
                    size: None,
                    version: None,
                    symlink: false,
                });
            }
        }
        for meta in &listing.objects {
            if meta.location == own_key {
                marker = true;
                continue;
            }
            let Some(name) = meta.location.filename() else { continue };
            if dir.join(name).is_err() {
                odd(name);
                continue;
            }
            let both = prefixes.contains(name);
            entries.push(Entry {
                name: name.to_owned(),
                kind: if both { EntryKind::Other } else { EntryKind::File },
                size: (!both).then_some(meta.size),
                version: if both { None } else { listed_version(meta) },
                symlink: false,
            });
        }
        if entries.is_empty() && invalid.is_empty() && !dir.is_root() && !marker {
            let key = self.key(dir)?;
            return Err(match self.store.head(&key).await {
                Ok(_) => Error::at(ErrorKind::NotADirectory, dir),
                Err(_) => Error::at(ErrorKind::NotFound, dir),
            });
        }
        Ok(Listing { entries, invalid })
    }

    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        if path.is_root() {
            return Ok(Metadata {
                kind: EntryKind::Dir,
                size: None,
                version: None,
            });
        }
        let key = self.key(path)?;
        match self.store.head(&key).await {
            Ok(meta) => Ok(Metadata {
                kind: EntryKind::File,
                size: Some(meta.size),
                version: Some(version_of(&meta)),
            }),
            Err(object_store::Error::NotFound { .. }) if self.has_children(path).await? => Ok(Metadata {
                kind: EntryKind::Dir,
                size: None,
                version: None,
            }),
            Err(e) => Err(store_error(e, path)),
        }
    }

    /// Keys hold no links: a confined read stays in its directory by its
    /// path.
    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        options.confining_dir(path)?;
        let mut attempt = 0;
        loop {
            match self.read_once(path, options).await {
                Err(Failure::Body(e)) if attempt < BODY_RETRIES => {
                    attempt += 1;
                    tracing::debug!(%path, attempt, error = %e, "a response body failed; reading again");
                    tokio::time::sleep(std::time::Duration::from_millis(20 << attempt)).await;
                }
                Err(Failure::Body(e) | Failure::Request(e)) => return Err(e),
                Ok(blob) => return Ok(blob),
            }
        }
    }

    /// Reads a batch at most [`REQUESTS_PER_BATCH`] requests at a time, in
    /// order.
    async fn read_many(&self, paths: &[VPath], options: ReadOptions) -> Vec<Result<Blob>> {
        let reads: Vec<_> = paths.iter().map(|p| self.read(p, options)).collect();
        futures::stream::iter(reads)
            .buffered(REQUESTS_PER_BATCH)
            .collect()
            .await
    }

    /// Stats a batch at most [`REQUESTS_PER_BATCH`] requests at a time.
    async fn stat_many(&self, paths: &[VPath]) -> Vec<Result<Metadata>> {
        let stats: Vec<_> = paths.iter().map(|p| self.stat(p)).collect();
        futures::stream::iter(stats)
            .buffered(REQUESTS_PER_BATCH)
            .collect()
            .await
    }

    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> Result<Version> {
        self.check_writable(path)?;
        if path.is_root() {
            return Err(Error::at(ErrorKind::IsADirectory, path));
        }
        let key = self.key(path)?;
        let store_mode = match &mode {
            PutMode::Overwrite => StorePutMode::Overwrite,
            PutMode::Create => StorePutMode::Create,
            PutMode::IfVersion(v) => StorePutMode::Update(UpdateVersion {
                e_tag: Some(v.as_str().to_owned()),
                version: None,
            }),
        };
        let options = PutOptions {
            mode: store_mode,
            ..PutOptions::default()
        };
        match self.store.put_opts(&key, PutPayload::from_bytes(data), options).await {
            Ok(result) => Ok(match result.e_tag {
                Some(tag) => Version::new(tag),
                None => self.stat(path).await?.version.unwrap_or_else(|| Version::new("")),
            }),
            Err(e) => {
                let err = store_error(e, path);
                Err(match (&mode, err.kind()) {
                    (PutMode::Create, ErrorKind::VersionConflict) => Error::at(ErrorKind::AlreadyExists, path),
                    (PutMode::IfVersion(_), ErrorKind::NotFound | ErrorKind::AlreadyExists) => {
                        Error::at(ErrorKind::VersionConflict, path).with_detail("the object changed or is gone")
                    }
                    _ => err,
                })
            }
        }
    }

    async fn delete(&self, path: &VPath) -> Result<()> {
        self.check_writable(path)?;
        let key = self.key(path)?;
        if let Err(e) = self.store.head(&key).await {
            let err = store_error(e, path);
            return Err(if err.kind() == ErrorKind::NotFound {
                self.missing(path, err).await
            } else {
                err
            });
        }
        self.store.delete(&key).await.map_err(|e| store_error(e, path))
    }
}
