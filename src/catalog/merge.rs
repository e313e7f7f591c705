//! Merging the sources' candidates into winners: a later source wins,
//! with what it shadowed and the diagnostics of the rest.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use skillstore_backends::VPath;

use super::state::{Listing, Outcome, SourceState};
use super::types::{NameIndex, NameTable, Shadowed, Skill, SkillFilter};
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
    let mut index = match states.first() {
        Some(first) => {
            let rest = states[1..].iter().map(|s| s.candidates.len()).sum();
            NameIndex::over(first_source_names(first), rest)
        }
        None => NameIndex::default(),
    };
    let mut diagnostics = Vec::new();
    for (position, (source, state)) in sources.iter().zip(states).enumerate() {
        if position == 1 {
            debug_assert_eq!(
                index.base.as_ref().map_or(0, |b| b.len()),
                winners.len(),
                "the first source's shared names give its winners' positions"
            );
        }
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
                    if position > 0 {
                        index.insert(&winners, winners.len() - 1);
                    }
                }
            }
        }
    }
    winners.shrink_to_fit();
    (winners, index, diagnostics)
}

/// The winners a later source's selection claims but does not serve: a
/// skill its `select:` names with no release matching
/// (`release_not_found`). A lower layer's skill of that name is not served
/// in its place (a yank never brings back what a layer overrode); each is
/// withheld, the diagnostic saying why already in the catalog.
pub(super) fn unserved_selections(sources: &SourceList, states: &[Arc<SourceState>], skills: &[Skill]) -> Vec<String> {
    let mut unserved = Vec::new();
    for (position, state) in states.iter().enumerate() {
        for candidate in &state.candidates {
            let Outcome::Rejected { diagnostics } = &candidate.outcome else {
                continue;
            };
            let unmatched = diagnostics
                .iter()
                .any(|d| d.kind == DiagnosticKind::Storage(skillstore_backends::ErrorKind::ReleaseNotFound));
            let below = skills
                .iter()
                .find(|s| s.name() == candidate.dir_name)
                .is_some_and(|winner| {
                    sources
                        .iter()
                        .position(|s| s.name() == winner.source)
                        .is_some_and(|at| at < position)
                });
            if unmatched && below {
                unserved.push(candidate.dir_name.clone());
            }
        }
    }
    unserved
}

/// The names of the skills `state` holds, by the position a merge gives
/// them as the first source: built once per state and shared by every
/// catalog that merges it while one of them holds it (a shared source's
/// state is merged by every tenant over it).
fn first_source_names(state: &Arc<SourceState>) -> Arc<NameTable> {
    type Tables = Option<(HashMap<usize, (Weak<SourceState>, Weak<NameTable>)>, usize)>;
    static TABLES: Mutex<Tables> = Mutex::new(None);
    let mut guard = TABLES.lock().unwrap_or_else(|e| e.into_inner());
    let (tables, prune_at) = guard.get_or_insert_with(|| (HashMap::new(), 64));
    // A weak reference keeps its allocation, so no other state takes this
    // address while the entry is there: a match is this state.
    let key = Arc::as_ptr(state) as usize;
    if let Some(table) = tables
        .get(&key)
        .filter(|(s, _)| s.strong_count() > 0)
        .and_then(|(_, t)| t.upgrade())
    {
        return table;
    }
    if tables.len() >= *prune_at {
        tables.retain(|_, (s, t)| s.strong_count() > 0 && t.strong_count() > 0);
        *prune_at = (tables.len() * 2).max(64);
    }
    let names = state.candidates.iter().filter_map(|c| match &c.outcome {
        Outcome::Loaded { metadata, .. } => Some(metadata.name.as_str()),
        _ => None,
    });
    let table = Arc::new(NameTable::first_source(names));
    tables.insert(key, (Arc::downgrade(state), Arc::downgrade(&table)));
    table
}
