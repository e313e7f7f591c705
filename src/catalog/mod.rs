//! The catalog: skills from an ordered source list, merged, with
//! provenance and diagnostics.
//!
//! Loading lists every source, then reads the head of every candidate
//! SKILL.md concurrently (bounded), parses the frontmatter, and merges:
//! the key is the frontmatter name; a later source wins; a winner keeps the
//! position where its name first appeared; within a source, directories are
//! taken in ascending order of `"<name>/"`. That is the order LangChain
//! deepagents produces, so on a spec-valid tree both give the same list.

use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

use bytes::Bytes;
use futures::StreamExt;
use serde::Serialize;
use skillstore_backends::{
    DEFAULT_READ_LIMIT, DeepLimits, EntryKind, ErrorKind, MAX_PATH_BYTES, ReadOptions, SkillBackend, VPath, Version,
    is_valid_segment,
};

use crate::cache::{CacheSettings, LocalCache};
use crate::index::{Entries, HeadEntry, INDEX_DIR, INDEX_FILE, MAX_INDEX_BYTES, Refused};

use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::error::{Error, Result};
use crate::frontmatter::MAX_FRONTMATTER_BYTES;
use crate::integrity::pin::{Claim, PinnedBackend, Pins};
use crate::integrity::{FileDigests, SkillDigest};
pub use crate::skill::SKILL_FILE;
use crate::skill::{
    LOWERCASE_SKILL_FILE, Parsed, Problem, ProblemKind, Scan, Severity, SkillMetadata, Strictness, parse_frontmatter,
    scan,
};
use crate::skill_files::{FileLimits, LeftOutKind, SkillFiles};
use crate::source::{Patterns, Source, SourceList};
mod check;
mod shared;

pub use check::{Passed, Verdict, WinnerCheck};
pub use shared::SharedSources;
pub(crate) use shared::SharedStates;

/// How many skills are digested at once.
const DIGEST_PARALLEL: usize = 16;

/// How a catalog is loaded.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// About how many candidates are in flight at once, across all
    /// sources: batches of the backend's preferred size run concurrently
    /// (at least eight, so every core has parsing to do), and each backend
    /// bounds the requests inside a batch.
    pub concurrency: usize,
    /// Bytes read from the start of each SKILL.md; a longer read follows
    /// only when the frontmatter does not close inside them.
    pub prefix_bytes: u64,
    /// The largest SKILL.md accepted, in bytes (refused from its size even
    /// though only a prefix is read).
    pub read_limit: u64,
    /// Which skills are enabled.
    pub filter: SkillFilter,
    /// The local cache of frontmatters by version, for sources whose
    /// backend names their location ([`SkillBackend::location_id`]);
    /// `None` (the default here; [`crate::Config::open`] turns it on unless
    /// configured off) reads and writes no cache.
    pub cache: Option<CacheSettings>,
    /// Diagnostics every load and refresh carries, whatever the listings
    /// say: what the assembly knew before any listing, such as a Git
    /// source served at a commit fetched before because its remote could
    /// not be reached (`source_stale`, so the catalog counts it among its
    /// incomplete sources).
    pub standing: Vec<Diagnostic>,
    /// File hashes by version, shared by every catalog loaded with these
    /// options (and their refreshes): skill digests read only the files
    /// whose version is new.
    pub digests: Arc<FileDigests>,
    /// What every winner must pass before it is served (the namespace
    /// installs its integrity policy: a lock, signatures); run at every
    /// load, refresh and reload.
    pub integrity: Option<Arc<dyn WinnerCheck>>,
    /// The sources loaded once per process and shared with other catalogs
    /// ([`crate::source_pool`]); `None` (the default) loads every source
    /// here.
    pub shared: Option<SharedSources>,
}

impl Default for LoadOptions {
    fn default() -> Self {
        LoadOptions {
            concurrency: 32,
            prefix_bytes: 2048,
            read_limit: DEFAULT_READ_LIMIT,
            filter: SkillFilter::default(),
            cache: None,
            standing: Vec::new(),
            digests: Arc::new(FileDigests::new()),
            integrity: None,
            shared: None,
        }
    }
}

/// Enables and disables skills by name or glob. A disabled skill is still
/// listed (marked disabled) but left out of prompts.
#[derive(Debug, Clone, Default)]
pub struct SkillFilter {
    enabled: Option<Patterns>,
    disabled: Patterns,
}

impl SkillFilter {
    /// Only skills matching `enabled` (when given) and not matching
    /// `disabled` are enabled.
    pub fn new(enabled: Option<Patterns>, disabled: Patterns) -> Self {
        SkillFilter { enabled, disabled }
    }

    /// Whether the skill named `name` is enabled.
    pub fn is_enabled(&self, name: &str) -> bool {
        self.enabled.as_ref().is_none_or(|e| e.matches(name)) && !self.disabled.matches(name)
    }
}

/// Where a shadowed skill was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Shadowed {
    /// The source's name.
    pub source: String,
    /// Its SKILL.md.
    pub path: VPath,
}

/// A skill of the catalog: the winner for its name. A handle to its
/// [`SkillRecord`], whose fields it shows (`skill.path`, `skill.metadata`):
/// cloning it counts a reference, and the catalogs over one shared source
/// ([`crate::source_pool`]) hold one record for each of its skills, so a
/// tenant's catalog costs a pointer per skill it takes from the base. A
/// write to a field copies the record first when another holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct Skill(Arc<SkillRecord>);

impl std::ops::Deref for Skill {
    type Target = SkillRecord;

    fn deref(&self) -> &SkillRecord {
        &self.0
    }
}

impl std::ops::DerefMut for Skill {
    fn deref_mut(&mut self) -> &mut SkillRecord {
        Arc::make_mut(&mut self.0)
    }
}

impl Skill {
    /// True when both read the same record: a skill of a shared source
    /// merged by two catalogs, neither of which changed it.
    pub fn shares_record_with(&self, other: &Skill) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl From<SkillRecord> for Skill {
    fn from(record: SkillRecord) -> Self {
        Skill(Arc::new(record))
    }
}

/// What a catalog knows of one winner (read through [`Skill`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkillRecord {
    /// What its frontmatter says (shared with the catalog's own record,
    /// so cloning a skill is cheap).
    #[serde(flatten)]
    pub metadata: Arc<SkillMetadata>,
    /// Its SKILL.md in the namespace.
    pub path: VPath,
    /// The name of the source it came from.
    pub source: String,
    /// Whether it is enabled (disabled skills stay out of prompts).
    pub enabled: bool,
    /// Every skill of the same name it overrode, lowest priority first.
    pub shadowed: Vec<Shadowed>,
    /// The version of its SKILL.md when read.
    #[serde(skip)]
    pub version: Version,
    /// The Git commit its source is read at, for a source in a Git
    /// repository (absent from JSON otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<Arc<str>>,
    /// Its skill digest ([`crate::integrity::digest`]), when computed: by
    /// [`Catalog::with_digests`], or by a lock's check (absent from JSON
    /// otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<Arc<str>>,
    /// Who signed it, when its source checks signatures and its signature
    /// verified: the principals of the accepting `allowed_signers` line
    /// (absent from JSON otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signer: Option<Arc<str>>,
}

impl SkillRecord {
    /// The skill's name.
    pub fn name(&self) -> &str {
        &self.metadata.name
    }

    /// The skill's directory.
    pub fn dir(&self) -> VPath {
        self.path.parent().expect("a SKILL.md has a parent")
    }
}

/// A merged view of all sources at one moment, able to read the skills it
/// lists and to refresh itself. Cheap to clone.
#[derive(Clone)]
pub struct Catalog {
    /// The namespace as the backend gives it: loads and checks read it.
    storage: Arc<dyn SkillBackend>,
    /// What the skills are served through: `storage`, with the files of the
    /// skills an integrity check passed held to the versions it saw.
    backend: Arc<dyn SkillBackend>,
    /// The skills an integrity check passed, and their files' versions.
    pins: Arc<Pins>,
    sources: Arc<SourceList>,
    options: Arc<LoadOptions>,
    states: Vec<Arc<SourceState>>,
    skills: Vec<Skill>,
    index: NameIndex,
    diagnostics: Vec<Diagnostic>,
    /// The local cache, opened at the first load that can use it.
    cache: Arc<OnceLock<Option<LocalCache>>>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("skills", &self.skills.len())
            .field("diagnostics", &self.diagnostics.len())
            .finish_non_exhaustive()
    }
}

/// What the last listing of a source gave.
#[derive(Debug, Clone)]
enum Listing {
    /// Listed; with a warning for each name no path can hold.
    Loaded(Vec<Diagnostic>),
    Failed(Diagnostic),
}

#[derive(Debug, Clone)]
pub(crate) struct SourceState {
    listing: Listing,
    /// Skill directories, in ascending order of `"<name>/"`.
    candidates: Vec<Candidate>,
}

impl SourceState {
    /// True when `other` lists the same skill files at the same versions
    /// with the same listing outcome: a catalog merged from either would
    /// be the same.
    pub(crate) fn same_as(&self, other: &SourceState) -> bool {
        let listing = match (&self.listing, &other.listing) {
            (Listing::Loaded(a), Listing::Loaded(b)) => a == b,
            (Listing::Failed(a), Listing::Failed(b)) => a == b,
            _ => false,
        };
        listing
            && self.candidates.len() == other.candidates.len()
            && self.candidates.iter().zip(&other.candidates).all(|(a, b)| {
                a.dir_name == b.dir_name
                    && a.skill_md == b.skill_md
                    && a.version == b.version
                    && a.size == b.size
                    && a.from_entry == b.from_entry
                    && a.sha256 == b.sha256
                    && (a.version.is_some() || a.outcome.same_as(&b.outcome))
            })
    }
}

