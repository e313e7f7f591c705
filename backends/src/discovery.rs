//! An Agent Skills discovery endpoint (`/.well-known/agent-skills/`, RFC
//! 8615) as a read-only backend: the skills an index lists, each at
//! `/NAME/...`.
//!
//! **What is trusted.** Nothing the endpoint says. The index is fetched
//! with a byte bound and a timeout; its `$schema` must be the 0.2.0 one
//! (entries with `type`, `url`, `digest`) or absent (the 0.1 form, with
//! `files` lists, read from the legacy `/.well-known/skills/` path when
//! the new one has no index). Each entry is taken or refused on its own:
//! a name against the specification's naming rule is listed as a name no
//! path can hold ([`Listing::invalid`]); a duplicated name, an unknown
//! `type`, a malformed digest, a URL off the index's origin, a download
//! over its bound, bytes that do not match the digest, or an archive the
//! [`Unpack`] refuses (traversal, links, bombs, ...) make that skill's
//! directory answer with the refusal, so a catalog reports it once and
//! loads the rest. Every byte is checked against its digest before any of
//! it is used. Redirects are followed only within the index's origin.
//!
//! **Refresh.** Listing the root revalidates the index (`If-None-Match`
//! with its ETag: one request when nothing changed) and downloads only the
//! entries whose digest changed. With a cache directory
//! ([`DiscoveryBackend::with_cache`]), verified artifacts are kept on disk
//! by digest, so a new process downloads only what it has not verified
//! before; a cached artifact is checked against its digest again before
//! use. Verified files are held in memory and
//! read from there under every read guard of [`MemoryBackend`], so a
//! file's version is stable while its entry's digest is.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use sha2::{Digest, Sha256};

use crate::backend::{Blob, Capabilities, Entry, Listing, Metadata, PutMode, ReadOptions, SkillBackend};
use crate::error::{Error, ErrorKind, Result};
use crate::memory::MemoryBackend;
use crate::vpath::VPath;

/// The `$schema` of a 0.2.0 index.
pub const SCHEMA_V2: &str = "https://schemas.agentskills.io/discovery/0.2.0/schema.json";

/// Unpacks a rooted skill archive (`SKILL.md` at its root): the files as
/// paths relative to the skill's directory, or why it is refused (a
/// stable snake_case kind and a message). The skillstore crate supplies
/// its archive reader, so every refusal of that reader applies.
pub trait Unpack: Send + Sync + fmt::Debug {
    /// The files of the archive `bytes` of the skill `name`.
    fn unpack(&self, name: &str, bytes: &[u8]) -> std::result::Result<Vec<(String, Bytes)>, (String, String)>;
}

/// The bounds a discovery endpoint is read within.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct DiscoveryLimits {
    /// The largest index, in bytes (default 8 MiB).
    pub max_index_bytes: u64,
    /// The most entries taken from an index (default 10,000); past it the
    /// rest are left out, with a warning in the log.
    pub max_entries: usize,
    /// The largest archive downloaded, in bytes (default 64 MiB); a
    /// `skill-md` artifact, or a file of a 0.1 entry, is bounded by the
    /// read limit (10 MiB).
    pub max_artifact_bytes: u64,
    /// The most files a 0.1 entry may list (default 1,000).
    pub max_legacy_files: usize,
    /// The longest one request may take, its body included (default 30 s),
    /// so a server that trickles or never ends its body is cut off.
    pub timeout: Duration,
    /// The longest a connection may take to open (default 10 s).
    pub connect_timeout: Duration,
    /// The longest the downloads of one load may take together (default
    /// 120 s); an entry not delivered by then is refused as unavailable
    /// and tried again at the next load.
    pub load_timeout: Duration,
    /// The most downloads in flight at once (default 8).
    pub concurrent_downloads: usize,
}

