//! What a load keeps of each source between refreshes: its listing, its
//! candidates (one per skill directory) and what each turned out to be.

use std::sync::Arc;

use skillstore_backends::{VPath, Version};

use super::types::{Skill, SkillRecord};
use crate::diagnostic::Diagnostic;
use crate::integrity::FileDigests;
use crate::integrity::pin::Claim;
use crate::skill::{SKILL_FILE, SkillMetadata};
use crate::source::Source;

/// What the last listing of a source gave.
#[derive(Debug, Clone)]
pub(super) enum Listing {
    /// Listed; with a warning for each name no path can hold.
    Loaded(Vec<Diagnostic>),
    Failed(Diagnostic),
}

#[derive(Debug, Clone)]
pub(crate) struct SourceState {
    pub(super) listing: Listing,
    /// Skill directories, in ascending order of `"<name>/"`.
    pub(super) candidates: Vec<Candidate>,
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
pub(super) struct Candidate {
    pub(super) dir_name: String,
    pub(super) skill_md: VPath,
    /// The SKILL.md's version when last read, if it was read.
    pub(super) version: Option<Version>,
    /// Its size then, where known.
    pub(super) size: Option<u64>,
    /// Its frontmatter's YAML, kept where a local cache applies or when
    /// taken from an entry.
    pub(super) yaml: Option<Arc<str>>,
    /// The SHA-256 of the whole file, when it was read whole or an entry
    /// named it.
    pub(super) sha256: Option<String>,
    /// Whether its outcome was taken from an index or cache entry rather
    /// than from its file: the entry is then held to the file whenever the
    /// file is read whole ([`crate::integrity::pin::Claim`]).
    pub(super) from_entry: bool,
    pub(super) outcome: Outcome,
    /// The winner it makes, when it is a skill: built once per version and
    /// shared by every catalog that merges this source's state.
    pub(super) skill: Option<Skill>,
}

impl Candidate {
    pub(super) fn new(dir_name: String, skill_md: VPath) -> Self {
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
    pub(super) fn prepare(&mut self, source: &Source) {
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
            self.skill = self.record(source).map(Skill::from);
        }
    }

    /// The record of the skill this candidate loaded as, in `source`
    /// (enabled, shadowing nothing yet); `None` for a candidate that did not
    /// load.
    pub(super) fn record(&self, source: &Source) -> Option<SkillRecord> {
        let Outcome::Loaded { metadata, .. } = &self.outcome else {
            return None;
        };
        Some(SkillRecord {
            enabled: true,
            metadata: Arc::clone(metadata),
            path: self.skill_md.clone(),
            source: source.name().to_owned(),
            shadowed: Vec::new(),
            version: self.version.clone().unwrap_or_else(|| Version::new("")),
            commit: source.commit().cloned(),
            digest: None,
            signer: None,
        })
    }

    /// True when its outcome came from an entry that the bytes of its
    /// version, as hashed since, are known not to match.
    pub(super) fn refuted(&self, digests: &FileDigests) -> bool {
        self.from_entry
            && self.claim().is_some_and(|(claim, version)| {
                digests
                    .head(self.skill_md.as_str(), &version)
                    .is_some_and(|head| !claim.agrees_with(&head))
            })
    }

    /// The claim its entry makes of its file, with the version it names,
    /// when its outcome came from an entry.
    pub(super) fn claim(&self) -> Option<(Claim, Version)> {
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
    pub(super) fn key(&self) -> String {
        let file = self.skill_md.as_str().rsplit('/').next().unwrap_or(SKILL_FILE);
        format!("{}/{file}", self.dir_name)
    }
}

#[derive(Debug, Clone)]
pub(super) enum Outcome {
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
    pub(super) fn same_as(&self, other: &Outcome) -> bool {
        match (self, other) {
            (Outcome::NotASkill, Outcome::NotASkill) => true,
            (Outcome::Rejected { diagnostics: a }, Outcome::Rejected { diagnostics: b }) => a == b,
            _ => false,
        }
    }
}

/// Work for one candidate during a load or refresh.
pub(super) struct Job {
    pub(super) source: usize,
    pub(super) candidate: usize,
    /// `SOURCE/DIR/SKILL.md`.
    pub(super) skill_md: VPath,
    /// The outcome of the last load, reused if the SKILL.md is unchanged.
    pub(super) previous: Option<Candidate>,
    /// Whether to keep the frontmatter's YAML (for the local cache).
    pub(super) keep_yaml: bool,
}

impl Job {
    /// The name of the skill's directory.
    pub(super) fn dir_name(&self) -> &str {
        self.skill_md
            .as_str()
            .rsplit('/')
            .nth(1)
            .expect("a SKILL.md below a source")
    }
}

/// What a job found.
pub(super) struct Done {
    pub(super) candidate: usize,
    /// The version and size of the file read, if it was read.
    pub(super) version: Option<Version>,
    pub(super) size: Option<u64>,
    /// The file read: `SKILL.md`, or `skill.md` when only that is there.
    pub(super) path: VPath,
    pub(super) outcome: Outcome,
    /// The frontmatter's YAML, when the job was asked to keep it.
    pub(super) yaml: Option<Arc<str>>,
    /// The SHA-256 of the whole file, when kept and read whole.
    pub(super) sha256: Option<String>,
    /// Whether the outcome is a previous one taken from an entry.
    pub(super) from_entry: bool,
}

/// A skill directory found by a deep listing: its name, its file's name
/// and the listed version and size.
pub(super) type DeepSkill = (String, &'static str, Option<(Version, u64)>, bool);

/// A source's skill directories as a deep listing gives them.
pub(super) struct DeepSource {
    /// Directory name, file name, the listed version and size (`None`
    /// when the file must be read to know what it is), and whether the
    /// listing shows `SKILL.md` as a directory, in ascending order of
    /// `"<name>/"`.
    pub(super) skills: Vec<DeepSkill>,
    /// Names no path can hold (escaped).
    pub(super) odd: Vec<String>,
    /// Whether the source holds a `SKILL.md` of its own.
    pub(super) holds_skill_file: bool,
    /// The index's listed version and size.
    pub(super) index: Option<(Version, u64)>,
}