#[derive(Debug, Clone)]
struct Candidate {
    dir_name: String,
    skill_md: VPath,
    /// The SKILL.md's version when last read, if it was read.
    version: Option<Version>,
    /// Its size then, where known.
    size: Option<u64>,
    /// Its frontmatter's YAML, kept where a local cache applies or when
    /// taken from an entry.
    yaml: Option<Arc<str>>,
    /// The SHA-256 of the whole file, when it was read whole or an entry
    /// named it.
    sha256: Option<String>,
    /// Whether its outcome was taken from an index or cache entry rather
    /// than from its file: the entry is then held to the file whenever the
    /// file is read whole ([`crate::integrity::pin::Claim`]).
    from_entry: bool,
    outcome: Outcome,
    /// The winner it makes, when it is a skill: built once per version and
    /// shared by every catalog that merges this source's state.
    skill: Option<Skill>,
}

impl Candidate {
    fn new(dir_name: String, skill_md: VPath) -> Self {
        Candidate {
            dir_name,
            skill_md,
            version: None,
            size: None,
            yaml: None,
            sha256: None,
            from_entry: false,
            outcome: Outcome::NotASkill,
            skill: None,
        }
    }

    /// Builds [`Candidate::skill`] from its outcome, unless the one it has
    /// still says the same.
    fn prepare(&mut self, source: &Source) {
        let Outcome::Loaded { metadata, .. } = &self.outcome else {
            self.skill = None;
            return;
        };
        let version = self.version.clone().unwrap_or_else(|| Version::new(""));
        let current = self.skill.as_ref().is_some_and(|s| {
            Arc::ptr_eq(&s.metadata, metadata)
                && s.path == self.skill_md
                && s.version == version
                && s.source == source.name()
                && s.commit.as_ref() == source.commit()
        });
        if !current {
            self.skill = Some(Skill::from(SkillRecord {
                enabled: true,
                metadata: Arc::clone(metadata),
                path: self.skill_md.clone(),
                source: source.name().to_owned(),
                shadowed: Vec::new(),
                version,
                commit: source.commit().cloned(),
                digest: None,
                signer: None,
            }));
        }
    }

    /// True when its outcome came from an entry that the bytes of its
    /// version, as hashed since, are known not to match.
    fn refuted(&self, digests: &FileDigests) -> bool {
        self.from_entry
            && self.claim().is_some_and(|(claim, version)| {
                digests
                    .head(self.skill_md.as_str(), &version)
                    .is_some_and(|head| !claim.agrees_with(&head))
            })
    }

    /// The claim its entry makes of its file, with the version it names,
    /// when its outcome came from an entry.
    fn claim(&self) -> Option<(Claim, Version)> {
        if !self.from_entry {
            return None;
        }
        let version = self.version.clone()?;
        let claim = Claim {
            dir: self.skill_md.parent()?,
            version: version.clone(),
            sha256: self.sha256.clone(),
            yaml: Arc::clone(self.yaml.as_ref()?),
        };
        Some((claim, version))
    }

    /// The path of its file relative to the source (`pdf/SKILL.md`).
    fn key(&self) -> String {
        let file = self.skill_md.as_str().rsplit('/').next().unwrap_or(SKILL_FILE);
        format!("{}/{file}", self.dir_name)
    }
}

#[derive(Debug, Clone)]
enum Outcome {
    /// No SKILL.md: not a skill, and nothing to report.
    NotASkill,
    /// Parsed; the diagnostics are warnings.
    Loaded {
        metadata: Arc<SkillMetadata>,
        diagnostics: Vec<Diagnostic>,
    },
    /// Unusable; the diagnostics say why.
    Rejected { diagnostics: Vec<Diagnostic> },
}

impl Outcome {
    /// True when both say the same without a version to tell them by: no
    /// skill, or refused for the same reasons.
    fn same_as(&self, other: &Outcome) -> bool {
        match (self, other) {
            (Outcome::NotASkill, Outcome::NotASkill) => true,
            (Outcome::Rejected { diagnostics: a }, Outcome::Rejected { diagnostics: b }) => a == b,
            _ => false,
        }
    }
}

/// Work for one candidate during a load or refresh.
struct Job {
    source: usize,
    candidate: usize,
    /// `SOURCE/DIR/SKILL.md`.
    skill_md: VPath,
    /// The outcome of the last load, reused if the SKILL.md is unchanged.
    previous: Option<Candidate>,
    /// Whether to keep the frontmatter's YAML (for the local cache).
    keep_yaml: bool,
}

impl Job {
    /// The name of the skill's directory.
    fn dir_name(&self) -> &str {
        self.skill_md
            .as_str()
            .rsplit('/')
            .nth(1)
            .expect("a SKILL.md below a source")
    }
}

/// What a job found.
struct Done {
    candidate: usize,
    /// The version and size of the file read, if it was read.
    version: Option<Version>,
    size: Option<u64>,
    /// The file read: `SKILL.md`, or `skill.md` when only that is there.
    path: VPath,
    outcome: Outcome,
    /// The frontmatter's YAML, when the job was asked to keep it.
    yaml: Option<Arc<str>>,
    /// The SHA-256 of the whole file, when kept and read whole.
    sha256: Option<String>,
    /// Whether the outcome is a previous one taken from an entry.
    from_entry: bool,
}