impl Default for DiscoveryLimits {
    fn default() -> Self {
        DiscoveryLimits {
            max_index_bytes: 8 * 1024 * 1024,
            max_entries: 10_000,
            max_artifact_bytes: 64 * 1024 * 1024,
            max_legacy_files: 1_000,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            load_timeout: Duration::from_secs(120),
            concurrent_downloads: 8,
        }
    }
}

/// What is known of the endpoint after the last good index.
#[derive(Default)]
struct Known {
    /// The index URL that answered, its ETag, and when it was read.
    index: Option<(reqwest::Url, Option<String>)>,
    /// By skill name: the digest its files were loaded at (0.1 entries:
    /// the hash of the entry as listed).
    loaded: HashMap<String, String>,
    /// By skill name: why its entry was refused.
    refused: BTreeMap<String, (ErrorKind, String)>,
    /// Names no path can hold, escaped.
    invalid: Vec<String>,
    /// Every name listed at the root, refused ones included.
    names: Vec<String>,
    synced: bool,
}

/// See [the module](self).
pub struct DiscoveryBackend {
    base: reqwest::Url,
    client: reqwest::Client,
    unpack: Arc<dyn Unpack>,
    limits: DiscoveryLimits,
    files: MemoryBackend,
    known: tokio::sync::Mutex<Known>,
    cache: Option<ArtifactCache>,
}

/// Verified artifacts on disk, one file per digest.
#[derive(Debug, Clone)]
struct ArtifactCache {
    dir: std::path::PathBuf,
    max_bytes: u64,
}

impl ArtifactCache {
    /// The cached artifact of `hex`, if any, no larger than `bound`, and
    /// still matching its name.
    fn get(&self, hex_digest: &str, bound: u64) -> Option<Bytes> {
        let path = self.dir.join(hex_digest);
        let meta = std::fs::symlink_metadata(&path).ok()?;
        if !meta.is_file() || meta.len() > bound {
            return None;
        }
        let bytes = std::fs::read(&path).ok()?;
        if hex(&Sha256::digest(&bytes)) == hex_digest {
            Some(Bytes::from(bytes))
        } else {
            let _ = std::fs::remove_file(&path);
            None
        }
    }

    /// Keeps `bytes` under `hex`, written to a temporary name and renamed;
    /// then trims the directory to its bound, oldest files first. Failures
    /// only cost a later download.
    fn keep(&self, hex_digest: &str, bytes: &[u8]) {
        use std::io::Write as _;
        #[cfg(unix)]
        use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
        let mut builder = std::fs::DirBuilder::new();
        builder.recursive(true);
        #[cfg(unix)]
        builder.mode(0o700);
        if builder.create(&self.dir).is_err() || bytes.len() as u64 > self.max_bytes {
            return;
        }
        let temporary = self.dir.join(format!(".{hex_digest}.{}", std::process::id()));
        let mut open = std::fs::OpenOptions::new();
        open.write(true).create_new(true);
        #[cfg(unix)]
        open.mode(0o600);
        let written = open
            .open(&temporary)
            .and_then(|mut f| f.write_all(bytes))
            .and_then(|()| std::fs::rename(&temporary, self.dir.join(hex_digest)));
        if written.is_err() {
            let _ = std::fs::remove_file(&temporary);
            return;
        }
        self.trim();
    }

    fn trim(&self) {
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return;
        };
        let mut files: Vec<(std::time::SystemTime, u64, std::path::PathBuf)> = entries
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let meta = e.metadata().ok()?;
                meta.is_file()
                    .then(|| (meta.modified().unwrap_or(std::time::UNIX_EPOCH), meta.len(), e.path()))
            })
            .collect();
        let mut total: u64 = files.iter().map(|(_, len, _)| len).sum();
        files.sort();
        for (_, len, path) in files {
            if total <= self.max_bytes {
                break;
            }
            if std::fs::remove_file(&path).is_ok() {
                total -= len;
            }
        }
    }
}

