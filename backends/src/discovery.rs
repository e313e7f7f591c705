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
//! entries whose digest changed. A 0.1 entry has no digest: each of its
//! files is revalidated at every listing of the root (`If-None-Match` /
//! `If-Modified-Since` with what the endpoint last said of it, or fetched
//! again when it said nothing), so a changed file is seen though the
//! index is not.
//!
//! **What a load holds.** Every file's version is `sha256:` of its bytes,
//! so a version changes exactly when content does, in every process. One
//! load holds at most [`DiscoveryLimits::max_total_bytes`] of files (and
//! of downloads in flight); an entry past it is refused with that reason.
//! With a cache directory ([`DiscoveryBackend::with_cache`]), verified
//! artifacts and the files unpacked from them are kept there, named by
//! their SHA-256, and read from there: each read hashes the bytes again
//! and serves them only when they match, and a blob found missing or
//! changed makes its entry load again. Without one, files are held in
//! memory, under the same bound.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::StreamExt;
use sha2::{Digest, Sha256};

use crate::backend::{Blob, Capabilities, Entry, Listing, Metadata, ReadOptions, SkillBackend, Version};
use crate::error::{Error, ErrorKind, Result};
use crate::vpath::VPath;

mod store;

use store::{BlobDir, Budget, Held, HeldFile, hex};

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
    /// The most bytes one load may hold: the files of every skill loaded
    /// together, and the downloads in flight (default 512 MiB, as a Git
    /// fetch). An entry that does not fit is refused with a diagnostic;
    /// the others are loaded.
    pub max_total_bytes: u64,
}

/// The default of [`DiscoveryLimits::max_total_bytes`]: 512 MiB.
pub const DEFAULT_MAX_TOTAL_BYTES: u64 = 512 * 1024 * 1024;

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
            max_total_bytes: DEFAULT_MAX_TOTAL_BYTES,
        }
    }
}

