//! What `show` shows of one winner: one report for every front end (the
//! command line, the HTTP API, MCP and the Python package).

use serde::Serialize;

use super::types::{Catalog, Skill};
use crate::diagnostic::Diagnostic;
use crate::error::{Error, Result};
use crate::skill_files::FileLimits;

/// How far a report lists a skill's files.
pub const REPORT_LIMITS: FileLimits = FileLimits {
    max_depth: 6,
    max_files: 500,
    max_reported: 100,
};

/// One winner as `show --json` and `GET /v1/skills/{name}` give it: the
/// skill (with its digest, when it can be computed), the version of its
/// SKILL.md, its files as a confined read serves them (within
/// [`REPORT_LIMITS`]), and the diagnostics about it and what it shadowed,
/// what its listing left out included.
#[derive(Debug, Clone, Serialize)]
pub struct SkillReport {
    /// The skill.
    #[serde(flatten)]
    pub skill: Skill,
    /// The version of its SKILL.md, as `skill edit --if-version` takes it.
    pub version: String,
    /// Its files, relative to its directory, in listing order.
    pub files: Vec<String>,
    /// True when the listing stopped at [`REPORT_LIMITS`] (not serialized:
    /// the diagnostics say so).
    #[serde(skip)]
    pub truncated: bool,
    /// What is worth reporting about it.
    pub diagnostics: Vec<Diagnostic>,
}

impl Catalog {
    /// The report of the winner `name`. A skill that cannot be digested is
    /// reported without a digest. The skill's directory is walked once
    /// (twice only when its listing goes past [`REPORT_LIMITS`]).
    pub async fn report(&self, name: &str) -> Result<SkillReport> {
        let found = self.get(name).ok_or_else(|| Error::SkillNotFound(name.to_owned()))?;
        let mut skill = found.clone();
        let mut view = None;
        if skill.digest.is_none()
            && let Ok(whole) = self.skill_files(name, FileLimits::default()).await
        {
            // One walk serves both when the report's bounds cut nothing.
            view = whole.narrowed(REPORT_LIMITS);
            let digests = &self.options.digests;
            skill.digest = digests
                .skill_digest(self.backend.as_ref(), &whole)
                .await
                .ok()
                .map(|d| d.digest.into());
        }
        let listed = match view {
            Some(view) => view,
            None => self.skill_files(name, REPORT_LIMITS).await?,
        };
        let mut diagnostics: Vec<Diagnostic> = self
            .diagnostics()
            .iter()
            .filter(|d| {
                d.path
                    .as_ref()
                    .is_some_and(|p| *p == skill.path || skill.shadowed.iter().any(|s| s.path == *p))
            })
            .cloned()
            .collect();
        diagnostics.extend(listed.diagnostics(&skill.source));
        Ok(SkillReport {
            version: skill.version.as_str().to_owned(),
            files: listed.relatives(),
            truncated: listed.truncated,
            diagnostics,
            skill,
        })
    }
}