impl fmt::Debug for DiscoveryBackend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DiscoveryBackend")
            .field("base", &self.base.as_str())
            .finish_non_exhaustive()
    }
}

impl DiscoveryBackend {
    /// A backend for the endpoint at `base` (`https://host[/path]`; the
    /// index is `BASE/.well-known/agent-skills/index.json`). `http://` is
    /// taken only for a loopback host, or when `allow_http` says so.
    /// Nothing is fetched until the first listing.
    pub fn new(base: &str, unpack: Arc<dyn Unpack>, limits: DiscoveryLimits, allow_http: bool) -> Result<Self> {
        let refuse = |why: String| Error::new(ErrorKind::InvalidPath).with_detail(why);
        let mut url = reqwest::Url::parse(base).map_err(|e| refuse(format!("not a URL: {e}")))?;
        let loopback = match url.host() {
            Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
            Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
            Some(url::Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
            None => false,
        };
        match url.scheme() {
            "https" => {}
            "http" if loopback || allow_http => {}
            "http" => return Err(refuse("plain http:// is taken only for a loopback host".into())),
            other => return Err(refuse(format!("`{other}://` is not a discovery endpoint"))),
        }
        if url.host().is_none() || !url.username().is_empty() || url.password().is_some() {
            return Err(refuse("a discovery endpoint names a host and no credentials".into()));
        }
        url.set_query(None);
        url.set_fragment(None);
        if !url.path().ends_with('/') {
            let path = format!("{}/", url.path());
            url.set_path(&path);
        }
        let origin = url.origin();
        let client = reqwest::Client::builder()
            .timeout(limits.timeout)
            .connect_timeout(limits.connect_timeout)
            .redirect(reqwest::redirect::Policy::custom(move |attempt| {
                if attempt.previous().len() >= 5 {
                    attempt.error("too many redirects")
                } else if attempt.url().origin() == origin {
                    attempt.follow()
                } else {
                    attempt.error("a redirect to another origin")
                }
            }))
            .user_agent(concat!("skillstore/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| {
                Error::new(ErrorKind::Other)
                    .with_detail("cannot build an HTTP client")
                    .with_source(e)
            })?;
        Ok(DiscoveryBackend {
            base: url,
            client,
            unpack,
            limits,
            files: MemoryBackend::new(),
            known: tokio::sync::Mutex::new(Known::default()),
            cache: None,
        })
    }

    /// Keeps verified artifacts under `dir` (made private to the user if
    /// missing), at most `max_bytes` of them, oldest dropped first. Each
    /// endpoint has a directory of its own there, so one endpoint cannot
    /// learn, from which artifacts are not requested, what another served.
    pub fn with_cache(mut self, dir: std::path::PathBuf, max_bytes: u64) -> Self {
        let endpoint = hex(&Sha256::digest(self.base.as_str().as_bytes()));
        let dir = dir.join(&endpoint[..32]);
        self.cache = Some(ArtifactCache { dir, max_bytes });
        self
    }

    /// Fetches the index again (conditionally) and loads what changed.
    async fn sync(&self, known: &mut Known) -> Result<()> {
        let (index_url, body, etag) = match self.fetch_index(known).await? {
            None => {
                known.synced = true;
                return Ok(());
            }
            Some(fetched) => fetched,
        };
        let parsed = parse_index(&body, self.limits.max_entries)?;
        let legacy = parsed.legacy;
        let mut names = Vec::new();
        let mut refused = BTreeMap::new();
        let mut counts: HashMap<&str, usize> = HashMap::new();
        for entry in &parsed.entries {
            *counts.entry(entry.name.as_str()).or_default() += 1;
        }
        let mut invalid = parsed.invalid;
        let mut wanted: Vec<&RawEntry> = Vec::new();
        for entry in &parsed.entries {
            let Ok(_) = VPath::root().join(&entry.name) else {
                invalid.push(entry.name.escape_debug().to_string());
                continue;
            };
            if !is_spec_name(&entry.name) {
                invalid.push(entry.name.escape_debug().to_string());
                continue;
            }
            if names.contains(&entry.name) {
                continue;
            }
            names.push(entry.name.clone());
            if counts[entry.name.as_str()] > 1 {
                refused.insert(
                    entry.name.clone(),
                    (ErrorKind::Other, "the index lists this skill more than once".to_owned()),
                );
                continue;
            }
            wanted.push(entry);
        }
        let mut loaded = HashMap::new();
        let mut pending = Vec::new();
        for entry in wanted {
            if known.loaded.get(&entry.name) == Some(&entry.key()) {
                loaded.insert(entry.name.clone(), entry.key());
            } else {
                pending.push(entry);
            }
        }
        // Every download of this load ends by one deadline, so an endpoint
        // that trickles each of thousands of artifacts costs the load at
        // most `load_timeout`, not `timeout` times the entries.
        let deadline = tokio::time::Instant::now() + self.limits.load_timeout;
        let fetches: Vec<futures::future::BoxFuture<'_, Fetched<'_>>> = pending
            .into_iter()
            .map(|entry| Box::pin(self.fetch_by(deadline, &index_url, entry, legacy)) as _)
            .collect();
        let mut fetched = futures::stream::iter(fetches).buffer_unordered(self.limits.concurrent_downloads.max(1));
        while let Some((entry, dir, files)) = fetched.next().await {
            match files {
                Ok(files) => {
                    self.replace(&dir, files).await?;
                    loaded.insert(entry.name.clone(), entry.key());
                }
                Err(e) => {
                    tracing::warn!(skill = %entry.name, error = %e, "a discovery entry was refused");
                    self.remove(&dir).await;
                    let detail = e.detail().unwrap_or("refused").to_owned();
                    refused.insert(entry.name.clone(), (e.kind(), detail));
                }
            }
        }
        drop(fetched);
        for gone in known.loaded.keys().filter(|n| !loaded.contains_key(*n)) {
            if let Ok(dir) = VPath::root().join(gone) {
                self.remove(&dir).await;
            }
        }
        *known = Known {
            index: Some((index_url.clone(), etag)),
            loaded,
            refused,
            invalid,
            names,
            synced: true,
        };
        Ok(())
    }

    /// The files of `entry` (0.2.0 or 0.1), refused as unavailable when
    /// they are not all downloaded by `deadline`.
    async fn fetch_by<'a>(
        &self,
        deadline: tokio::time::Instant,
        index_url: &reqwest::Url,
        entry: &'a RawEntry,
        legacy: bool,
    ) -> Fetched<'a> {
        let dir = VPath::root().join(&entry.name).expect("a checked name");
        let fetch = async {
            if legacy {
                self.fetch_legacy(index_url, entry, &dir).await
            } else {
                self.fetch_artifact(index_url, entry, &dir).await
            }
        };
        let files = tokio::time::timeout_at(deadline, fetch).await.unwrap_or_else(|_| {
            Err(Error::at(ErrorKind::Unavailable, &dir)
                .with_detail("the endpoint did not deliver this skill within the load's time limit"))
        });
        (entry, dir, files)
    }

    /// The index, unless it is unchanged (`None`): the 0.2.0 path first,
    /// then the legacy one when the first is not found.
    async fn fetch_index(&self, known: &Known) -> Result<Option<(reqwest::Url, Bytes, Option<String>)>> {
        let candidates = match &known.index {
            Some((url, _)) => vec![url.clone()],
            None => [".well-known/agent-skills/index.json", ".well-known/skills/index.json"]
                .iter()
                .map(|p| self.base.join(p).expect("a relative path joins"))
                .collect(),
        };
        let mut last = Error::new(ErrorKind::NotFound).with_detail("the endpoint has no discovery index");
        for url in candidates {
            let mut request = self.client.get(url.clone());
            // An entry refused as unavailable is asked for again at the next
            // load: the index is then fetched whole, so a 304 cannot hide it.
            let retrying = known.refused.values().any(|(kind, _)| kind.is_transient());
            if let Some((_, Some(etag))) = &known.index
                && !retrying
            {
                request = request.header(reqwest::header::IF_NONE_MATCH, etag);
            }
            let response = request.send().await.map_err(unavailable)?;
            let status = response.status();
            if status == reqwest::StatusCode::NOT_MODIFIED && known.synced {
                return Ok(None);
            }
            if status == reqwest::StatusCode::NOT_FOUND {
                last = Error::new(ErrorKind::NotFound).with_detail("the endpoint has no discovery index");
                continue;
            }
            check_status(status)?;
            let etag = response
                .headers()
                .get(reqwest::header::ETAG)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = bounded_body(response, self.limits.max_index_bytes, "the index").await?;
            return Ok(Some((url, body, etag)));
        }
        Err(last)
    }

    /// The files of a 0.2.0 entry, from its artifact checked against its
    /// digest.
    async fn fetch_artifact(
        &self,
        index_url: &reqwest::Url,
        entry: &RawEntry,
        dir: &VPath,
    ) -> Result<Vec<(String, Bytes)>> {
        let refuse = |kind: ErrorKind, why: String| Error::at(kind, dir).with_detail(why);
        let kind = entry.kind.as_deref().unwrap_or_default();
        if kind != "skill-md" && kind != "archive" {
            return Err(refuse(
                ErrorKind::Unsupported,
                format!(
                    "an entry of type `{}`; only skill-md and archive are read",
                    kind.escape_debug()
                ),
            ));
        }
        let digest = entry.digest.as_deref().unwrap_or_default();
        let Some(expected) = digest
            .strip_prefix("sha256:")
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
        else {
            return Err(refuse(
                ErrorKind::Other,
                "the entry's digest is not sha256: and 64 lowercase hex digits".into(),
            ));
        };
        let url = self.same_origin(index_url, entry.url.as_deref().unwrap_or_default(), dir)?;
        let bound = if kind == "archive" {
            self.limits.max_artifact_bytes
        } else {
            crate::DEFAULT_READ_LIMIT
        };
        let cached = self.cache.as_ref().and_then(|c| c.get(expected, bound));
        let bytes = match cached {
            Some(bytes) => bytes,
            None => {
                let bytes = self.download(url, bound, dir).await?;
                let found = hex(&Sha256::digest(&bytes));
                if found != expected {
                    return Err(refuse(
                        ErrorKind::Other,
                        format!("digest mismatch: the artifact is sha256:{found}, the index says {digest}"),
                    ));
                }
                if let Some(cache) = &self.cache {
                    cache.keep(expected, &bytes);
                }
                bytes
            }
        };
        if kind == "skill-md" {
            return Ok(vec![("SKILL.md".to_owned(), bytes)]);
        }
        self.unpack
            .unpack(&entry.name, &bytes)
            .map_err(|(kind, message)| refuse(ErrorKind::Other, format!("refused archive ({kind}): {message}")))
    }

    /// The files of a 0.1 entry, each fetched from beside the index.
    async fn fetch_legacy(
        &self,
        index_url: &reqwest::Url,
        entry: &RawEntry,
        dir: &VPath,
    ) -> Result<Vec<(String, Bytes)>> {
        let listed = entry.files.as_deref().unwrap_or_default();
        if listed.len() > self.limits.max_legacy_files {
            return Err(Error::at(ErrorKind::Other, dir).with_detail(format!(
                "the entry lists {} files; the limit is {}",
                listed.len(),
                self.limits.max_legacy_files
            )));
        }
        if !listed.iter().any(|f| f == "SKILL.md") {
            return Err(Error::at(ErrorKind::Other, dir).with_detail("the entry lists no SKILL.md"));
        }
        let mut planned = Vec::with_capacity(listed.len());
        for relative in listed {
            let path = dir.join(relative).map_err(|e| {
                Error::at(ErrorKind::Other, dir).with_detail(format!(
                    "the entry lists `{}`, which no path inside the skill can be: {e}",
                    relative.escape_debug()
                ))
            })?;
            let url = index_url
                .join(&format!("{}/{relative}", entry.name))
                .map_err(|e| Error::at(ErrorKind::Other, &path).with_detail(e.to_string()))?;
            let url = self.same_origin(index_url, url.as_str(), dir)?;
            // `%2e%2e` is a name to the path check but `..` to a URL: the
            // resolved URL must stay under the entry's own directory.
            let under = index_url
                .join(&format!("{}/", entry.name))
                .map_err(|e| Error::at(ErrorKind::Other, &path).with_detail(e.to_string()))?;
            if relative.contains('%') || !url.as_str().starts_with(under.as_str()) {
                return Err(Error::at(ErrorKind::InvalidPath, dir).with_detail(format!(
                    "the entry lists `{}`, which does not stay inside the skill's directory",
                    relative.escape_debug()
                )));
            }
            planned.push((relative, path, url));
        }
        let mut files = Vec::with_capacity(planned.len());
        for (relative, path, url) in planned {
            let bytes = self.download(url, crate::DEFAULT_READ_LIMIT, &path).await?;
            files.push((relative.clone(), bytes));
        }
        Ok(files)
    }

    /// `url` resolved against the index's URL (RFC 3986), refused unless
    /// it keeps the index's origin.
    fn same_origin(&self, index_url: &reqwest::Url, url: &str, dir: &VPath) -> Result<reqwest::Url> {
        let resolved = index_url
            .join(url)
            .map_err(|e| Error::at(ErrorKind::InvalidPath, dir).with_detail(format!("the entry's url: {e}")))?;
        if resolved.origin() != index_url.origin() {
            return Err(Error::at(ErrorKind::PermissionDenied, dir)
                .with_detail("the entry's url leaves the index's origin; only same-origin artifacts are read"));
        }
        Ok(resolved)
    }

    async fn download(&self, url: reqwest::Url, bound: u64, at: &VPath) -> Result<Bytes> {
        let response = self
            .client
            .get(url)
            .send()
            .await
            .map_err(|e| unavailable(e).with_path(at.clone()))?;
        check_status(response.status()).map_err(|e| match e.kind() {
            // What the index lists must be there: a missing artifact is the
            // entry's fault, not an absent skill.
            ErrorKind::NotFound => {
                Error::at(ErrorKind::Other, at).with_detail("the endpoint has no file at the entry's url")
            }
            _ => e.with_path(at.clone()),
        })?;
        bounded_body(response, bound, "the artifact")
            .await
            .map_err(|e| e.with_path(at.clone()))
    }

    /// Puts `files` in place of whatever `dir` held.
    async fn replace(&self, dir: &VPath, files: Vec<(String, Bytes)>) -> Result<()> {
        self.remove(dir).await;
        for (relative, data) in files {
            let path = dir.join(&relative)?;
            self.files.put(&path, data, PutMode::Overwrite).await?;
        }
        Ok(())
    }

    /// Removes every file under `dir`.
    async fn remove(&self, dir: &VPath) {
        let mut pending = vec![dir.clone()];
        while let Some(current) = pending.pop() {
            let Ok(entries) = self.files.list(&current).await else {
                continue;
            };
            for entry in entries {
                let Ok(path) = current.join(&entry.name) else { continue };
                match entry.kind {
                    crate::EntryKind::Dir => pending.push(path),
                    _ => {
                        let _ = self.files.delete(&path).await;
                    }
                }
            }
        }
    }

    /// Syncs when nothing is known yet, then answers `path`'s refusal if
    /// its skill was refused.
    async fn ready(&self, path: &VPath) -> Result<()> {
        let mut known = self.known.lock().await;
        if !known.synced {
            self.sync(&mut known).await?;
        }
        if let Some(first) = path.segments().next()
            && let Some((kind, detail)) = known.refused.get(first)
        {
            return Err(Error::at(*kind, path).with_public_detail(detail.clone()));
        }
        Ok(())
    }
}