/// What is known of the endpoint after the last good index.
#[derive(Default)]
struct Known {
    /// The index URL that answered, its ETag, and when it was read.
    index: Option<(reqwest::Url, Option<String>)>,
    /// The last index read, and whether it was of the 0.1 form.
    body: Bytes,
    legacy: bool,
    /// By skill name: its files, and the key (digest) they were loaded at.
    held: HashMap<String, Held>,
    /// By skill name: the entry it was loaded from, to load it again when
    /// a blob of it is found missing or changed on disk.
    entries: HashMap<String, RawEntry>,
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
    known: tokio::sync::Mutex<Known>,
    blobs: Option<BlobDir>,
    /// The bytes the blobs of what is held take on disk, at most the
    /// directory's bound: past it, files are held in memory (under the
    /// load's bound) rather than trimmed and fetched again.
    disk: Budget,
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
            known: tokio::sync::Mutex::new(Known::default()),
            blobs: None,
            disk: Budget::new(0, 0),
        })
    }

    /// Keeps verified artifacts, and the files unpacked from them, under
    /// `dir` (made private to the user if missing), and serves files from
    /// there. Each endpoint has a directory of its own there, named by a
    /// hash of its whole URL, so one endpoint cannot learn, from which
    /// artifacts are not requested, what another served, and nothing one
    /// endpoint served is read for another. Blobs no load of this process
    /// holds are trimmed, oldest first, to `max_bytes`.
    pub fn with_cache(mut self, dir: std::path::PathBuf, max_bytes: u64) -> Self {
        let endpoint = hex(&Sha256::digest(self.base.as_str().as_bytes()));
        let dir = dir.join(&endpoint[..32]);
        self.blobs = Some(BlobDir { dir, max_bytes });
        self.disk = Budget::new(max_bytes, 0);
        self
    }

    /// Fetches the index again (conditionally) and loads what changed.
    async fn sync(&self, known: &mut Known) -> Result<()> {
        let (index_url, body, etag) = match self.fetch_index(known).await? {
            Some(fetched) => fetched,
            // A 0.1 index names no digests: an unchanged index says nothing
            // of its files, which are revalidated below.
            None if known.legacy && known.index.is_some() => {
                let (url, etag) = known.index.clone().expect("checked");
                (url, known.body.clone(), etag)
            }
            None => {
                known.synced = true;
                return Ok(());
            }
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
            if !crate::is_index_name(&entry.name) {
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
        let entries: HashMap<String, RawEntry> = wanted.iter().map(|e| (e.name.clone(), (*e).clone())).collect();
        let mut before = std::mem::take(&mut known.held);
        let mut held = HashMap::new();
        let mut pending = Vec::new();
        for entry in wanted {
            // A 0.1 entry has no digest: its files are revalidated at every
            // load.
            if !legacy && let Some(kept) = before.remove_entry(&entry.name) {
                if kept.1.key == entry.key() {
                    held.insert(kept.0, kept.1);
                    continue;
                }
                before.insert(kept.0, kept.1);
            }
            pending.push(entry);
        }
        let budget = Budget::new(self.limits.max_total_bytes, held.values().map(Held::bytes).sum());
        self.disk.reset(held.values().map(Held::disk_bytes).sum());
        // Every download of this load ends by one deadline, so an endpoint
        // that trickles each of thousands of artifacts costs the load at
        // most `load_timeout`, not `timeout` times the entries.
        let deadline = tokio::time::Instant::now() + self.limits.load_timeout;
        let fetches: Vec<futures::future::BoxFuture<'_, Fetched<'_>>> = pending
            .into_iter()
            .map(|entry| {
                Box::pin(self.fetch_by(deadline, &index_url, entry, legacy, before.get(&entry.name), &budget)) as _
            })
            .collect();
        let mut fetched = futures::stream::iter(fetches).buffer_unordered(self.limits.concurrent_downloads.max(1));
        while let Some((entry, _dir, files)) = fetched.next().await {
            match files {
                Ok(files) => {
                    held.insert(entry.name.clone(), files);
                }
                Err(e) => {
                    tracing::warn!(skill = %entry.name, error = %e, "a discovery entry was refused");
                    let detail = e.detail().unwrap_or("refused").to_owned();
                    refused.insert(entry.name.clone(), (e.kind(), detail));
                }
            }
        }
        drop(fetched);
        self.trim(&held, legacy);
        *known = Known {
            index: Some((index_url.clone(), etag)),
            body,
            legacy,
            held,
            entries,
            refused,
            invalid,
            names,
            synced: true,
        };
        Ok(())
    }

    /// Trims the blob directory, keeping every blob `held` names.
    fn trim(&self, held: &HashMap<String, Held>, legacy: bool) {
        let Some(blobs) = &self.blobs else { return };
        let mut keep: std::collections::HashSet<&str> = std::collections::HashSet::new();
        for skill in held.values() {
            keep.extend(skill.files.values().map(|f| f.hash.as_str()));
            if !legacy && let Some(artifact) = skill.key.strip_prefix("sha256:") {
                keep.insert(artifact);
            }
        }
        blobs.trim(&keep);
    }

    /// The files of `entry` (0.2.0 or 0.1), taken from `budget`, refused as
    /// unavailable when they are not all downloaded by `deadline`.
    /// `before` is what the entry held until now.
    async fn fetch_by<'a>(
        &self,
        deadline: tokio::time::Instant,
        index_url: &reqwest::Url,
        entry: &'a RawEntry,
        legacy: bool,
        before: Option<&Held>,
        budget: &Budget,
    ) -> Fetched<'a> {
        let dir = VPath::root().join(&entry.name).expect("a checked name");
        let fetch = async {
            if legacy {
                self.fetch_legacy(index_url, entry, &dir, before, budget).await
            } else {
                self.fetch_artifact(index_url, entry, &dir, budget).await
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
            let body = bounded_body(response, self.limits.max_index_bytes, "the index", None).await?;
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
        budget: &Budget,
    ) -> Result<Held> {
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
        // Past the load's bound nothing more is held: refused before a
        // kept blob is read and hashed again, so entries sharing one digest
        // cost nothing once the bound is met.
        if budget.exhausted() {
            return Err(over_budget(budget.limit()).with_path(dir.clone()));
        }
        let (bytes, downloaded) = match self.blobs.as_ref().and_then(|c| c.get(expected, bound)) {
            Some(bytes) => (bytes, 0),
            None => {
                let (bytes, _) = self
                    .download(url, bound, dir, budget, None)
                    .await?
                    .expect("an unconditional request has a body");
                let found = hex(&Sha256::digest(&bytes));
                if found != expected {
                    budget.give(bytes.len() as u64);
                    return Err(refuse(
                        ErrorKind::Other,
                        format!("digest mismatch: the artifact is sha256:{found}, the index says {digest}"),
                    ));
                }
                let n = bytes.len() as u64;
                (bytes, n)
            }
        };
        let artifact_on_disk = match &self.blobs {
            Some(blobs) if self.disk.take(bytes.len() as u64) => {
                if blobs.put(expected, &bytes) {
                    bytes.len() as u64
                } else {
                    self.disk.give(bytes.len() as u64);
                    0
                }
            }
            _ => 0,
        };
        let files = if kind == "skill-md" {
            Ok(vec![("SKILL.md".to_owned(), bytes, Validators::default())])
        } else {
            self.unpack
                .unpack(&entry.name, &bytes)
                .map(|files| {
                    files
                        .into_iter()
                        .map(|(path, data)| (path, data, Validators::default()))
                        .collect()
                })
                .map_err(|(kind, message)| refuse(ErrorKind::Other, format!("refused archive ({kind}): {message}")))
        };
        budget.give(downloaded);
        let held = files.and_then(|files| self.hold(entry.key(), files, budget, dir));
        match held {
            Ok(mut held) => {
                held.artifact_on_disk = artifact_on_disk;
                Ok(held)
            }
            Err(e) => {
                self.disk.give(artifact_on_disk);
                Err(e)
            }
        }
    }

    /// Holds `files` as the skill at `dir` (on disk when there is a blob
    /// directory), taking their bytes from `budget`.
    fn hold(&self, key: String, files: Vec<(String, Bytes, Validators)>, budget: &Budget, dir: &VPath) -> Result<Held> {
        let total: u64 = files.iter().map(|(_, data, _)| data.len() as u64).sum();
        if !budget.take(total) {
            return Err(over_budget(budget.limit()).with_path(dir.clone()));
        }
        let mut held = Held {
            key,
            files: BTreeMap::new(),
            artifact_on_disk: 0,
        };
        let refuse = |why: String, held: &Held| {
            budget.give(total);
            self.disk.give(held.disk_bytes());
            Err(Error::at(ErrorKind::InvalidPath, dir).with_public_detail(why))
        };
        for (relative, data, validators) in files {
            if dir.join(&relative).is_err() || held.files.contains_key(&relative) {
                return refuse(
                    format!(
                        "`{}` is no path a file inside the skill can have",
                        relative.escape_debug()
                    ),
                    &held,
                );
            }
            let hash = hex(&Sha256::digest(&data));
            let size = data.len() as u64;
            let on_disk = self
                .blobs
                .as_ref()
                .is_some_and(|b| self.disk.take(size) && (b.put(&hash, &data) || (self.disk.give(size), false).1));
            held.files.insert(
                relative,
                HeldFile {
                    size: data.len() as u64,
                    hash,
                    inline: (!on_disk).then_some(data),
                    validators,
                },
            );
        }
        // A file's path may not also be a directory of another's.
        for relative in held.files.keys() {
            for (at, _) in relative.match_indices('/') {
                if held.files.contains_key(&relative[..at]) {
                    return refuse(
                        format!("`{}` is both a file and a directory", relative[..at].escape_debug()),
                        &held,
                    );
                }
            }
        }
        Ok(held)
    }

    /// The bytes of a held file: from memory, or from its blob when that
    /// still hashes to the file's digest.
    fn bytes_of(&self, file: &HeldFile) -> Option<Bytes> {
        match &file.inline {
            Some(data) => Some(data.clone()),
            None => self.blobs.as_ref()?.get(&file.hash, file.size),
        }
    }

    /// The files of a 0.1 entry, each fetched from beside the index; a file
    /// held before is revalidated with what the endpoint said of it.
    async fn fetch_legacy(
        &self,
        index_url: &reqwest::Url,
        entry: &RawEntry,
        dir: &VPath,
        before: Option<&Held>,
        budget: &Budget,
    ) -> Result<Held> {
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
        let mut downloaded = 0u64;
        let fetch_all = async || -> Result<()> {
            for (relative, path, url) in planned {
                let previous = before.and_then(|h| h.files.get(relative.as_str()));
                let reusable = previous
                    .filter(|f| f.validators.0.is_some() || f.validators.1.is_some())
                    .and_then(|f| Some((f, self.bytes_of(f)?)));
                let revalidate = reusable.as_ref().map(|(f, _)| &f.validators);
                match self
                    .download(url, crate::DEFAULT_READ_LIMIT, &path, budget, revalidate)
                    .await?
                {
                    Some((bytes, validators)) => {
                        downloaded += bytes.len() as u64;
                        files.push((relative.clone(), bytes, validators));
                    }
                    None => {
                        let (file, bytes) = reusable.expect("revalidated");
                        files.push((relative.clone(), bytes, file.validators.clone()));
                    }
                }
            }
            Ok(())
        };
        let fetched = fetch_all().await;
        budget.give(downloaded);
        fetched?;
        self.hold(entry.key(), files, budget, dir)
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

    /// The body at `url`, at most `bound` bytes, taken from `budget` as it
    /// arrives (the caller gives it back). With `revalidate` (an ETag and a
    /// Last-Modified), `None` when the endpoint says the file is unchanged.
    async fn download(
        &self,
        url: reqwest::Url,
        bound: u64,
        at: &VPath,
        budget: &Budget,
        revalidate: Option<&Validators>,
    ) -> Result<Option<(Bytes, Validators)>> {
        if budget.exhausted() {
            return Err(over_budget(budget.limit()).with_path(at.clone()));
        }
        let mut request = self.client.get(url);
        if let Some((etag, modified)) = revalidate {
            if let Some(etag) = etag {
                request = request.header(reqwest::header::IF_NONE_MATCH, etag);
            }
            if let Some(modified) = modified {
                request = request.header(reqwest::header::IF_MODIFIED_SINCE, modified);
            }
        }
        let response = request.send().await.map_err(|e| unavailable(e).with_path(at.clone()))?;
        if revalidate.is_some() && response.status() == reqwest::StatusCode::NOT_MODIFIED {
            return Ok(None);
        }
        check_status(response.status()).map_err(|e| match e.kind() {
            // What the index lists must be there: a missing artifact is the
            // entry's fault, not an absent skill.
            ErrorKind::NotFound => {
                Error::at(ErrorKind::Other, at).with_detail("the endpoint has no file at the entry's url")
            }
            _ => e.with_path(at.clone()),
        })?;
        let header = |name| {
            response
                .headers()
                .get(name)
                .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
                .map(str::to_owned)
        };
        let validators = (header(reqwest::header::ETAG), header(reqwest::header::LAST_MODIFIED));
        let body = bounded_body(response, bound, "the artifact", Some(budget))
            .await
            .map_err(|e| e.with_path(at.clone()))?;
        Ok(Some((body, validators)))
    }

    /// Syncs when nothing is known yet; answers `path`'s refusal if its
    /// skill was refused; else what is known.
    async fn ready(&self, path: &VPath) -> Result<tokio::sync::MutexGuard<'_, Known>> {
        let mut known = self.known.lock().await;
        if !known.synced {
            self.sync(&mut known).await?;
        }
        if let Some(first) = path.segments().next()
            && let Some((kind, detail)) = known.refused.get(first)
        {
            return Err(Error::at(*kind, path).with_public_detail(detail.clone()));
        }
        Ok(known)
    }

    /// The file at `path`, its bytes checked; a file whose blob is missing
    /// or changed has its skill loaded again first.
    async fn file(&self, path: &VPath) -> Result<(HeldFile, Bytes)> {
        let file = match self.ready(path).await?.node(path)? {
            Node::File(file) => file,
            Node::Dir(_) => return Err(Error::at(ErrorKind::IsADirectory, path)),
        };
        if let Some(bytes) = self.bytes_of(&file) {
            return Ok((file, bytes));
        }
        tracing::debug!(path = %path, "a cached discovery file is missing or changed; loading its skill again");
        let mut known = self.ready(path).await?;
        let name = path.segments().next().unwrap_or_default().to_owned();
        let still = matches!(known.node(path), Ok(Node::File(ref f)) if f.hash == file.hash);
        if still && let (Some(entry), Some((index_url, _))) = (known.entries.get(&name).cloned(), known.index.clone()) {
            let others: u64 = known
                .held
                .iter()
                .filter(|(n, _)| **n != name)
                .map(|(_, h)| h.bytes())
                .sum();
            let budget = Budget::new(self.limits.max_total_bytes, others);
            let on_disk: u64 = known
                .held
                .iter()
                .filter(|(n, _)| **n != name)
                .map(|(_, h)| h.disk_bytes())
                .sum();
            self.disk.reset(on_disk);
            let deadline = tokio::time::Instant::now() + self.limits.load_timeout;
            let legacy = known.legacy;
            let (_, _, result) = self
                .fetch_by(deadline, &index_url, &entry, legacy, known.held.get(&name), &budget)
                .await;
            match result {
                Ok(held) => {
                    known.held.insert(name, held);
                }
                Err(e) => {
                    let detail = e.detail().unwrap_or("refused").to_owned();
                    known.held.remove(&name);
                    known.refused.insert(name, (e.kind(), detail));
                    return Err(e.with_path(path.clone()));
                }
            }
        }
        let Node::File(file) = known.node(path)? else {
            return Err(Error::at(ErrorKind::IsADirectory, path));
        };
        drop(known);
        match self.bytes_of(&file) {
            Some(bytes) => Ok((file, bytes)),
            None => Err(Error::at(ErrorKind::Unavailable, path)
                .with_detail("the file's cached bytes changed while it was read; try again")),
        }
    }
}

/// What a path of a loaded skill is.
enum Node {
    File(HeldFile),
    Dir(Vec<Entry>),
}

impl Known {
    /// What `path` (not the root) is.
    fn node(&self, path: &VPath) -> Result<Node> {
        let mut segments = path.segments();
        let name = segments.next().unwrap_or_default();
        let Some(skill) = self.held.get(name) else {
            return Err(Error::at(ErrorKind::NotFound, path));
        };
        let rest: Vec<&str> = segments.collect();
        let rest = rest.join("/");
        if let Some(file) = skill.files.get(&rest) {
            return Ok(Node::File(file.clone()));
        }
        let prefix = if rest.is_empty() {
            String::new()
        } else {
            format!("{rest}/")
        };
        let mut entries: Vec<Entry> = Vec::new();
        for (relative, file) in skill.files.range(prefix.clone()..) {
            let Some(below) = relative.strip_prefix(&prefix) else {
                break;
            };
            match below.split_once('/') {
                Some((child, _)) => {
                    if entries.last().is_none_or(|e| e.name != child) {
                        entries.push(Entry {
                            name: child.to_owned(),
                            kind: crate::EntryKind::Dir,
                            size: None,
                            version: None,
                            symlink: false,
                        });
                    }
                }
                None => entries.push(Entry {
                    name: below.to_owned(),
                    kind: crate::EntryKind::File,
                    size: Some(file.size),
                    version: Some(file.version()),
                    symlink: false,
                }),
            }
        }
        if entries.is_empty() && !rest.is_empty() {
            return Err(Error::at(ErrorKind::NotFound, path));
        }
        Ok(Node::Dir(entries))
    }
}

impl HeldFile {
    /// Its version: `sha256:` of its bytes, the same in every process.
    fn version(&self) -> Version {
        Version::new(format!("sha256:{}", self.hash))
    }
}

/// An entry past the load's bound.
fn over_budget(limit: u64) -> Error {
    Error::new(ErrorKind::TooLarge).with_public_detail(format!(
        "the endpoint's skills together pass this load's bound of {limit} bytes; this one is left out"
    ))
}

/// What an endpoint said identifies a file: its `ETag` and `Last-Modified`.
type Validators = (Option<String>, Option<String>);

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
            return match self.ready(dir).await?.node(dir)? {
                Node::Dir(entries) => Ok(Listing {
                    entries,
                    invalid: Vec::new(),
                }),
                Node::File(_) => Err(Error::at(ErrorKind::NotADirectory, dir)),
            };
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
        if path.is_root() {
            return Ok(Metadata {
                kind: crate::EntryKind::Dir,
                size: None,
                version: None,
            });
        }
        Ok(match self.ready(path).await?.node(path)? {
            Node::File(file) => Metadata {
                kind: crate::EntryKind::File,
                size: Some(file.size),
                version: Some(file.version()),
            },
            Node::Dir(_) => Metadata {
                kind: crate::EntryKind::Dir,
                size: None,
                version: None,
            },
        })
    }

    async fn read(&self, path: &VPath, options: ReadOptions) -> Result<Blob> {
        options.confining_dir(path)?;
        if path.is_root() {
            return Err(Error::at(ErrorKind::IsADirectory, path));
        }
        let size = match self.ready(path).await?.node(path)? {
            Node::File(file) => file.size,
            Node::Dir(_) => return Err(Error::at(ErrorKind::IsADirectory, path)),
        };
        if size > options.limit {
            return Err(Error::too_large(path, size, options.limit));
        }
        let (file, bytes) = self.file(path).await?;
        if file.size > options.limit {
            return Err(Error::too_large(path, file.size, options.limit));
        }
        let wanted = options.wanted(file.size) as usize;
        Ok(Blob {
            data: bytes.slice(..wanted),
            size: file.size,
            version: file.version(),
        })
    }
}

