//! The load pipeline: each source listed, read and parsed on its own (or
//! taken from a pool of shared sources), then merged and checked; refresh
//! and reload read only what changed.

use futures::StreamExt;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use skillstore_backends::{ErrorKind, SkillBackend, Version};

use super::listing::{
    apply_index, invalid_key, list_deep_source, list_source, skill_file, slash_order, source_is_a_skill,
};
use super::merge::{add_claims, merge, unserved_selections};
use super::parse::{failed_state, outcome_of_error, run_batch, take_entry, with_file};
use super::read::served;
use super::state::{Candidate, Done, Job, Listing, Outcome, SourceState};
use super::types::{Catalog, LoadOptions, NameIndex};
use crate::cache::LocalCache;
use crate::error::{Error, Result};
use crate::index::{Entries, HeadEntry, INDEX_DIR};
use crate::integrity::pin::Pins;
use crate::release::RELEASES_DIR;
use crate::source::{Source, SourceList};

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
    pub(super) fn made_from(&self, states: &[Arc<SourceState>]) -> bool {
        states.len() == self.states.len()
            && states.iter().zip(&self.states).all(|(a, b)| Arc::ptr_eq(a, b))
            && self.withdrawn_count() == 0
            && !self.options.integrity.as_ref().is_some_and(|c| c.is_active())
    }

    pub(super) async fn reload(&self, previous: Option<&[Arc<SourceState>]>) -> Catalog {
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
    pub(super) fn local_cache(&self) -> Option<&LocalCache> {
        self.cache
            .get_or_init(|| self.options.cache.as_ref().and_then(LocalCache::open))
            .as_ref()
    }

    /// Lists one source and reads what changed since `before`: by a deep
    /// listing where the backend has one (unchanged files are known by
    /// their listed versions; others come from the local cache or the
    /// source's index when their versions match, or are read), otherwise
    /// directory by directory.
    pub(super) async fn load_source(
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
                if deep.holds_skill_file {
                    notes.push(source_is_a_skill(source));
                }
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
                Ok(super::listing::Listed {
                    dirs,
                    odd,
                    holds_skill_file,
                }) => {
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
                    if holds_skill_file {
                        notes.push(source_is_a_skill(source));
                    }
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
    pub(super) async fn run_jobs(
        &self,
        jobs: Vec<Job>,
        batch: usize,
        permits: &Arc<tokio::sync::Semaphore>,
    ) -> Vec<Done> {
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
    pub(super) fn with_states(&self, states: Vec<Arc<SourceState>>) -> Catalog {
        let (skills, index, mut diagnostics) = merge(&self.sources, &states, &self.options.filter);
        let unserved = unserved_selections(&self.sources, &states, &skills);
        diagnostics.splice(0..0, self.options.standing.iter().cloned());
        // Winners a check will digest show what the digested bytes hold
        // ([`Catalog::set_checked`]); the others are held to their entries.
        let mut pins = Pins::new();
        if !self.options.integrity.as_ref().is_some_and(|c| c.is_active()) {
            add_claims(&mut pins, &states, &skills, &Pins::new());
        }
        let pins = Arc::new(pins.forgetting_in(Arc::clone(&self.options.digests)));
        let catalog = Catalog {
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
        };
        match unserved.is_empty() {
            true => catalog,
            false => catalog.withhold(unserved.into_iter().map(|name| (name, None)).collect()),
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
                (Err(i), _) if source.admits(dir_name) && dir_name != INDEX_DIR && dir_name != RELEASES_DIR => {
                    candidates.insert(
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
                    )
                }
                (Err(_), _) => {}
            }
            for candidate in &mut state.candidates {
                candidate.prepare(source);
            }
            *shared = Arc::new(state);
        }
        Ok(self.with_states(states).checked().await)
    }
}