#[async_trait]
impl SkillBackend for DiscoveryBackend {
    fn capabilities(&self) -> Capabilities {
        Capabilities::READ_ONLY
    }

    async fn list(&self, dir: &VPath) -> Result<Vec<Entry>> {
        Ok(self.list_detailed(dir).await?.entries)
    }

    async fn list_detailed(&self, dir: &VPath) -> Result<Listing> {
        if !dir.is_root() {
            self.ready(dir).await?;
            return Ok(Listing {
                entries: self.files.list(dir).await?,
                invalid: Vec::new(),
            });
        }
        let mut known = self.known.lock().await;
        self.sync(&mut known).await?;
        Ok(Listing {
            entries: known
                .names
                .iter()
                .map(|name| Entry {
                    name: name.clone(),
                    kind: crate::EntryKind::Dir,
                    size: None,
                    version: None,
                    symlink: false,
                })
                .collect(),
            invalid: known.invalid.clone(),
        })
    }

    async fn stat(&self, path: &VPath) -> Result<Metadata> {
        self.ready(path).await?;
        self.files.stat(path).await
    }

    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        self.ready(path).await?;
        self.files.read(path, options).await
    }
}

/// An entry, its skill's directory, and its files or why it was refused.
type Fetched<'a> = (&'a RawEntry, VPath, Result<Vec<(String, Bytes)>>);