/// A skill directory found by a deep listing: its name, its file's name
/// and the listed version and size.
type DeepSkill = (String, &'static str, Option<(Version, u64)>, bool);

/// A source's skill directories as a deep listing gives them.
struct DeepSource {
    /// Directory name, file name, the listed version and size (`None`
    /// when the file must be read to know what it is), and whether the
    /// listing shows `SKILL.md` as a directory, in ascending order of
    /// `"<name>/"`.
    skills: Vec<DeepSkill>,
    /// Names no path can hold (escaped).
    odd: Vec<String>,
    /// The index's listed version and size.
    index: Option<(Version, u64)>,
}

impl Catalog {
    /// Loads every source of `sources` from `backend`. Never fails as a
    /// whole: an unreachable source or a bad skill becomes a diagnostic and
    /// the rest loads.
    pub async fn load(backend: Arc<dyn SkillBackend>, sources: SourceList, options: LoadOptions) -> Catalog {
        let empty = Catalog {
            backend: served(&backend, Arc::new(Pins::new())),
            pins: Arc::new(Pins::new()),
            storage: backend,
            sources: Arc::new(sources),
            options: Arc::new(options),
            states: Vec::new(),
            skills: Vec::new(),
            index: NameIndex::default(),
            diagnostics: Vec::new(),
            cache: Arc::new(OnceLock::new()),
        };
        empty.reload(None).await
    }

    /// A new catalog reflecting the sources now. Unchanged SKILL.md files
    /// are not read again (their versions are checked with a stat); a
    /// source that cannot be listed keeps its last good skills, with a
    /// `source_stale` diagnostic.
    pub async fn refresh(&self) -> Catalog {
        self.reload(Some(&self.states)).await
    }

    /// [`Catalog::refresh`], or `None` when it would give this catalog
    /// again: every source listed the same files at the same versions (a
    /// shared source's state unchanged in its pool), no skill is withdrawn
    /// and no integrity check applies, so nothing would be read or merged
    /// differently.
    pub async fn refresh_if_changed(&self) -> Option<Catalog> {
        let next = self.reload(Some(&self.states)).await;
        (!self.made_from(&next.states)).then_some(next)
    }

    /// True when this catalog is what `states` would make: the very same
    /// source states, no skill withdrawn since, and no integrity check to
    /// run again.
    fn made_from(&self, states: &[Arc<SourceState>]) -> bool {
        states.len() == self.states.len()
            && states.iter().zip(&self.states).all(|(a, b)| Arc::ptr_eq(a, b))
            && self.withdrawn_count() == 0
            && !self.options.integrity.as_ref().is_some_and(|c| c.is_active())
    }

    async fn reload(&self, previous: Option<&[Arc<SourceState>]>) -> Catalog {
        let started = std::time::Instant::now();
        // Candidates go to the backend in batches of the size it prefers,
        // with about `concurrency` candidates in flight across all sources
        // (and at least eight batches, so every core has parsing to do).
        // Each source is listed and read on its own, so a slow source holds
        // up no other.
        let batch = self.storage.preferred_batch().max(1);
        let parallel = self.options.concurrency.div_ceil(batch).max(8);
        let permits = Arc::new(tokio::sync::Semaphore::new(parallel));
        let loads = self.sources.iter().enumerate().map(|(i, source)| {
            let permits = &permits;
            async move {
                let before = previous.and_then(|p| p.get(i));
                match self.options.shared.as_ref().and_then(|s| s.key(i)) {
                    Some((pool, key)) => pool.state(key, self, i).await,
                    None => {
                        let next = self.load_source(i, source, before.map(|b| &**b), batch, permits).await;
                        match before {
                            Some(before) if next.same_as(before) => Arc::clone(before),
                            _ => Arc::new(next),
                        }
                    }
                }
            }
        });
        let states = futures::future::join_all(loads).await;
        if previous.is_some() && self.made_from(&states) {
            return self.clone();
        }
        let catalog = self.with_states(states).checked().await;
        tracing::debug!(
            sources = self.sources.len(),
            skills = catalog.skills.len(),
            diagnostics = catalog.diagnostics.len(),
            loaded_ms = started.elapsed().as_secs_f64() * 1e3,
            "catalog loaded"
        );
        catalog
    }

    /// A catalog over the same storage, sources and options, with no
    /// state and no pool: what a [`crate::source_pool::SourcePool`] keeps
    /// to load a shared source again.
    pub(crate) fn without_pool(&self) -> Catalog {
        let mut options = LoadOptions::clone(&self.options);
        options.shared = None;
        Catalog {
            backend: Arc::clone(&self.storage),
            pins: Arc::new(Pins::new()),
            storage: Arc::clone(&self.storage),
            sources: Arc::clone(&self.sources),
            options: Arc::new(options),
            states: Vec::new(),
            skills: Vec::new(),
            index: NameIndex::default(),
            diagnostics: Vec::new(),
            cache: Arc::clone(&self.cache),
        }
    }

    /// Lists source `index` and reads what changed since `before` (see
    /// [`Catalog::refresh`]), on its own.
    pub(crate) async fn load_one_source(&self, index: usize, before: Option<&SourceState>) -> SourceState {
        let source = self.sources.iter().nth(index).expect("a source of this catalog");
        let batch = self.storage.preferred_batch().max(1);
        let parallel = self.options.concurrency.div_ceil(batch).max(8);
        let permits = Arc::new(tokio::sync::Semaphore::new(parallel));
        self.load_source(index, source, before, batch, &permits).await
    }

    /// The local cache, when the options ask for one and it can be opened.
    fn local_cache(&self) -> Option<&LocalCache> {
        self.cache
            .get_or_init(|| self.options.cache.as_ref().and_then(LocalCache::open))
            .as_ref()
    }

    /// Lists one source and reads what changed since `before`: by a deep
    /// listing where the backend has one (unchanged files are known by
    /// their listed versions; others come from the local cache or the
    /// source's index when their versions match, or are read), otherwise
    /// directory by directory.
    async fn load_source(
        &self,
        i: usize,
        source: &Source,
        before: Option<&SourceState>,
        batch: usize,
        permits: &Arc<tokio::sync::Semaphore>,
    ) -> SourceState {
        let backend = &*self.storage;
        let deep = if backend.capabilities_at(source.path()).deep_list {
            list_deep_source(backend, source).await
        } else {
            None
        };
        let location = match (&deep, &self.options.cache) {
            (Some(_), Some(_)) => backend.location_id(source.path()),
            _ => None,
        };
        let mut notes = Vec::new();
        let mut candidates = Vec::new();
        let mut work = Vec::new();
        let mut cache_dirty = false;
        // Candidates taken from the local cache in this load: with those
        // read in this load, all the cache may keep. An entry taken from the
        // source's index is a claim nobody checked, and never becomes one.
        let mut from_cache: std::collections::HashSet<usize> = std::collections::HashSet::new();
        let deep_listed = deep.is_some();
        match deep {
            Some(deep) => {
                notes.extend(deep.odd.iter().map(|name| invalid_key(source, name)));
                let known: HashMap<&str, &Candidate> = before
                    .map(|s| s.candidates.iter().map(|c| (c.dir_name.as_str(), c)).collect())
                    .unwrap_or_default();
                // Candidates whose listed version may be found in the cache
                // or the index: (position, listed version and size).
                let mut pending: Vec<(usize, Version, u64)> = Vec::new();
                for (dir_name, file, listed, is_dir) in deep.skills {
                    let skill_md = skill_file(source, &dir_name)
                        .map(|p| with_file(&p, file))
                        .expect("checked when listed");
                    if is_dir {
                        // `SKILL.md` is a directory here (on S3, a key that
                        // is also a prefix): what a read of a directory
                        // answers, without a read that an object store
                        // would answer with the object's bytes.
                        let mut candidate = Candidate::new(dir_name, skill_md.clone());
                        let err = skillstore_backends::Error::at(ErrorKind::IsADirectory, &skill_md);
                        candidate.outcome = outcome_of_error(source, &skill_md, &err);
                        candidates.push(candidate);
                        continue;
                    }
                    if let (Some((version, _)), Some(old)) = (&listed, known.get(dir_name.as_str()))
                        && old.version.as_ref() == Some(version)
                        && old.skill_md == skill_md
                        && !old.refuted(&self.options.digests)
                    {
                        candidates.push((*old).clone());
                        continue;
                    }
                    let at = candidates.len();
                    candidates.push(Candidate::new(dir_name, skill_md));
                    match listed {
                        Some((version, size)) if size <= self.options.read_limit => pending.push((at, version, size)),
                        _ => work.push(at),
                    }
                }
                if !pending.is_empty()
                    && let Some(location) = &location
                    && let Some(cache) = self.local_cache()
                {
                    let cached = cache.load(location);
                    let digests = &self.options.digests;
                    pending.retain(|(at, version, size)| {
                        let candidate = &mut candidates[*at];
                        match cached.get(&candidate.key()) {
                            Some(entry) if entry.version == *version && entry.size == *size => {
                                let taken = take_entry(source, candidate, entry, true, digests);
                                if taken {
                                    from_cache.insert(*at);
                                }
                                !taken
                            }
                            _ => true,
                        }
                    });
                }
                if !pending.is_empty()
                    && let Some(listed_index) = &deep.index
                {
                    let used = apply_index(
                        backend,
                        source,
                        listed_index,
                        &mut candidates,
                        &mut pending,
                        &self.options.digests,
                    )
                    .await;
                    cache_dirty |= used.0 > 0;
                    notes.extend(used.1);
                }
                work.extend(pending.into_iter().map(|(at, _, _)| at));
                work.sort_unstable();
            }
            None => match list_source(backend, source).await {
                Ok((dirs, odd)) => {
                    let known: HashMap<&str, &Candidate> = before
                        .map(|s| s.candidates.iter().map(|c| (c.dir_name.as_str(), c)).collect())
                        .unwrap_or_default();
                    for dir_name in dirs {
                        let skill_md = skill_file(source, &dir_name).expect("checked when listed");
                        let mut candidate = Candidate::new(dir_name, skill_md);
                        // A skill read from `skill.md` is checked there.
                        if let Some(old) = known.get(candidate.dir_name.as_str()) {
                            candidate.skill_md = old.skill_md.clone();
                        }
                        work.push(candidates.len());
                        candidates.push(candidate);
                    }
                    notes.extend(odd.iter().map(|name| invalid_key(source, name)));
                }
                Err(err) => return failed_state(source, before, &err),
            },
        }

        let known: HashMap<&str, &Candidate> = before
            .filter(|_| !deep_listed)
            .map(|s| s.candidates.iter().map(|c| (c.dir_name.as_str(), c)).collect())
            .unwrap_or_default();
        let jobs: Vec<Job> = work
            .iter()
            .map(|&at| {
                let candidate = &candidates[at];
                Job {
                    source: i,
                    candidate: at,
                    skill_md: candidate.skill_md.clone(),
                    // Only a listing without versions needs a stat to tell
                    // an unchanged file.
                    previous: known.get(candidate.dir_name.as_str()).map(|old| (*old).clone()),
                    keep_yaml: location.is_some(),
                }
            })
            .collect();
        let read_any = !jobs.is_empty();
        for done in self.run_jobs(jobs, batch, permits).await {
            let candidate = &mut candidates[done.candidate];
            candidate.version = done.version;
            candidate.size = done.size;
            candidate.skill_md = done.path;
            candidate.outcome = done.outcome;
            candidate.yaml = done.yaml;
            candidate.sha256 = done.sha256;
            candidate.from_entry = done.from_entry;
        }
        if let Some(location) = &location
            && (read_any || cache_dirty)
            && let Some(cache) = self.local_cache()
        {
            let entries: Entries = candidates
                .iter()
                .enumerate()
                .filter(|(at, c)| !c.from_entry || from_cache.contains(at))
                .filter_map(|(_, c)| {
                    let entry = HeadEntry {
                        version: c.version.clone()?,
                        size: c.size?,
                        sha256: c.sha256.clone(),
                        yaml: c.yaml.as_deref()?.to_owned(),
                    };
                    Some((c.key(), entry))
                })
                .collect();
            cache.store(location, &entries);
        }
        for candidate in &mut candidates {
            candidate.prepare(source);
        }
        SourceState {
            listing: Listing::Loaded(notes),
            candidates,
        }
    }

    /// Runs the jobs in batches, each batch a task of its own once a permit
    /// is free, so parsing spreads over every core while other batches
    /// wait on storage.
    async fn run_jobs(&self, jobs: Vec<Job>, batch: usize, permits: &Arc<tokio::sync::Semaphore>) -> Vec<Done> {
        let mut batches = Vec::with_capacity(jobs.len().div_ceil(batch));
        let mut jobs = jobs.into_iter().peekable();
        while jobs.peek().is_some() {
            batches.push(jobs.by_ref().take(batch).collect::<Vec<Job>>());
        }
        // At most `parallel` batches of this source spawned at once; the
        // permits bound those running across sources.
        let parallel = self.options.concurrency.div_ceil(batch).max(8);
        futures::stream::iter(batches)
            .map(|batch| {
                let backend = Arc::clone(&self.storage);
                let sources = Arc::clone(&self.sources);
                let options = Arc::clone(&self.options);
                let permits = Arc::clone(permits);
                tokio::spawn(async move {
                    let _permit = permits.acquire_owned().await.expect("the semaphore is never closed");
                    run_batch(&*backend, &sources, &options, batch).await
                })
            })
            .buffer_unordered(parallel)
            .map(|joined| joined.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic())))
            .collect::<Vec<Vec<Done>>>()
            .await
            .into_iter()
            .flatten()
            .collect()
    }

    /// A catalog over the same backend, sources and options with these
    /// source states, merged and indexed.
    fn with_states(&self, states: Vec<Arc<SourceState>>) -> Catalog {
        let (skills, index, mut diagnostics) = merge(&self.sources, &states, &self.options.filter);
        diagnostics.splice(0..0, self.options.standing.iter().cloned());
        // Winners a check will digest show what the digested bytes hold
        // ([`Catalog::set_checked`]); the others are held to their entries.
        let mut pins = Pins::new();
        if !self.options.integrity.as_ref().is_some_and(|c| c.is_active()) {
            add_claims(&mut pins, &states, &skills, &Pins::new());
        }
        let pins = Arc::new(pins.forgetting_in(Arc::clone(&self.options.digests)));
        Catalog {
            storage: Arc::clone(&self.storage),
            backend: served(&self.storage, Arc::clone(&pins)),
            pins,
            sources: Arc::clone(&self.sources),
            options: Arc::clone(&self.options),
            states,
            skills,
            index,
            diagnostics,
            cache: Arc::clone(&self.cache),
        }
    }

    /// A new catalog in which one skill directory of one source is read
    /// again (added, changed or gone), leaving every other skill as it was.
    /// This is how a write is seen at once, without a full refresh.
    pub async fn reload_skill(&self, source_name: &str, dir_name: &str) -> Result<Catalog> {
        let (index, source) = self
            .sources
            .iter()
            .enumerate()
            .find(|(_, s)| s.name() == source_name)
            .ok_or_else(|| Error::SourceNotFound(source_name.to_owned()))?;
        let skill_md = skill_file(source, dir_name).map_err(|e| Error::Usage(e.to_string()))?;
        let job = Job {
            source: index,
            candidate: 0,
            skill_md: skill_md.clone(),
            previous: None,
            keep_yaml: true,
        };
        let Done {
            version,
            size,
            path: skill_md,
            outcome,
            yaml,
            sha256,
            ..
        } = run_batch(&*self.storage, &self.sources, &self.options, vec![job])
            .await
            .pop()
            .expect("one job gives one result");
        let mut states = self.states.clone();
        if let Some(shared) = states.get_mut(index) {
            let mut state = SourceState::clone(shared);
            let candidates = &mut state.candidates;
            let at = candidates.binary_search_by(|c| slash_order(&c.dir_name, dir_name));
            match (at, &outcome) {
                (Ok(i), Outcome::NotASkill) => {
                    candidates.remove(i);
                }
                (Ok(i), _) => {
                    candidates[i].version = version;
                    candidates[i].size = size;
                    candidates[i].skill_md = skill_md;
                    candidates[i].outcome = outcome;
                    candidates[i].yaml = yaml;
                    candidates[i].sha256 = sha256;
                    candidates[i].from_entry = false;
                }
                (Err(_), Outcome::NotASkill) => {}
                (Err(i), _) if source.admits(dir_name) && dir_name != INDEX_DIR => candidates.insert(
                    i,
                    Candidate {
                        dir_name: dir_name.to_owned(),
                        skill_md,
                        version,
                        size,
                        yaml,
                        sha256,
                        from_entry: false,
                        outcome,
                        skill: None,
                    },
                ),
                (Err(_), _) => {}
            }
            for candidate in &mut state.candidates {
                candidate.prepare(source);
            }
            *shared = Arc::new(state);
        }
        Ok(self.with_states(states).checked().await)
    }

    /// This catalog without the named winners, each with its diagnostic
    /// when it has one: they are neither listed nor read, and what they
    /// shadowed stays shadowed (a withheld skill is never replaced by a
    /// lower layer's).
    fn withhold(mut self, refused: Vec<(String, Option<Diagnostic>)>) -> Catalog {
        let names: std::collections::HashSet<String> = refused.iter().map(|(n, _)| n.clone()).collect();
        self.skills.retain(|s| !names.contains(s.name()));
        let mut index = NameIndex::with_capacity(self.skills.len());
        for at in 0..self.skills.len() {
            index.insert(&self.skills, at);
        }
        self.index = index;
        self.diagnostics.extend(refused.into_iter().filter_map(|(_, d)| d));
        self
    }

    /// The diagnostics of winners withheld by an integrity check (a lock):
    /// a command that serves this catalog exits 3 when there is one.
    pub fn withheld(&self) -> impl Iterator<Item = &Diagnostic> {
        self.diagnostics.iter().filter(|d| d.kind.is_withheld())
    }

    /// The skill digest of the winner `name` ([`crate::integrity::digest`]):
    /// its files listed as a confined read serves them, each hashed once
    /// per version (kept in [`LoadOptions::digests`]). Computed only when
    /// asked for.
    pub async fn skill_digest(&self, name: &str) -> Result<SkillDigest> {
        let listed = self.skill_files(name, FileLimits::default()).await?;
        self.options.digests.skill_digest(self.backend.as_ref(), &listed).await
    }

    /// [`Catalog::skill_digest`] of each of `names`, in order, their
    /// listings batched ([`crate::skill_files::list_many`]): what a check
    /// of thousands of skills uses.
    pub async fn skill_digests(&self, names: &[&str]) -> Vec<Result<SkillDigest>> {
        self.listed_digests(names)
            .await
            .into_iter()
            .map(|found| found.map(|(_, digest)| digest))
            .collect()
    }

    /// [`Catalog::skill_digests`], each digest with the listing it was
    /// computed over (the files of both in the same order).
    pub(crate) async fn listed_digests(&self, names: &[&str]) -> Vec<Result<(SkillFiles, SkillDigest)>> {
        let limits = FileLimits::default();
        let dirs: Vec<Result<VPath>> = names.iter().map(|n| self.skill(n).map(|s| s.dir())).collect();
        let found: Vec<VPath> = dirs.iter().filter_map(|d| d.as_ref().ok().cloned()).collect();
        let mut listed = crate::skill_files::list_many(self.backend.as_ref(), &found, self.options.read_limit, limits)
            .await
            .into_iter();
        let listings: Vec<Result<SkillFiles>> = dirs
            .into_iter()
            .map(|dir| {
                let dir = dir?;
                let listed = listed.next().expect("one listing per directory")?;
                self.unpinned_left_out(&dir, listed, &limits)
            })
            .collect();
        futures::stream::iter(listings.into_iter().map(|listed| self.digest_of(listed)))
            .buffered(DIGEST_PARALLEL)
            .collect()
            .await
    }

    async fn digest_of(&self, listed: Result<SkillFiles>) -> Result<(SkillFiles, SkillDigest)> {
        let listed = listed?;
        let digests = &self.options.digests;
        let digest = digests.skill_digest(self.backend.as_ref(), &listed).await?;
        // A skill file hashed before (not read again) still holds the
        // entry the catalog showed it from to what its bytes were.
        for (file, digested) in listed.files.iter().zip(&digest.files) {
            if crate::skill::is_skill_file_name(&digested.relative)
                && let Some(version) = &digested.version
                && let Some(head) = digests.head(file.path.as_str(), version)
            {
                self.pins.check_claim(&file.path, version, &head);
            }
        }
        Ok((listed, digest))
    }

    /// This catalog with every winner's [`Skill::digest`] filled in (a
    /// skill that cannot be digested keeps none, with a warning). Files
    /// hashed before at the same version are not read again.
    pub async fn with_digests(mut self) -> Catalog {
        let names: Vec<String> = self
            .skills
            .iter()
            .filter(|s| s.digest.is_none())
            .map(|s| s.name().to_owned())
            .collect();
        let mut digests = self
            .skill_digests(&names.iter().map(String::as_str).collect::<Vec<_>>())
            .await
            .into_iter();
        let found: Vec<Option<Result<String>>> = self
            .skills
            .iter()
            .map(|s| {
                s.digest
                    .is_none()
                    .then(|| digests.next().expect("one digest per name").map(|d| d.digest))
            })
            .collect();
        let mut notes = Vec::new();
        for (skill, digest) in self.skills.iter_mut().zip(found) {
            let Some(digest) = digest else { continue };
            match digest {
                Ok(digest) => skill.digest = Some(Arc::from(digest)),
                Err(e) => notes.push(Diagnostic::new(
                    Severity::Warning,
                    match e.kind() {
                        crate::error::ErrorKind::Storage(kind) => DiagnosticKind::Storage(kind),
                        _ => DiagnosticKind::Storage(ErrorKind::Other),
                    },
                    Some(&skill.source),
                    Some(&skill.path),
                    format!("no digest: {e}"),
                )),
            }
        }
        self.diagnostics.extend(notes);
        self
    }

    /// Sets the digests and signers a check found, by winner name, and
    /// holds every read of a checked skill's files to the versions its
    /// digest was computed from ([`crate::integrity::pin`]).
    fn set_checked(&mut self, mut checked: HashMap<String, Passed>) {
        let files = checked.values().filter_map(|c| c.files.as_ref()).map(Vec::len).sum();
        let mut pins = Pins::with_capacity(checked.len(), files);
        let mut notes = Vec::new();
        for skill in &mut self.skills {
            if let Some(found) = checked.remove(skill.name()) {
                skill.digest = found.digest.as_deref().map(Arc::from);
                skill.signer = found.signer.as_deref().map(Arc::from);
                if let Some(files) = found.files {
                    pins.pin(skill.dir(), files);
                }
                if let Some(shown) = found.shown {
                    notes.push(Diagnostic::new(
                        Severity::Warning,
                        DiagnosticKind::IndexIgnored,
                        Some(&skill.source),
                        Some(&skill.path),
                        "an index or cache entry does not describe this SKILL.md; what is shown is read from the checked file",
                    ));
                    skill.metadata = shown;
                }
            }
        }
        self.diagnostics.extend(notes);
        add_claims(&mut pins, &self.states, &self.skills, &Pins::new());
        if !pins.is_empty() || pins.claims().next().is_some() {
            let pins = Arc::new(
                pins.forgetting_in(Arc::clone(&self.options.digests))
                    .checked_under(self.options.read_limit),
            );
            self.backend = served(&self.storage, Arc::clone(&pins));
            self.pins = pins;
        }
    }

    /// The file hashes this catalog's digests are computed through.
    pub fn file_digests(&self) -> &Arc<FileDigests> {
        &self.options.digests
    }

    /// An editor of the skills of the source `source_name`, writing through
    /// this catalog's backend. Fails with [`Error::ReadOnlySource`] unless
    /// the source is writable.
    pub fn editor(&self, source_name: &str) -> Result<crate::SkillEditor> {
        let source = self
            .sources
            .get(source_name)
            .ok_or_else(|| Error::SourceNotFound(source_name.to_owned()))?;
        crate::SkillEditor::new(Arc::clone(&self.storage), source).map(|e| e.with_limit(self.options.read_limit))
    }

    /// The skills, in deepagents' order, one per name.
    pub fn skills(&self) -> &[Skill] {
        &self.skills
    }

    /// The enabled skills, in order, without those withdrawn since their
    /// check ([`Catalog::is_withdrawn`]): the skills served.
    pub fn enabled(&self) -> impl Iterator<Item = &Skill> {
        let any_withdrawn = self.pins.withdrawn_count() > 0;
        self.skills
            .iter()
            .filter(move |s| s.enabled && !(any_withdrawn && self.pins.is_withdrawn(&s.dir())))
    }

    /// The skill named `name`.
    pub fn get(&self, name: &str) -> Option<&Skill> {
        self.index.get(&self.skills, name).map(|i| &self.skills[i])
    }

    /// Everything worth reporting about the load, sources first.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diagnostics
    }

    /// The sources, lowest priority first.
    pub fn sources(&self) -> &SourceList {
        &self.sources
    }

    /// The namespace the catalog reads from. Reads of the files of a
    /// skill that passed a lock or signature check return bytes only at
    /// the versions that check digested; anything changed, added or
    /// removed since is refused ([`crate::integrity::pin`]).
    pub fn backend(&self) -> &Arc<dyn SkillBackend> {
        &self.backend
    }

    /// True when some source could not be listed at the last refresh and
    /// its skills are the ones of an earlier load.
    pub fn is_stale(&self) -> bool {
        self.diagnostics.iter().any(|d| d.kind == DiagnosticKind::SourceStale)
    }

    /// The sources this catalog may not hold whole, by name, in source
    /// order: those that could not be listed ([`Catalog::unlisted_sources`]),
    /// those served from an earlier load (`source_stale`), and those where
    /// the storage refused or failed a skill's `SKILL.md` (an error-level
    /// `permission_denied`, `unavailable` or `other`), which leaves that
    /// skill unloaded for a reason that is not the skill's own. A command
    /// that prints such a catalog must not let it pass for a whole one.
    pub fn incomplete_sources(&self) -> Vec<&Source> {
        let storage_failed = |d: &Diagnostic| {
            d.severity == Severity::Error
                && matches!(
                    d.kind,
                    DiagnosticKind::SourceUnavailable
                        | DiagnosticKind::SourceStale
                        | DiagnosticKind::Storage(
                            ErrorKind::PermissionDenied | ErrorKind::Unavailable | ErrorKind::Other
                        )
                )
        };
        let mut names: Vec<&str> = self.unlisted_sources().iter().map(|s| s.name()).collect();
        for d in &self.diagnostics {
            if let Some(name) = d.source.as_deref()
                && (d.kind == DiagnosticKind::SourceStale || storage_failed(d))
                && !names.contains(&name)
            {
                names.push(name);
            }
        }
        self.sources.iter().filter(|s| names.contains(&s.name())).collect()
    }

    /// The sources that could not be listed at the last load and have no
    /// earlier load to stand in for them: the catalog holds none of their
    /// skills, so it is not the whole namespace. A stale source (served
    /// from an earlier load) is not among them; a missing one
    /// (`source_not_found`) is not either.
    pub fn unlisted_sources(&self) -> Vec<&Source> {
        let mut unlisted: Vec<&Source> = Vec::new();
        for d in &self.diagnostics {
            let Some(source) = d.source.as_deref().and_then(|name| self.sources.get(name)) else {
                continue;
            };
            if d.severity == Severity::Error
                && d.path.as_ref() == Some(source.path())
                && !unlisted.iter().any(|s| s.name() == source.name())
            {
                unlisted.push(source);
            }
        }
        unlisted
    }

    fn skill(&self, name: &str) -> Result<&Skill> {
        self.get(name).ok_or_else(|| Error::SkillNotFound(name.to_owned()))
    }

    /// Level 2: the whole SKILL.md of the winning skill, read through the
    /// source that won, under the read limit.
    pub async fn read_skill(&self, name: &str) -> Result<Bytes> {
        let skill = self.skill(name)?;
        let options = ReadOptions::with_limit(self.options.read_limit).confined(skill.dir().segments().count());
        Ok(self.backend.read(&skill.path, options).await?.data)
    }

    /// A read of the file at `path` as a front end that names files by
    /// virtual path serves a checked namespace: `path` must lie in the
    /// directory of a served skill ([`Catalog::enabled`]), and is read
    /// confined to that directory through [`Catalog::backend`], under
    /// `limit` and the read limit. Any other path is not found, so no byte of a withheld,
    /// shadowed, disabled or withdrawn skill, and nothing outside the
    /// skills, is read this way.
    pub async fn read_served_path(&self, path: &VPath, limit: u64) -> Result<skillstore_backends::Blob> {
        let text = path.as_str();
        let owner = self.enabled().find(|skill| {
            let dir = skill.path.as_str().rsplit_once('/').map_or("", |(dir, _)| dir);
            text.len() > dir.len() + 1 && text.starts_with(dir) && text.as_bytes()[dir.len()] == b'/'
        });
        let Some(skill) = owner else {
            return Err(skillstore_backends::Error::at(ErrorKind::NotFound, path)
                .with_public_detail("not a file of a skill this catalog serves")
                .into());
        };
        let options =
            ReadOptions::with_limit(limit.min(self.options.read_limit)).confined(skill.dir().segments().count());
        Ok(self.backend.read(path, options).await?)
    }

    /// Level 3: a file inside the skill's directory, by a relative path
    /// such as `references/forms.md`. `..`, `.`, empty segments, absolute
    /// paths and anything else that could leave the directory are refused
    /// before any read.
    pub async fn read_file(&self, name: &str, relative: &str) -> Result<Bytes> {
        let skill = self.skill(name)?;
        let path = resolve_inside(skill, relative)?;
        // Confined: once links resolve, the read must still be inside the
        // skill's directory.
        let options = ReadOptions::with_limit(self.options.read_limit).confined(skill.dir().segments().count());
        Ok(self.backend.read(&path, options).await?.data)
    }

    /// The files of the skill `name`: exactly those a confined read of it
    /// ([`Catalog::read_file`]) serves, each with its size and version, and
    /// what was left out with why (see [`crate::skill_files`]). This is the
    /// one listing of a skill's files: manifests, digests and listings
    /// start here, and read the files with [`SkillFiles::read_options`].
    pub async fn skill_files(&self, name: &str, limits: FileLimits) -> Result<SkillFiles> {
        let skill = self.skill(name)?;
        let dir = skill.dir();
        let listed = crate::skill_files::list(self.backend.as_ref(), &dir, self.options.read_limit, limits).await?;
        self.unpinned_left_out(&dir, listed, &limits)
    }

    /// `listed` without the files added since the skill at `dir` was
    /// checked, when it is pinned: those are not files of it. A file
    /// checked that is gone, or no longer a file a confined read serves,
    /// refuses the listing: the skill cannot be handed on whole.
    ///
    /// A checked file listed at another version than its check's, or not
    /// listed at all, withdraws the skill ([`crate::integrity::pin`]): no
    /// file of it is read any more until a refresh checks it again.
    fn unpinned_left_out(&self, dir: &VPath, mut listed: SkillFiles, limits: &FileLimits) -> Result<SkillFiles> {
        let Some(checked) = self.pins.files_of(dir) else {
            return Ok(listed);
        };
        let changed = |path: &VPath| {
            skillstore_backends::Error::at(ErrorKind::VersionConflict, path)
                .with_public_detail(crate::integrity::pin::CHANGED)
                .into()
        };
        if let Some(refused) = self.pins.withdrawn_refusal(dir) {
            return Err(refused.into());
        }
        listed.leave_out_where(|f| !self.pins.admits(&f.path), LeftOutKind::Changed, limits);
        for file in &listed.files {
            if let Some(version) = &file.version
                && self.pins.withdraw_if_changed(&file.path, version)
            {
                return Err(changed(&file.path));
            }
        }
        if let Some(lost) = lost_file(&listed, dir, checked, limits) {
            self.pins.withdraw(dir, lost);
            return Err(changed(lost));
        }
        Ok(listed)
    }

    /// True when the winner `name` passed a lock or signature check and
    /// has since been withdrawn: some read or listing found one of its
    /// checked files changed or gone, so none of its files is served until
    /// a refresh checks it again. A front end that lists skills from an
    /// earlier rendering leaves such a skill out.
    pub fn is_withdrawn(&self, name: &str) -> bool {
        self.withdrawn_refusal(name).is_some()
    }

    /// True when `path` lies in a checked skill withdrawn since its check
    /// ([`Catalog::is_withdrawn`]): a front end holding bytes of that skill
    /// read earlier (an open file) serves them no more.
    pub fn is_withdrawn_path(&self, path: &VPath) -> bool {
        self.pins.is_withdrawn_path(path)
    }

    /// Why the winner `name` is not served when it is withdrawn
    /// ([`Catalog::is_withdrawn`]): changed since its check, naming the
    /// file found changed or gone. `None` otherwise.
    pub fn withdrawn_refusal(&self, name: &str) -> Option<Error> {
        if self.pins.withdrawn_count() == 0 {
            return None;
        }
        let skill = self.get(name)?;
        self.pins.withdrawn_refusal(&skill.dir()).map(Error::from)
    }

    /// Makes sure the checked winner `name` is still whole before a front
    /// end answers for it from what it rendered earlier: its files are
    /// listed again (no file is read) and the skill is withdrawn, and this
    /// fails as changed, when one checked file is gone or listed at
    /// another version. Does nothing for a skill no check digested.
    pub async fn confirm_whole(&self, name: &str) -> Result<()> {
        let skill = self.skill(name)?;
        if self.pins.files_of(&skill.dir()).is_none() {
            return Ok(());
        }
        self.skill_files(name, FileLimits::default()).await.map(|_| ())
    }

    /// The number of skills this catalog has withdrawn so far (see
    /// [`Catalog::is_withdrawn`]). It only grows: a front end that renders
    /// listings from a catalog once renders them again when it moves.
    pub fn withdrawn_count(&self) -> usize {
        self.pins.withdrawn_count()
    }

    /// The files of the winner `name` that a lock or signature check read
    /// and digested, when one did: a front end that hands the skill on
    /// whole (a sync, an archive) serves it only when each of them reads
    /// at its checked version, and withholds it otherwise. `None` for a
    /// skill no check digested (or no winner of that name).
    pub fn checked_files(&self, name: &str) -> Option<&[VPath]> {
        let skill = self.get(name)?;
        self.pins.files_of(&skill.dir())
    }

    /// The relative paths of [`Catalog::skill_files`], at most `max_depth`
    /// directories deep and `max_files` in all; the second value is true
    /// when the listing was cut short.
    pub async fn list_files(&self, name: &str, max_depth: usize, max_files: usize) -> Result<(Vec<String>, bool)> {
        let files = self
            .skill_files(
                name,
                FileLimits {
                    max_depth,
                    max_files,
                    ..FileLimits::default()
                },
            )
            .await?;
        Ok((files.relatives(), files.truncated))
    }
}

