//! The assembly behind [`Config::open`]: mounts opened, sources given
//! their backends, aliases refused, options built.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillstore_backends::{MountTable, SkillBackend, SymlinkPolicy, VPath};

use crate::catalog::{LoadOptions, SkillFilter};
use crate::config::{Config, MountConfig};
use crate::error::{Error, Result};
use crate::integrity::lock::MAX_LOCK_BYTES;
use crate::integrity::signature::AllowedSigners;
use crate::integrity::{FileDigests, Integrity, Lock, SignaturePolicy};
use crate::location::{Location, read_local_text};
use crate::prompt::PromptStyle;
use crate::source::{Patterns, Source, SourceList, parse_dir};
use crate::sync::SyncOptions;

use super::aliases::{identity, refuse_aliases};
use super::feeds::{MountJournal, add_source, mount_journal};
use super::open::{Mount, Opened};
use super::{Namespace, PromptSettings};

/// The assembly behind [`Config::open`].
pub(crate) fn assemble(config: &Config, writable_names: &[String]) -> Result<Namespace> {
    let defaults = LoadOptions::default();
    let read_limit = config.limits.max_file_bytes.unwrap_or(defaults.read_limit);
    let base = config.base();

    let mut mount_configs: Vec<MountConfig> = config.mounts.clone();
    if mount_configs.is_empty() {
        mount_configs.push(MountConfig {
            at: "/".into(),
            location: ".".into(),
            ..MountConfig::default()
        });
    }
    let cache = (config.cache.enabled != Some(false)).then(|| crate::cache::CacheSettings {
        dir: config.cache.dir.as_deref().map(|dir| match dir.strip_prefix("~/") {
            Some(rest) => std::env::var_os("HOME").map_or_else(|| base.join(dir), |home| Path::new(&home).join(rest)),
            None => base.join(dir),
        }),
        max_bytes: config.cache.max_bytes.unwrap_or(crate::cache::DEFAULT_CACHE_BYTES),
    });
    let mut mounts: Vec<Mount> = Vec::with_capacity(mount_configs.len());
    let mut journals: Vec<MountJournal> = Vec::new();
    for m in &mount_configs {
        let named = |e: Error| {
            if m.given {
                crate::config::given_mount_error(&m.at, &m.location, e)
            } else {
                e
            }
        };
        let at = parse_dir(&m.at).map_err(named)?;
        let location = match &m.contents {
            Some(_) => Location::Memory(PathBuf::from(m.location.trim_start_matches("memory:"))),
            None => Location::parse(&m.location)
                .map_err(named)?
                .resolved_against(m.base_dir.as_deref().unwrap_or(&base)),
        };
        let policy = m.symlinks.as_deref().map(parse_policy).transpose()?.unwrap_or_default();
        if m.symlinks.is_some() && !location.is_local_dir() && !location.is_git() {
            return Err(Error::Usage(format!(
                "the mount at {at} sets a symlink policy, which applies to local directories and Git repositories only"
            )));
        }
        let opened = match &m.contents {
            Some(files) => Opened::Memory(Arc::clone(files)),
            None => {
                if let Some(host) = location.plain_http_host()
                    && !m.allow_http
                {
                    return Err(Error::Usage(format!(
                        "the mount at {at} reads `{location}` over plain http:// from `{host}`, which is not a loopback host: \
                         skills (and any credentials) would travel unencrypted and could be changed on the way; \
                         use https://, or set `allow_http: true` on the mount"
                    )));
                }
                Opened::open(
                    &location,
                    policy,
                    read_limit,
                    cache.as_ref(),
                    m.allow_http,
                    config.limits.max_discovery_bytes,
                )
                .map_err(named)?
            }
        };
        let journal = mount_journal(&at, &location, &opened, m.changes.as_ref()).map_err(named)?;
        mounts.retain(|existing| existing.at != at);
        journals.retain(|existing| existing.at != at);
        journals.extend(journal);
        mounts.push(Mount {
            at,
            location,
            policy,
            opened,
        });
    }
    // What the mounts just fetched is the newest there, so trimmed last.
    if mounts
        .iter()
        .any(|m| matches!(m.opened, Opened::Discovery(_) | Opened::Git { .. }))
        && let Some(local) = cache.as_ref().and_then(crate::cache::LocalCache::open)
    {
        local.trim();
    }

    let mut sources: Vec<(Source, Option<SymlinkPolicy>, crate::release::Selection)> =
        Vec::with_capacity(config.sources.len());
    let mut signatures = Vec::new();
    for s in &config.sources {
        let path = parse_dir(&s.path)?;
        let source = match &s.label {
            Some(label) => Source::labeled(label, path),
            None => Source::new(path),
        }
        .with_include(Patterns::new(s.include.iter().cloned())?)
        .with_exclude(Patterns::new(s.exclude.iter().cloned())?)
        .with_writable(s.writable);
        if let Some(wanted) = &s.signatures {
            let file = Path::new(&wanted.allowed_signers);
            let file = if file.is_relative() {
                base.join(file)
            } else {
                file.to_path_buf()
            };
            let text = read_local_text(&file, MAX_LOCK_BYTES, "allowed_signers file")?;
            let allowed = AllowedSigners::parse(&text)?;
            signatures.push((
                source.name().to_owned(),
                Arc::new(SignaturePolicy {
                    allowed,
                    required: wanted.required,
                }),
            ));
        }
        let selection = crate::release::Selection::parse(&s.select)
            .map_err(|e| Error::Config(format!("the source {}: {e}", source.path())))?;
        sources.push((source, s.symlinks.as_deref().map(parse_policy).transpose()?, selection));
    }
    for name in writable_names {
        let Some(at) = sources.iter().position(|(s, _, _)| s.name() == name) else {
            let known: Vec<&str> = sources.iter().map(|(s, _, _)| s.name()).collect();
            return Err(Error::Usage(format!(
                "--writable names no source: `{name}`{}; the sources are {}",
                crate::suggest::did_you_mean(name, known.iter().copied()),
                known.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
            )));
        };
        let source = &mut sources[at].0;
        *source = source.clone().with_writable(true);
    }
    if sources.is_empty() {
        return Err(Error::Usage(
            "no sources: pass --source VPATH (repeatable) or a configuration with `sources:`".into(),
        ));
    }

    let mut own_roots: Vec<(VPath, Arc<dyn SkillBackend>)> = Vec::new();
    let mut list = SourceList::new();
    let mut source_locations = Vec::with_capacity(sources.len());
    let mut share_keys = Vec::with_capacity(sources.len());
    let mut identities = Vec::with_capacity(sources.len());
    let mut standing = Vec::new();
    let mut change_feeds = Vec::new();
    let mut selections = Vec::new();
    for (index, (source, policy, selection)) in sources.into_iter().enumerate() {
        let path = source.path();
        let mount = mounts
            .iter()
            .filter(|m| path.starts_with(&m.at))
            .max_by_key(|m| m.at.segments().count())
            .ok_or_else(|| Error::Usage(format!("no mount serves the source {path}")))?;
        let inner = path.strip_prefix(&mount.at).expect("the mount is an ancestor");
        add_source(&mut change_feeds, &journals, &mount.at, source.name(), path)?;
        if source.is_writable() && mount.location.is_git() {
            return Err(Error::Usage(format!(
                "the source `{}` is writable, but {path} is in the Git repository mounted at {} ({}), which is never writable",
                source.name(),
                mount.at,
                mount.location
            )));
        }
        if let Some(policy) = policy {
            if !mount.location.is_local_dir() {
                return Err(Error::Usage(format!(
                    "a symlink policy applies to local directories only; the source {path} is not in one"
                )));
            }
            if looser(policy, mount.policy) {
                return Err(Error::Usage(format!(
                    "the source {path} asks for the symlink policy `{policy}`, looser than its mount's `{}`; a source may only narrow it",
                    mount.policy
                )));
            }
        }
        if !selection.is_empty() && source.is_writable() {
            return Err(Error::Usage(format!(
                "the source `{}` selects releases, so it serves them and not its working copies; \
                 it cannot be writable (write through another source over the same directory)",
                source.name()
            )));
        }
        if !selection.is_empty() {
            let own = mount
                .opened
                .subdir(&inner, policy, false)
                .map_err(|e| Error::Usage(format!("cannot open the source {path}: {e}")))?;
            let served = Arc::new(crate::release::SelectedReleases::new(own, selection.clone()));
            selections.push((source.name().to_owned(), Arc::clone(&served)));
            own_roots.push((path.clone(), served));
        } else if source.is_writable() || policy.is_some() {
            let backend = mount
                .opened
                .subdir(&inner, policy, source.is_writable())
                .map_err(|e| Error::Usage(format!("cannot open the source {path}: {e}")))?;
            own_roots.push((path.clone(), backend));
        }
        identities.push((index, source.is_writable(), identity(mount, &mounts, &inner)));
        source_locations.push(mount.location.clone());
        // A writable source is written through this namespace's editor and
        // seen at once by its catalog, and each memory mount is a store of
        // its own: neither is shared. Nor is a source with another mount
        // below it, whose files that mount's location decides.
        let nested = mounts.iter().any(|m| m.at != *path && m.at.starts_with(path));
        // A selection is this namespace's own view of the source.
        let selects = !selection.is_empty();
        share_keys.push(
            (!source.is_writable() && !nested && !selects && !matches!(mount.location, Location::Memory(_))).then(
                || {
                    format!(
                        "{}|{}|{}|{:?}|{}|{}|{:?}",
                        mount.location,
                        mount.opened.identity().unwrap_or_default(),
                        mount.policy,
                        policy,
                        inner,
                        mount.opened.commit().unwrap_or_default(),
                        source
                    )
                },
            ),
        );
        if let Opened::Git {
            stale: true,
            commit: Some(commit),
            ..
        } = &mount.opened
        {
            standing.push(crate::Diagnostic::new(
                crate::Severity::Warning,
                crate::DiagnosticKind::SourceStale,
                Some(source.name()),
                Some(path),
                format!(
                    "the Git remote of {} could not be reached; serving commit {commit}, fetched before",
                    mount.location
                ),
            ));
        }
        let source = match mount.opened.commit() {
            Some(commit) => source.with_commit(commit),
            None => source,
        };
        list.push(source)?;
    }
    refuse_aliases(&list, &identities)?;

    // A source with a backend of its own replaces a mount at the same point.
    let mut table = MountTable::new();
    for m in mounts.iter().filter(|m| !own_roots.iter().any(|(at, _)| *at == m.at)) {
        table
            .mount(m.at.clone(), m.opened.read_only())
            .map_err(|e| Error::Usage(format!("cannot mount {}: {e}", m.at)))?;
    }
    for (at, backend) in own_roots {
        table
            .mount(at.clone(), backend)
            .map_err(|e| Error::Usage(format!("cannot mount the source {at}: {e}")))?;
    }

    let filter = SkillFilter::new(
        config.skills.enabled.clone().map(Patterns::new).transpose()?,
        Patterns::new(config.skills.disabled.iter().cloned())?,
    );
    let lock = match &config.lock {
        Some(file) => {
            let file = Path::new(file);
            let file = if file.is_relative() {
                base.join(file)
            } else {
                file.to_path_buf()
            };
            let text = read_local_text(&file, MAX_LOCK_BYTES, "lock file")?;
            let lock = Lock::parse(&text)?;
            if lock.skills.is_none() {
                // Served under it, every skill would go unchecked.
                return Err(Error::Usage(format!(
                    "the lock file {} is version 1: it pins Git commits and no skill, so no skill could be held \
                     to it; `skillstore lock` writes version {}",
                    file.display(),
                    crate::integrity::lock::LOCK_VERSION
                )));
            }
            Some(Arc::new(lock))
        }
        None => None,
    };
    let integrity = (lock.is_some() || !signatures.is_empty()).then(|| {
        Arc::new(Integrity {
            lock: lock.clone(),
            signatures,
        })
    });
    // With the local cache on, file hashes outlive the process.
    let digests = Arc::new(match &cache {
        Some(settings) => FileDigests::persistent(settings.clone()),
        None => FileDigests::new(),
    });
    let load = LoadOptions {
        concurrency: config.limits.concurrency.unwrap_or(defaults.concurrency).max(1),
        read_limit,
        filter,
        cache,
        digests,
        standing,
        integrity: integrity.clone().map(|i| i as Arc<dyn crate::catalog::WinnerCheck>),
        ..defaults
    };
    let style = match config.prompt.style.as_deref() {
        Some(text) => text.parse::<PromptStyle>()?,
        None => PromptStyle::default(),
    };
    let template = config.prompt.template.as_ref().map(|t| {
        let t = Path::new(t);
        if t.is_relative() { base.join(t) } else { t.to_path_buf() }
    });
    let namespace = Namespace {
        backend: Arc::new(table),
        sources: list,
        source_locations,
        selections,
        change_feeds,
        share_keys,
        git_mounts: mounts
            .iter()
            .filter(|m| m.location.is_git())
            .map(|m| (m.location.clone(), m.opened.commit()))
            .collect(),
        local_roots: mounts
            .iter()
            .filter_map(|m| match (&m.location, &m.opened) {
                (Location::Dir(path), Opened::Fs(backend)) => Some((path.clone(), backend.clone())),
                _ => None,
            })
            .collect(),
        load,
        pool: None,
        integrity,
        prompt: PromptSettings {
            style,
            max_chars: config.prompt.max_chars,
            template,
            location_root: config.prompt.location_root.clone(),
            always: config.prompt.always.clone(),
        },
        sync: sync_options(config, read_limit),
        lock,
        config: Some(Arc::new(config.clone())),
        layer: None,
    };
    if let Some(lock) = &namespace.lock {
        lock.check_git(&namespace)?;
    }
    Ok(namespace)
}

fn sync_options(config: &Config, read_limit: u64) -> SyncOptions {
    let defaults = SyncOptions::default();
    SyncOptions {
        read_limit,
        max_files_per_skill: config.sync.max_files.unwrap_or(defaults.max_files_per_skill),
        max_skill_bytes: config.sync.max_skill_bytes.unwrap_or(defaults.max_skill_bytes),
        max_total_bytes: config.sync.max_total_bytes.unwrap_or(defaults.max_total_bytes),
        ..defaults
    }
}

fn parse_policy(text: &str) -> Result<SymlinkPolicy> {
    text.parse::<SymlinkPolicy>().map_err(|_| {
        Error::Usage(format!(
            "unknown symlink policy `{}`; expected deny, within_root or follow",
            text.escape_debug()
        ))
    })
}

fn looser(a: SymlinkPolicy, b: SymlinkPolicy) -> bool {
    let rank = |p: SymlinkPolicy| match p {
        SymlinkPolicy::Deny => 0,
        SymlinkPolicy::WithinRoot => 1,
        SymlinkPolicy::Follow => 2,
    };
    rank(a) > rank(b)
}
