//! The catalog's types: how it is loaded, what it holds, and the two
//! interfaces a namespace installs in it (the check of every winner, and
//! where shared sources' states come from).

use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

use serde::Serialize;
use skillstore_backends::{DEFAULT_READ_LIMIT, ErrorKind, SkillBackend, VPath, Version};

use super::state::SourceState;
use crate::cache::{CacheSettings, LocalCache};
use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::error::{Error, Result};
use crate::integrity::FileDigests;
use crate::integrity::pin::Pins;
use crate::skill::{Severity, SkillMetadata};
use crate::source::{Patterns, Source, SourceList};

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
    pub(super) enabled: Option<Patterns>,
    pub(super) disabled: Patterns,
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
    pub(super) storage: Arc<dyn SkillBackend>,
    /// What the skills are served through: `storage`, with the files of the
    /// skills an integrity check passed held to the versions it saw.
    pub(super) backend: Arc<dyn SkillBackend>,
    /// The skills an integrity check passed, and their files' versions.
    pub(super) pins: Arc<Pins>,
    pub(super) sources: Arc<SourceList>,
    pub(super) options: Arc<LoadOptions>,
    pub(super) states: Vec<Arc<SourceState>>,
    pub(super) skills: Vec<Skill>,
    pub(super) index: NameIndex,
    pub(super) diagnostics: Vec<Diagnostic>,
    /// The local cache, opened at the first load that can use it.
    pub(super) cache: Arc<OnceLock<Option<LocalCache>>>,
}

impl std::fmt::Debug for Catalog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalog")
            .field("skills", &self.skills.len())
            .field("diagnostics", &self.diagnostics.len())
            .finish_non_exhaustive()
    }
}

impl Catalog {
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
        self.served(false)
    }

    /// The skills served, in order: never one withdrawn since its check
    /// ([`Catalog::is_withdrawn`]), and disabled ones only `with_disabled`
    /// (a listing that shows them). Every listing of every front end is
    /// this view.
    pub fn served(&self, with_disabled: bool) -> impl Iterator<Item = &Skill> {
        let any_withdrawn = self.pins.withdrawn_count() > 0;
        self.skills
            .iter()
            .filter(move |s| (with_disabled || s.enabled) && !(any_withdrawn && self.pins.is_withdrawn(&s.dir())))
    }

    /// The winner `name` as [`Catalog::served`] shows it: `None` when there
    /// is none, when it is withdrawn, or when it is disabled and not
    /// `with_disabled`.
    pub fn served_skill(&self, name: &str, with_disabled: bool) -> Option<&Skill> {
        self.get(name).filter(|s| {
            (with_disabled || s.enabled) && !(self.pins.withdrawn_count() > 0 && self.pins.is_withdrawn(&s.dir()))
        })
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

    pub(super) fn skill(&self, name: &str) -> Result<&Skill> {
        self.get(name).ok_or_else(|| Error::SkillNotFound(name.to_owned()))
    }
}

/// The position of each skill by name, kept beside the skills themselves
/// (the names are not copied into the index).
///
/// A catalog's first source fills the first positions of its winners the
/// same way in every catalog that merges the same state of that source (a
/// later source's winner of a name takes that name's position), so the
/// positions of those names are one table shared by all such catalogs
/// ([`NameTable::first_source`]); each catalog keeps only the names its
/// other sources add.
#[derive(Default, Clone)]
pub(super) struct NameIndex {
    /// The names of the first source's winners, shared.
    pub(super) base: Option<Arc<NameTable>>,
    /// Every other name.
    pub(super) own: NameTable,
}

/// Positions by name, each a `u32` (a catalog holds fewer than 2^32 skills).
#[derive(Default, Clone)]
pub(super) struct NameTable {
    table: hashbrown::HashTable<u32>,
    hasher: std::hash::RandomState,
}