/// A file of `checked` (a checked skill's files, below `dir`) that
/// `listed` does not hold although its bounds would have listed it.
fn lost_file<'a>(listed: &SkillFiles, dir: &VPath, checked: &'a [VPath], limits: &FileLimits) -> Option<&'a VPath> {
    if listed.truncated {
        return None;
    }
    let present: std::collections::HashSet<&VPath> = listed.files.iter().map(|f| &f.path).collect();
    let base = dir.segments().count() + 1;
    checked
        .iter()
        .find(|p| !present.contains(p) && p.segments().count().saturating_sub(base) <= limits.max_depth)
}

/// What a catalog over `storage` serves its skills through.
fn served(storage: &Arc<dyn SkillBackend>, pins: Arc<Pins>) -> Arc<dyn SkillBackend> {
    Arc::new(PinnedBackend::new(Arc::clone(storage), pins))
}

/// The path of `relative` inside the skill's directory, or why not.
fn resolve_inside(skill: &Skill, relative: &str) -> Result<VPath> {
    let refuse = |reason: String| Error::InvalidSkillPath {
        skill: skill.metadata.name.clone(),
        path: relative.escape_debug().to_string(),
        reason,
    };
    if relative.starts_with('/') {
        return Err(refuse("expected a path relative to the skill's directory".into()));
    }
    let path = skill.dir().join(relative).map_err(|e| refuse(e.to_string()))?;
    debug_assert!(path.starts_with(&skill.dir()));
    Ok(path)
}