/// One entry as the index gives it, before any check.
#[derive(Debug, serde::Deserialize)]
struct RawEntry {
    name: String,
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    url: Option<String>,
    #[serde(default)]
    digest: Option<String>,
    #[serde(default)]
    files: Option<Vec<String>>,
}

impl RawEntry {
    /// What identifies the entry's content: its digest (0.2.0), or the
    /// entry as listed (0.1, which has none).
    fn key(&self) -> String {
        match &self.digest {
            Some(d) => d.clone(),
            None => format!("{:?}", self.files),
        }
    }
}

struct ParsedIndex {
    legacy: bool,
    entries: Vec<RawEntry>,
    invalid: Vec<String>,
}

/// Parses an index: `$schema` 0.2.0 or absent (0.1), a `skills` array;
/// an entry that is not an object with a string `name` is left out (and
/// counted among the invalid names); at most `max_entries` are taken.
fn parse_index(body: &[u8], max_entries: usize) -> Result<ParsedIndex> {
    let refuse = |why: &str| Error::new(ErrorKind::Other).with_detail(format!("not a discovery index: {why}"));
    let value: serde_json::Value = serde_json::from_slice(body).map_err(|_| refuse("not JSON"))?;
    let legacy = match value.get("$schema") {
        None => true,
        Some(serde_json::Value::String(s)) if s == SCHEMA_V2 => false,
        Some(_) => {
            return Err(Error::new(ErrorKind::Unsupported)
                .with_detail("the index's $schema is not one this build reads (0.2.0, or none for 0.1)"));
        }
    };
    let Some(skills) = value.get("skills").and_then(|s| s.as_array()) else {
        return Err(refuse("no `skills` array"));
    };
    if skills.len() > max_entries {
        tracing::warn!(
            entries = skills.len(),
            limit = max_entries,
            "a discovery index lists more entries than are taken"
        );
    }
    let mut entries = Vec::new();
    let mut invalid = Vec::new();
    for raw in skills.iter().take(max_entries) {
        match serde_json::from_value::<RawEntry>(raw.clone()) {
            Ok(entry) => entries.push(entry),
            Err(_) => invalid.push(
                raw.get("name")
                    .and_then(|n| n.as_str())
                    .unwrap_or("(an entry without a name)")
                    .escape_debug()
                    .to_string(),
            ),
        }
    }
    Ok(ParsedIndex {
        legacy,
        entries,
        invalid,
    })
}

