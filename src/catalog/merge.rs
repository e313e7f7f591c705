//! Merging the sources' candidates into winners: a later source wins,
//! with what it shadowed and the diagnostics of the rest.

use std::sync::Arc;

use skillstore_backends::VPath;

use super::state::{Listing, Outcome, SourceState};
use super::types::{NameIndex, Shadowed, Skill, SkillFilter};
use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::integrity::pin::Pins;
use crate::skill::Severity;
use crate::source::SourceList;

/// Adds to `pins` the claims of the winners among `skills` whose outcome
/// came from an entry, except those `pinned` holds (their check digested
/// them).
pub(super) fn add_claims(pins: &mut Pins, states: &[Arc<SourceState>], skills: &[Skill], pinned: &Pins) {
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

/// Merges the sources' skills: later sources win, first positions stay.
pub(super) fn merge(
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
            // Prepared when its source's state was made; made here for a
            // candidate no state prepared.
            let mut skill = match &candidate.skill {
                Some(prepared) => prepared.clone(),
                None => match candidate.record(source) {
                    Some(record) => Skill::from(record),
                    None => continue,
                },
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