/// Lists a source: the names of its subdirectories (or entries that may be
/// links to some) it admits, in ascending order of `"<name>/"`.
/// Lists a source: the names of its subdirectories (or entries that may be
/// links to some) it admits, in ascending order of `"<name>/"`, and the
/// names (escaped) no path can hold.
async fn list_source(
    backend: &dyn SkillBackend,
    source: &Source,
) -> skillstore_backends::Result<(Vec<String>, Vec<String>)> {
    let listing = backend.list_detailed(source.path()).await.inspect_err(|e| {
        tracing::debug!(source = source.name(), path = %source.path(), error = %e, "cannot list a source");
    })?;
    // The longest directory name whose SKILL.md still fits in a path.
    let room = MAX_PATH_BYTES.saturating_sub(source.path().as_str().len() + 2 + SKILL_FILE.len());
    let mut odd = listing.invalid;
    let mut names: Vec<String> = Vec::with_capacity(listing.entries.len());
    for entry in listing.entries {
        if !matches!(entry.kind, EntryKind::Dir | EntryKind::Other) {
            continue;
        }
        // A backend of someone else's making could list a name no path can
        // hold; it cannot be a skill.
        if !is_valid_segment(&entry.name) || entry.name.len() > room {
            odd.push(entry.name.escape_debug().to_string());
        } else if source.admits(&entry.name) && entry.name != INDEX_DIR {
            names.push(entry.name);
        }
    }
    names.sort_unstable_by(|a, b| slash_order(a, b));
    odd.sort();
    Ok((names, odd))
}