impl NameTable {
    fn with_capacity(capacity: usize) -> Self {
        NameTable {
            table: hashbrown::HashTable::with_capacity(capacity),
            hasher: std::hash::RandomState::new(),
        }
    }

    /// The position of `name`, where `name_at` gives the name at a
    /// position (`None` past the end: a shared table may hold positions
    /// a merge has not reached yet).
    fn get<'a>(&self, name: &str, name_at: impl Fn(usize) -> Option<&'a str>) -> Option<usize> {
        self.table
            .find(self.hasher.hash_one(name), |&i| name_at(i as usize) == Some(name))
            .map(|&i| i as usize)
    }

    fn insert_new<'a>(&mut self, name: &str, at: usize, name_at: impl Fn(usize) -> &'a str) {
        let at = u32::try_from(at).expect("fewer than 2^32 skills");
        let hasher = &self.hasher;
        self.table
            .insert_unique(hasher.hash_one(name), at, |&i| hasher.hash_one(name_at(i as usize)));
    }

    /// The positions a merge gives the winners of `names`, a source's
    /// skill names in its candidates' order: each new name takes the next
    /// position, a repeated one keeps its first.
    pub(super) fn first_source<'a>(names: impl Iterator<Item = &'a str>) -> NameTable {
        let names: Vec<&str> = names.collect();
        let mut table = NameTable::with_capacity(names.len());
        let mut order: Vec<&str> = Vec::with_capacity(names.len());
        for name in names {
            if table.get(name, |i| order.get(i).copied()).is_none() {
                order.push(name);
                table.insert_new(name, order.len() - 1, |i| order[i]);
            }
        }
        table.table.shrink_to_fit(|&i| table.hasher.hash_one(order[i as usize]));
        table
    }

    /// How many names it holds.
    pub(super) fn len(&self) -> usize {
        self.table.len()
    }
}

impl NameIndex {
    pub(super) fn with_capacity(capacity: usize) -> Self {
        NameIndex {
            base: None,
            own: NameTable::with_capacity(capacity),
        }
    }

    /// An index whose first `base.len()` positions are `base`'s, with room
    /// for `capacity` more names.
    pub(super) fn over(base: Arc<NameTable>, capacity: usize) -> Self {
        NameIndex {
            base: Some(base),
            own: NameTable::with_capacity(capacity),
        }
    }

    /// The position in `skills` of the skill named `name`.
    pub(super) fn get(&self, skills: &[Skill], name: &str) -> Option<usize> {
        let name_at = |i: usize| skills.get(i).map(|s| s.name());
        self.base
            .as_ref()
            .and_then(|base| base.get(name, name_at))
            .or_else(|| self.own.get(name, name_at))
    }

    /// Indexes `skills[at]`, whose name is not indexed yet.
    pub(super) fn insert(&mut self, skills: &[Skill], at: usize) {
        self.own.insert_new(skills[at].name(), at, |i| skills[i].name());
    }
}

/// What a check found for one winner that passed it.
#[derive(Debug, Clone, Default)]
pub struct Passed {
    /// Its digest, when the check computed one.
    pub digest: Option<String>,
    /// Who signed it, when its signature verified.
    pub signer: Option<String>,
    /// Each file the digest was computed from, the version it was read
    /// at and the SHA-256 of the bytes read, when the check computed the
    /// digest: the catalog holds every later read to these.
    pub files: Option<Vec<(VPath, Version, String)>>,
    /// What the catalog is to show of it, parsed from the SKILL.md bytes
    /// the digest was computed from, when that differs from what the load
    /// took (an index or cache entry that does not describe the file).
    pub shown: Option<Arc<crate::skill::SkillMetadata>>,
}

/// What a check decided for one winner: served with what it found, or
/// withheld with the diagnostic saying why (none for a winner withheld
/// silently, such as a disabled skill a lock does not hold).
pub type Verdict = std::result::Result<Passed, Option<Diagnostic>>;