/// The specification's naming rule: 1 to 64 of `a-z`, `0-9` and `-`, no
/// `-` first, last or doubled.
fn is_spec_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unavailable(e: reqwest::Error) -> Error {
    let what = if e.is_timeout() {
        "the endpoint did not answer in time"
    } else if e.is_redirect() {
        "the endpoint redirected off its origin, or too often"
    } else {
        "the endpoint cannot be reached"
    };
    let kind = if e.is_redirect() {
        ErrorKind::PermissionDenied
    } else {
        ErrorKind::Unavailable
    };
    Error::new(kind).with_detail(what).with_source(e)
}

fn check_status(status: reqwest::StatusCode) -> Result<()> {
    if status.is_success() {
        return Ok(());
    }
    let kind = match status.as_u16() {
        404 | 410 => ErrorKind::NotFound,
        401 | 403 => ErrorKind::PermissionDenied,
        408 | 429 | 500..=599 => ErrorKind::Unavailable,
        _ => ErrorKind::Other,
    };
    Err(Error::new(kind).with_detail(format!("the endpoint answered {status}")))
}

/// The body of `response`, refused as soon as it passes `bound` bytes (a
/// declared length over it is refused before any byte is read).
async fn bounded_body(response: reqwest::Response, bound: u64, what: &str) -> Result<Bytes> {
    let too_large = || Error::new(ErrorKind::TooLarge).with_detail(format!("{what} is larger than {bound} bytes"));
    if response.content_length().is_some_and(|n| n > bound) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(unavailable)?;
        if body.len() as u64 + chunk.len() as u64 > bound {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn indexes_of_unknown_schemas_are_refused_and_absent_ones_are_legacy() {
        let v2 = format!(r#"{{"$schema": "{SCHEMA_V2}", "skills": []}}"#);
        assert!(!parse_index(v2.as_bytes(), 10).unwrap().legacy);
        assert!(parse_index(br#"{"skills": []}"#, 10).unwrap().legacy);
        let other = parse_index(br#"{"$schema": "https://example.com/9.9.9", "skills": []}"#, 10);
        assert_eq!(other.err().unwrap().kind(), ErrorKind::Unsupported);
        assert!(parse_index(b"[]", 10).is_err());
        assert!(parse_index(b"not json", 10).is_err());
    }

    #[test]
    fn entries_past_the_bound_are_not_taken() {
        let entries: Vec<String> = (0..50).map(|i| format!(r#"{{"name": "s{i}"}}"#)).collect();
        let body = format!(r#"{{"skills": [{}]}}"#, entries.join(","));
        assert_eq!(parse_index(body.as_bytes(), 20).unwrap().entries.len(), 20);
    }

    #[test]
    fn plain_http_only_on_loopback_unless_allowed() {
        #[derive(Debug)]
        struct Never;
        impl Unpack for Never {
            fn unpack(&self, _: &str, _: &[u8]) -> std::result::Result<Vec<(String, Bytes)>, (String, String)> {
                Err(("never".into(), "never".into()))
            }
        }
        let open = |url: &str, allow| DiscoveryBackend::new(url, Arc::new(Never), DiscoveryLimits::default(), allow);
        assert!(open("https://example.com/docs", false).is_ok());
        assert!(open("http://127.0.0.1:8080", false).is_ok());
        assert!(open("http://[::1]:8080/t/acme", false).is_ok());
        assert!(open("http://localhost:8080", false).is_ok());
        assert!(open("http://example.com", false).is_err());
        assert!(open("http://example.com", true).is_ok());
        assert!(open("https://user:pw@example.com", false).is_err());
        assert!(open("ftp://example.com", false).is_err());
        let docs = open("https://example.com/docs", false).unwrap();
        assert_eq!(docs.base.as_str(), "https://example.com/docs/");
    }
}