/// Orders directory names as their paths with a trailing `/` compare
/// (`foo-kit/` before `foo/`, since `-` sorts before `/`).
fn slash_order(a: &str, b: &str) -> std::cmp::Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let common = a.len().min(b.len());
    // Past the common length the shorter name's `/` is compared; names
    // hold no `/`, so the order is settled there.
    a[..common]
        .cmp(&b[..common])
        .then_with(|| a.get(common).unwrap_or(&b'/').cmp(b.get(common).unwrap_or(&b'/')))
}

/// The SKILL.md of the directory `dir_name` of a source.
fn skill_file(source: &Source, dir_name: &str) -> skillstore_backends::Result<VPath> {
    let mut relative = String::with_capacity(dir_name.len() + 1 + SKILL_FILE.len());
    relative.push_str(dir_name);
    relative.push('/');
    relative.push_str(SKILL_FILE);
    source.path().join(&relative)
}

/// What a diagnostic says of a backend error: its kind, and the reason a
/// backend wrote for callers to see
/// ([`public_detail`](skillstore_backends::Error::public_detail)), such as
/// why a discovery entry was refused; any other detail only in the log.
fn shown_cause(err: &skillstore_backends::Error) -> String {
    match err.public_detail() {
        Some(detail) => format!("{} ({detail})", err.kind().describe()),
        None => err.kind().describe().to_owned(),
    }
}

/// The diagnostic of a source that cannot be listed. Its message is made
/// of the error's kind and the source's virtual path only: a backend's own
/// message may name an endpoint, a bucket or a host path, so it goes to
/// the debug log alone.
fn source_failure(source: &Source, err: &skillstore_backends::Error) -> Diagnostic {
    let (severity, kind) = match err.kind() {
        ErrorKind::NotFound => (Severity::Warning, DiagnosticKind::SourceNotFound),
        ErrorKind::Unavailable => (Severity::Error, DiagnosticKind::SourceUnavailable),
        other => (Severity::Error, DiagnosticKind::Storage(other)),
    };
    Diagnostic::new(
        severity,
        kind,
        Some(source.name()),
        Some(source.path()),
        format!("cannot list the source {}: {}", source.path(), shown_cause(err)),
    )
}

/// Stats the candidates loaded before (reusing those unchanged), then reads
/// and parses the rest, each step as one batched backend call.
async fn run_batch(
    backend: &dyn SkillBackend,
    sources: &SourceList,
    options: &LoadOptions,
    jobs: Vec<Job>,
) -> Vec<Done> {
    let mut done = Vec::with_capacity(jobs.len());
    let (checks, mut reads): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| j.previous.is_some());
    if !checks.is_empty() {
        let paths: Vec<VPath> = checks.iter().map(|j| j.skill_md.clone()).collect();
        let stats = backend.stat_many(&paths).await;
        for (mut job, stat) in checks.into_iter().zip(stats) {
            let old = job.previous.take().expect("partitioned on previous");
            match stat {
                Ok(meta) if meta.version.is_some() && meta.version == old.version && !old.refuted(&options.digests) => {
                    done.push(Done {
                        candidate: job.candidate,
                        version: old.version,
                        size: old.size,
                        path: job.skill_md,
                        outcome: old.outcome,
                        yaml: old.yaml,
                        sha256: old.sha256,
                        from_entry: old.from_entry,
                    });
                }
                Err(err) if matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                    // Gone, or renamed between `SKILL.md` and `skill.md`:
                    // read again from the usual name.
                    job.skill_md = with_file(&job.skill_md, SKILL_FILE);
                    reads.push(job);
                }
                _ => reads.push(job),
            }
        }
    }
    if reads.is_empty() {
        return done;
    }
    let head = ReadOptions {
        limit: options.read_limit,
        prefix: Some(options.prefix_bytes),
        ..ReadOptions::default()
    };
    // Each SKILL.md is read confined to its skill's directory: one batch
    // per depth, since a confinement counts segments from the root.
    let mut blobs: Vec<Option<skillstore_backends::Result<skillstore_backends::Blob>>> =
        (0..reads.len()).map(|_| None).collect();
    let mut depths: Vec<usize> = reads.iter().map(|j| j.skill_md.segments().count()).collect();
    depths.sort_unstable();
    depths.dedup();
    for depth in depths {
        let (indexes, paths): (Vec<usize>, Vec<VPath>) = reads
            .iter()
            .enumerate()
            .filter(|(_, j)| j.skill_md.segments().count() == depth)
            .map(|(i, j)| (i, j.skill_md.clone()))
            .unzip();
        let read = backend.read_many(&paths, head.confined(depth - 1)).await;
        for (i, blob) in indexes.into_iter().zip(read) {
            blobs[i] = Some(blob);
        }
    }
    let blobs = blobs.into_iter().map(|b| b.expect("every read was made"));
    for (job, blob) in reads.into_iter().zip(blobs) {
        let source = sources.iter().nth(job.source).expect("index from the same list");
        done.push(finish(backend, source, &job, blob, options).await);
    }
    done
}

/// The file `name` in the directory of `skill_md`.
fn with_file(skill_md: &VPath, name: &str) -> VPath {
    skill_md
        .parent()
        .and_then(|dir| dir.join(name).ok())
        .expect("a SKILL.md has a parent, where a file of a shorter name fits")
}