/// An entry, its skill's directory, and its files or why it was refused.
type Fetched<'a> = (&'a RawEntry, VPath, Result<Held>);

/// One entry as the index gives it, before any check.
#[derive(Debug, Clone, serde::Deserialize)]
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
async fn bounded_body(response: reqwest::Response, bound: u64, what: &str, budget: Option<&Budget>) -> Result<Bytes> {
    let too_large = || Error::new(ErrorKind::TooLarge).with_detail(format!("{what} is larger than {bound} bytes"));
    if response.content_length().is_some_and(|n| n > bound) {
        return Err(too_large());
    }
    // The bytes taken are given back unless the body is returned whole,
    // also when a load's deadline drops this future at an await.
    struct Taken<'a>(Option<&'a Budget>, u64);
    impl Drop for Taken<'_> {
        fn drop(&mut self) {
            if let Some(budget) = self.0 {
                budget.give(self.1);
            }
        }
    }
    let mut taken = Taken(budget, 0);
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(unavailable)?;
        if body.len() as u64 + chunk.len() as u64 > bound {
            return Err(too_large());
        }
        if let Some(budget) = budget {
            if !budget.take(chunk.len() as u64) {
                return Err(over_budget(budget.limit()));
            }
            taken.1 += chunk.len() as u64;
        }
        body.extend_from_slice(&chunk);
    }
    taken.1 = 0;
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