/// A check of every winner, installed in [`super::LoadOptions::integrity`].
#[async_trait::async_trait]
pub trait WinnerCheck: Send + Sync + std::fmt::Debug {
    /// True when the check has anything to decide; an inactive check is
    /// not run.
    fn is_active(&self) -> bool;

    /// One verdict per winner of `catalog`, in the order of
    /// [`Catalog::skills`]. The check may read through the catalog
    /// (listings, digests, files); the catalog applies the verdicts. A
    /// load given another number of verdicts than it has winners panics:
    /// it cannot tell which winner a verdict was for.
    async fn verdicts(self: Arc<Self>, catalog: Arc<Catalog>) -> Vec<Verdict>;
}

/// Where the states of shared sources come from.
#[async_trait::async_trait]
pub(crate) trait SharedStates: Send + Sync + std::fmt::Debug {
    /// The current state of the shared source `key`, loaded by `catalog`
    /// (its source number `index`) when there is none yet.
    async fn state(&self, key: &Arc<str>, catalog: &Catalog, index: usize) -> Arc<SourceState>;
}

/// Which of a catalog's sources are shared, and where their states come
/// from.
#[derive(Debug, Clone)]
pub struct SharedSources {
    pub(super) states: Arc<dyn SharedStates>,
    /// One per source, in the source list's order: the key of a shared
    /// source, `None` for one the catalog loads itself.
    pub(super) keys: Vec<Option<Arc<str>>>,
}

impl SharedSources {
    /// `keys` (one per source, `None` for a source not shared), their
    /// states taken from `states`.
    pub(crate) fn new(states: Arc<dyn SharedStates>, keys: Vec<Option<Arc<str>>>) -> Self {
        SharedSources { states, keys }
    }

    /// One per source, in the source list's order: the key of a shared
    /// source, `None` for one the catalog loads itself.
    pub fn keys(&self) -> &[Option<Arc<str>>] {
        &self.keys
    }

    /// Where the states of shared sources come from, and the key of source
    /// `index`, when it is shared.
    pub(super) fn key(&self, index: usize) -> Option<(&dyn SharedStates, &Arc<str>)> {
        self.keys.get(index)?.as_ref().map(|k| (&*self.states, k))
    }
}

#[cfg(test)]
mod name_index_tests {
    use super::*;

    fn skill(name: &str) -> Skill {
        Skill::from(SkillRecord {
            metadata: Arc::new(SkillMetadata {
                name: name.to_owned(),
                description: String::new(),
                license: None,
                compatibility: None,
                metadata: Default::default(),
                allowed_tools: Vec::new(),
            }),
            path: VPath::new(format!("/s/{name}/SKILL.md")).unwrap(),
            source: "s".to_owned(),
            enabled: true,
            shadowed: Vec::new(),
            version: Version::new(""),
            commit: None,
            digest: None,
            signer: None,
        })
    }

    #[test]
    fn a_shared_first_source_table_finds_only_the_positions_a_merge_reached() {
        // The first source lists `a`, `b`, `a` again and `c`: three winners.
        let base = Arc::new(NameTable::first_source(["a", "b", "a", "c"].into_iter()));
        assert_eq!(base.len(), 3);
        let mut skills = vec![skill("a")];
        let mut index = NameIndex::over(Arc::clone(&base), 1);
        // Mid-merge, `b` and `c` are not winners yet.
        assert_eq!(index.get(&skills, "a"), Some(0));
        assert_eq!(index.get(&skills, "b"), None);
        skills.push(skill("b"));
        skills.push(skill("c"));
        // A later source's own name, then a shadowing winner in place.
        skills.push(skill("d"));
        index.insert(&skills, 3);
        skills[1] = skill("b");
        for (at, name) in ["a", "b", "c", "d"].iter().enumerate() {
            assert_eq!(index.get(&skills, name), Some(at), "{name}");
        }
        assert_eq!(index.get(&skills, "e"), None);
    }
}