/// Parses the head of a SKILL.md, reading a longer prefix when the
/// frontmatter does not close inside the first one. A directory without
/// `SKILL.md` but with `skill.md` is read from that, with a warning. The
/// path returned is the file's that was read.
async fn finish(
    backend: &dyn SkillBackend,
    source: &Source,
    job: &Job,
    first: skillstore_backends::Result<skillstore_backends::Blob>,
    options: &LoadOptions,
) -> Done {
    let failed = |path: &VPath, outcome: Outcome| Done {
        candidate: job.candidate,
        version: None,
        size: None,
        path: path.clone(),
        outcome,
        yaml: None,
        sha256: None,
        from_entry: false,
    };
    let mut skill_md = job.skill_md.clone();
    let first = match first {
        Ok(blob) => blob,
        Err(err) if err.kind() == ErrorKind::NotFound && skill_md.as_str().ends_with(SKILL_FILE) => {
            skill_md = with_file(&skill_md, LOWERCASE_SKILL_FILE);
            let head = ReadOptions {
                limit: options.read_limit,
                prefix: Some(options.prefix_bytes),
                ..ReadOptions::default()
            }
            .confined(skill_md.segments().count() - 1);
            match backend.read(&skill_md, head).await {
                Ok(blob) => blob,
                Err(err) => return failed(&job.skill_md, outcome_of_error(source, &skill_md, &err)),
            }
        }
        Err(err) => return failed(&skill_md, outcome_of_error(source, &skill_md, &err)),
    };
    let keep = |yaml: &str| job.keep_yaml.then(|| Arc::from(yaml));
    let parsed = match scan(&first.data, first.is_complete()) {
        Scan::Yaml(yaml) => Some((
            parse_frontmatter(yaml, Some(job.dir_name()), Strictness::Lenient),
            keep(yaml),
        )),
        Scan::Failed(parsed) => Some((parsed, None)),
        Scan::NeedMore => None,
    };
    let ((parsed, yaml), blob) = match parsed {
        Some(parsed) => (parsed, first),
        None => {
            let longer = ReadOptions {
                limit: options.read_limit,
                prefix: Some(MAX_FRONTMATTER_BYTES as u64 + 16),
                ..ReadOptions::default()
            }
            .confined(skill_md.segments().count() - 1);
            let second = match backend.read(&skill_md, longer).await {
                Ok(blob) => blob,
                Err(err) => return failed(&skill_md, outcome_of_error(source, &skill_md, &err)),
            };
            let parsed = match scan(&second.data, second.is_complete()) {
                Scan::Yaml(yaml) => (
                    parse_frontmatter(yaml, Some(job.dir_name()), Strictness::Lenient),
                    keep(yaml),
                ),
                Scan::Failed(parsed) => (parsed, None),
                Scan::NeedMore => unreachable!("a prefix past the frontmatter limit never needs more"),
            };
            (parsed, second)
        }
    };
    // A whole file's hash costs little next to its read, and lets the
    // local cache say which bytes its entry describes.
    let sha256 = (yaml.is_some() && blob.is_complete()).then(|| crate::integrity::sha256_hex(&blob.data));
    Done {
        candidate: job.candidate,
        version: Some(blob.version),
        size: Some(blob.size),
        outcome: outcome_of_parse(source, &skill_md, with_name_warning(parsed, &skill_md)),
        path: skill_md,
        yaml,
        sha256,
        from_entry: false,
    }
}

/// The parse with a warning first when the file is `skill.md`.
fn with_name_warning(mut parsed: Parsed, skill_md: &VPath) -> Parsed {
    if !skill_md.as_str().ends_with(SKILL_FILE) {
        parsed.problems.insert(
            0,
            Problem {
                kind: ProblemKind::LowercaseSkillMd,
                severity: Severity::Warning,
                message: format!(
                    "the file is named `{LOWERCASE_SKILL_FILE}`; the specification names it `{SKILL_FILE}`"
                ),
            },
        );
    }
    parsed
}

/// Gives `candidate` the outcome of a frontmatter taken from the local
/// cache or the index, exactly as a read of the file would give it. With
/// `any_name` false (the index), only an entry describing a valid skill
/// named after its directory is taken. An entry that the bytes of its
/// version, as hashed before ([`FileDigests::head`]), do not match is never
/// taken. `false` is returned when the entry is not taken.
fn take_entry(
    source: &Source,
    candidate: &mut Candidate,
    entry: &HeadEntry,
    any_name: bool,
    digests: &FileDigests,
) -> bool {
    if entry_refuted(&candidate.skill_md, entry, digests) {
        return false;
    }
    let parsed = parse_frontmatter(&entry.yaml, Some(&candidate.dir_name), Strictness::Lenient);
    let named_after_dir = parsed
        .skill
        .as_ref()
        .is_some_and(|skill| skill.name == candidate.dir_name);
    if !(any_name || named_after_dir) {
        return false;
    }
    candidate.version = Some(entry.version.clone());
    candidate.size = Some(entry.size);
    candidate.yaml = Some(Arc::from(entry.yaml.as_str()));
    candidate.sha256 = entry.sha256.clone();
    candidate.from_entry = true;
    candidate.outcome = outcome_of_parse(
        source,
        &candidate.skill_md,
        with_name_warning(parsed, &candidate.skill_md),
    );
    true
}

/// True when the bytes of `skill_md` at the entry's version, as hashed
/// before, are known not to be what the entry describes.
fn entry_refuted(skill_md: &VPath, entry: &HeadEntry, digests: &FileDigests) -> bool {
    digests.head(skill_md.as_str(), &entry.version).is_some_and(|head| {
        head.yaml.as_deref() != Some(entry.yaml.as_str()) || entry.sha256.as_deref().is_some_and(|h| h != head.sha256)
    })
}

/// Adds to `pins` the claims of the winners among `skills` whose outcome
/// came from an entry, except those `pinned` holds (their check digested
/// them).
fn add_claims(pins: &mut Pins, states: &[Arc<SourceState>], skills: &[Skill], pinned: &Pins) {
    if !states.iter().any(|s| s.candidates.iter().any(|c| c.from_entry)) {
        return;
    }
    let winners: std::collections::HashSet<&VPath> = skills
        .iter()
        .filter(|s| !pins.holds(&s.dir()) && !pinned.holds(&s.dir()))
        .map(|s| &s.path)
        .collect();
    let mut found = Vec::new();
    for candidate in states.iter().flat_map(|s| &s.candidates) {
        if winners.contains(&candidate.skill_md)
            && let Some((claim, _)) = candidate.claim()
        {
            found.push((candidate.skill_md.clone(), claim));
        }
    }
    for (file, claim) in found {
        pins.claim(file, claim);
    }
}

/// Reads the source's index and takes from it every pending candidate
/// whose entry matches the listed version and size; the candidates left in
/// `pending` are to be read. Returns how many were taken and a diagnostic
/// for what was not trusted.
async fn apply_index(
    backend: &dyn SkillBackend,
    source: &Source,
    (_, listed_size): &(Version, u64),
    candidates: &mut [Candidate],
    pending: &mut Vec<(usize, Version, u64)>,
    digests: &FileDigests,
) -> (usize, Option<Diagnostic>) {
    let path = source.path().join(INDEX_FILE).expect("the index's path fits");
    let note = |refused: Refused| {
        Some(Diagnostic::new(
            Severity::Warning,
            DiagnosticKind::IndexIgnored,
            Some(source.name()),
            Some(&path),
            refused.to_string(),
        ))
    };
    if *listed_size > MAX_INDEX_BYTES {
        return (
            0,
            note(Refused::Whole(format!(
                "{listed_size} bytes, over the limit of {MAX_INDEX_BYTES}"
            ))),
        );
    }
    let blob = match backend.read(&path, ReadOptions::with_limit(MAX_INDEX_BYTES)).await {
        Ok(blob) => blob,
        Err(err) if err.kind() == ErrorKind::NotFound => return (0, None),
        Err(err) => {
            tracing::debug!(source = source.name(), error = %err, "cannot read the index");
            return (0, note(Refused::Whole(shown_cause(&err))));
        }
    };
    let (entries, malformed) = match crate::index::parse(&blob.data) {
        Ok(parsed) => parsed,
        Err(refused) => return (0, note(refused)),
    };
    let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
    if malformed > 0 {
        counts.insert("malformed or outside the source", malformed);
    }
    let mut taken = 0;
    pending.retain(|(at, version, size)| {
        let candidate = &mut candidates[*at];
        let Some(entry) = entries.get(&candidate.key()) else {
            return true;
        };
        if entry.version != *version || entry.size != *size {
            *counts.entry("stale").or_default() += 1;
            return true;
        }
        if !entry.has_hash() {
            *counts.entry("naming no hash of their file").or_default() += 1;
            return true;
        }
        if entry_refuted(&candidate.skill_md, entry, digests) {
            *counts.entry("found not to describe their file").or_default() += 1;
            return true;
        }
        if take_entry(source, candidate, entry, false, digests) {
            taken += 1;
            false
        } else {
            *counts
                .entry("not describing a valid skill named after its directory")
                .or_default() += 1;
            true
        }
    });
    let diagnostic = (!counts.is_empty()).then(|| note(Refused::Entries(counts))).flatten();
    (taken, diagnostic)
}

/// The deep listing of a source, or `None` when the source is to be listed
/// by directory: the backend cannot list it deep, the listing failed,
/// found nothing (so the usual listing reports why), or was cut short by
/// [`DeepLimits`] (a source of far more files than skills).
async fn list_deep_source(backend: &dyn SkillBackend, source: &Source) -> Option<DeepSource> {
    let listing = match backend.list_deep(source.path(), DeepLimits::default()).await {
        Ok(listing) if !listing.truncated && !listing.files.is_empty() => listing,
        Ok(listing) => {
            tracing::debug!(
                source = source.name(),
                truncated = listing.truncated,
                "listing the source by directory"
            );
            return None;
        }
        Err(err) => {
            tracing::debug!(source = source.name(), error = %err, "no deep listing; listing by directory");
            return None;
        }
    };
    #[derive(Default)]
    struct Found {
        upper: Option<(Option<Version>, Option<u64>)>,
        lower: Option<(Option<Version>, Option<u64>)>,
        upper_is_dir: bool,
        lower_is_dir: bool,
    }
    let room = MAX_PATH_BYTES.saturating_sub(source.path().as_str().len() + 2 + SKILL_FILE.len());
    let mut dirs: HashMap<String, Found> = HashMap::new();
    let mut odd = Vec::new();
    let mut index = None;
    for file in listing.files {
        if file.relative == INDEX_FILE {
            index = file.version.zip(file.size);
            continue;
        }
        let Some((top, rest)) = file.relative.split_once('/') else {
            continue;
        };
        if top == INDEX_DIR || !source.admits(top) && top.len() <= room {
            continue;
        }
        if top.len() > room {
            odd.push(top.escape_debug().to_string());
            continue;
        }
        let found = match dirs.get_mut(top) {
            Some(found) => found,
            None => dirs.entry(top.to_owned()).or_default(),
        };
        let listed = Some((file.version, file.size));
        if rest == SKILL_FILE {
            found.upper = listed;
        } else if rest == LOWERCASE_SKILL_FILE {
            found.lower = listed;
        } else if rest.starts_with(SKILL_FILE) && rest.as_bytes().get(SKILL_FILE.len()) == Some(&b'/') {
            found.upper_is_dir = true;
        } else if rest.starts_with(LOWERCASE_SKILL_FILE)
            && rest.as_bytes().get(LOWERCASE_SKILL_FILE.len()) == Some(&b'/')
        {
            found.lower_is_dir = true;
        }
    }
    // As a read by directory would find them: SKILL.md, else skill.md;
    // anything odd (a directory where the file should be) is read to
    // report it as such a read does.
    let versioned = |listed: (Option<Version>, Option<u64>)| listed.0.zip(listed.1);
    let mut skills: Vec<DeepSkill> = dirs
        .into_iter()
        .filter_map(|(name, found)| {
            let (file, listed, is_dir) = match found {
                Found { upper: Some(l), .. } => (SKILL_FILE, versioned(l), false),
                Found { upper_is_dir: true, .. } => (SKILL_FILE, None, true),
                Found { lower: Some(l), .. } => (LOWERCASE_SKILL_FILE, versioned(l), false),
                Found { lower_is_dir: true, .. } => (SKILL_FILE, None, false),
                _ => return None,
            };
            Some((name, file, listed, is_dir))
        })
        .collect();
    skills.sort_unstable_by(|a, b| slash_order(&a.0, &b.0));
    odd.sort();
    odd.dedup();
    Some(DeepSource { skills, odd, index })
}

/// The warning for a name in a source no path can hold.
fn invalid_key(source: &Source, name: &str) -> Diagnostic {
    Diagnostic::new(
        Severity::Warning,
        DiagnosticKind::InvalidKey,
        Some(source.name()),
        Some(source.path()),
        format!("`{name}` cannot be a skill: no virtual path can hold its name"),
    )
}

/// The state of a source that cannot be listed now: its last good skills
/// with a `source_stale` warning, or none with the failure.
fn failed_state(source: &Source, before: Option<&SourceState>, err: &skillstore_backends::Error) -> SourceState {
    match before {
        Some(old) if matches!(old.listing, Listing::Loaded(_)) || !old.candidates.is_empty() => SourceState {
            listing: Listing::Failed(Diagnostic::new(
                Severity::Warning,
                DiagnosticKind::SourceStale,
                Some(source.name()),
                Some(source.path()),
                format!(
                    "cannot list the source now ({}); keeping the skills it had at the last load",
                    shown_cause(err)
                ),
            )),
            candidates: old.candidates.clone(),
        },
        _ => SourceState {
            listing: Listing::Failed(source_failure(source, err)),
            candidates: Vec::new(),
        },
    }
}

/// The outcome of a SKILL.md that cannot be read. As with a source, the
/// message is made of the kind and the virtual path; the backend's own
/// message goes to the debug log.
fn outcome_of_error(source: &Source, skill_md: &VPath, err: &skillstore_backends::Error) -> Outcome {
    let kind = match err.kind() {
        ErrorKind::NotFound | ErrorKind::NotADirectory => return Outcome::NotASkill,
        ErrorKind::TooLarge => DiagnosticKind::Problem(ProblemKind::FileTooLarge),
        other => DiagnosticKind::Storage(other),
    };
    tracing::debug!(source = source.name(), path = %skill_md, error = %err, "cannot read a skill");
    Outcome::Rejected {
        diagnostics: vec![
            Diagnostic::new(
                Severity::Error,
                kind,
                Some(source.name()),
                Some(skill_md),
                format!("cannot read {skill_md}: {}", shown_cause(err)),
            )
            .with_public_detail(err.public_detail()),
        ],
    }
}

fn outcome_of_parse(source: &Source, skill_md: &VPath, parsed: Parsed) -> Outcome {
    let diagnostics = parsed
        .problems
        .iter()
        .map(|p: &Problem| Diagnostic::new(p.severity, p.kind, Some(source.name()), Some(skill_md), &p.message))
        .collect();
    match parsed.skill {
        Some(metadata) => Outcome::Loaded {
            metadata: Arc::new(metadata),
            diagnostics,
        },
        None => Outcome::Rejected { diagnostics },
    }
}

/// Merges the sources' skills: later sources win, first positions stay.
fn merge(
    sources: &SourceList,
    states: &[Arc<SourceState>],
    filter: &SkillFilter,
) -> (Vec<Skill>, NameIndex, Vec<Diagnostic>) {
    let capacity = states.iter().map(|s| s.candidates.len()).sum();
    let mut winners: Vec<Skill> = Vec::with_capacity(capacity);
    let mut index = NameIndex::with_capacity(capacity);
    let mut diagnostics = Vec::new();
    for (source, state) in sources.iter().zip(states) {
        match &state.listing {
            Listing::Failed(diagnostic) => diagnostics.push(diagnostic.clone()),
            Listing::Loaded(notes) => diagnostics.extend(notes.iter().cloned()),
        }
        for candidate in &state.candidates {
            let metadata = match &candidate.outcome {
                Outcome::NotASkill => continue,
                Outcome::Rejected { diagnostics: found } => {
                    diagnostics.extend(found.iter().cloned());
                    continue;
                }
                Outcome::Loaded {
                    metadata,
                    diagnostics: found,
                } => {
                    diagnostics.extend(found.iter().cloned());
                    metadata
                }
            };
            let mut skill = match &candidate.skill {
                Some(prepared) => prepared.clone(),
                None => Skill::from(SkillRecord {
                    enabled: true,
                    metadata: Arc::clone(metadata),
                    path: candidate.skill_md.clone(),
                    source: source.name().to_owned(),
                    shadowed: Vec::new(),
                    version: candidate.version.clone().unwrap_or_else(|| Version::new("")),
                    commit: source.commit().cloned(),
                    digest: None,
                    signer: None,
                }),
            };
            let enabled = filter.is_enabled(&metadata.name);
            if skill.enabled != enabled {
                skill.enabled = enabled;
            }
            match index.get(&winners, &metadata.name) {
                Some(at) => {
                    let previous = &winners[at];
                    if previous.source == skill.source {
                        diagnostics.push(Diagnostic::new(
                            Severity::Warning,
                            DiagnosticKind::DuplicateName,
                            Some(source.name()),
                            Some(&skill.path),
                            format!(
                                "the name `{}` is also used by {} in the same source; this one wins",
                                metadata.name, previous.path
                            ),
                        ));
                    }
                    let mut shadowed = previous.shadowed.clone();
                    shadowed.push(Shadowed {
                        source: previous.source.clone(),
                        path: previous.path.clone(),
                    });
                    skill.shadowed = shadowed;
                    winners[at] = skill;
                }
                None => {
                    winners.push(skill);
                    index.insert(&winners, winners.len() - 1);
                }
            }
        }
    }
    (winners, index, diagnostics)
}

/// The position of each skill by name, kept beside the skills themselves
/// (the names are not copied into the index).
#[derive(Default, Clone)]
struct NameIndex {
    table: hashbrown::HashTable<usize>,
    hasher: std::hash::RandomState,
}

impl NameIndex {
    fn with_capacity(capacity: usize) -> Self {
        NameIndex {
            table: hashbrown::HashTable::with_capacity(capacity),
            hasher: std::hash::RandomState::new(),
        }
    }

    fn hash(&self, name: &str) -> u64 {
        self.hasher.hash_one(name)
    }

    /// The position in `skills` of the skill named `name`.
    fn get(&self, skills: &[Skill], name: &str) -> Option<usize> {
        self.table.find(self.hash(name), |&i| skills[i].name() == name).copied()
    }

    /// Indexes `skills[at]`, whose name is not indexed yet.
    fn insert(&mut self, skills: &[Skill], at: usize) {
        let hash = self.hash(skills[at].name());
        self.table
            .insert_unique(hash, at, |&i| self.hasher.hash_one(skills[i].name()));
    }
}

#[cfg(test)]
mod tests {
    use super::slash_order;

    #[test]
    fn directories_sort_as_their_paths_with_a_slash() {
        let mut names = vec!["foo", "foo-kit", "fo", "foo.d", "foo0", "a", "", "Foo", "été", "e"];
        names.sort_by(|a, b| slash_order(a, b));
        let mut by_path: Vec<String> = names.iter().map(|n| format!("{n}/")).collect();
        by_path.sort();
        let expected: Vec<&str> = by_path.iter().map(|p| p.strip_suffix('/').unwrap()).collect();
        assert_eq!(names, expected);
        assert_eq!(names[..3], ["", "Foo", "a"]);
        assert!(names.iter().position(|n| *n == "foo-kit") < names.iter().position(|n| *n == "foo"));
        assert_eq!(slash_order("same", "same"), std::cmp::Ordering::Equal);
    }
}
