//! From configuration and flags to a namespace, sources and load options.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use skillstore::backends::{
    FsBackend, MemoryBackend, MountTable, ObjectStoreBackend, S3Options, SkillBackend, SymlinkPolicy, VPath,
};
use skillstore::config::{Config, MountConfig, PromptConfig, is_local};
use skillstore::source::parse_dir;
use skillstore::{Catalog, LoadOptions, Patterns, SkillFilter, Source, SourceList};

use super::{Failure, Global};

/// Everything a catalog command needs.
pub struct Namespace {
    pub table: MountTable,
    pub sources: SourceList,
    pub options: LoadOptions,
    pub prompt: PromptConfig,
}

impl Namespace {
    /// Loads the catalog.
    pub async fn load(self) -> Catalog {
        Catalog::load(Arc::new(self.table), self.sources, self.options).await
    }
}

/// A mount as resolved from the configuration or a flag.
struct Mount {
    at: VPath,
    location: String,
    policy: SymlinkPolicy,
    writable: bool,
}

pub fn build(global: &Global) -> Result<Namespace, Failure> {
    let config = match &global.config {
        Some(path) => Some(Config::load(path)?),
        None if global.sources.is_empty() && Path::new("skillstore.yaml").is_file() => {
            Some(Config::load(Path::new("skillstore.yaml"))?)
        }
        None => None,
    };
    let config = config.unwrap_or_default();

    let mut mounts: Vec<Mount> = Vec::new();
    for m in &config.mounts {
        mounts.push(resolve_config_mount(m)?);
    }
    for flag in &global.mounts {
        let Some((at, location)) = flag.split_once('=') else {
            return Err(Failure::usage(format!("--mount takes VPATH=LOCATION, got `{flag}`")));
        };
        let at = parse_dir(at)?;
        mounts.retain(|m| m.at != at);
        mounts.push(Mount {
            at,
            location: location.to_owned(),
            policy: SymlinkPolicy::default(),
            writable: false,
        });
    }
    if mounts.is_empty() {
        mounts.push(Mount {
            at: VPath::root(),
            location: ".".into(),
            policy: SymlinkPolicy::default(),
            writable: false,
        });
    }

    let mut sources: Vec<(Source, Option<SymlinkPolicy>)> = Vec::new();
    if global.sources.is_empty() {
        for s in &config.sources {
            let path = parse_dir(&s.path)?;
            let source = match &s.label {
                Some(label) => Source::labeled(label, path),
                None => Source::new(path),
            };
            let source = source
                .with_include(Patterns::new(s.include.iter().cloned())?)
                .with_exclude(Patterns::new(s.exclude.iter().cloned())?)
                .with_writable(s.writable);
            sources.push((source, s.symlinks.as_deref().map(parse_policy).transpose()?));
        }
    } else {
        for spec in &global.sources {
            sources.push((Source::parse(spec)?, None));
        }
    }
    for name in &global.writable {
        let (source, _) = sources
            .iter_mut()
            .find(|(s, _)| s.name() == name)
            .ok_or_else(|| Failure::usage(format!("--writable names no source: `{name}`")))?;
        *source = source.clone().with_writable(true);
    }
    for m in &mut mounts {
        m.writable |= sources
            .iter()
            .any(|(s, _)| s.is_writable() && (s.path().starts_with(&m.at) || m.at.starts_with(s.path())));
    }

    let mut table = MountTable::new();
    for m in &mounts {
        table
            .mount(m.at.clone(), open_location(&m.location, m.policy, m.writable)?)
            .map_err(|e| Failure::usage(format!("cannot mount {}: {e}", m.at)))?;
    }
    let mut list = SourceList::new();
    for (source, policy) in sources {
        if let Some(policy) = policy {
            confine_source(&mut table, &mounts, &source, policy)?;
        }
        list.push(source)?;
    }
    let sources = list;
    if sources.is_empty() {
        return Err(Failure::usage(
            "no sources: pass --source VPATH (repeatable) or a configuration with `sources:`",
        ));
    }

    let filter = SkillFilter::new(
        config.skills.enabled.clone().map(Patterns::new).transpose()?,
        Patterns::new(config.skills.disabled.iter().cloned())?,
    );
    let defaults = LoadOptions::default();
    let options = LoadOptions {
        concurrency: config.limits.concurrency.unwrap_or(defaults.concurrency).max(1),
        read_limit: config.limits.max_file_bytes.unwrap_or(defaults.read_limit),
        filter,
        ..defaults
    };
    Ok(Namespace {
        table,
        sources,
        options,
        prompt: config.prompt,
    })
}

fn resolve_config_mount(m: &MountConfig) -> Result<Mount, Failure> {
    Ok(Mount {
        at: parse_dir(&m.at)?,
        location: m.location.clone(),
        policy: m.symlinks.as_deref().map(parse_policy).transpose()?.unwrap_or_default(),
        writable: m.writable,
    })
}

fn parse_policy(text: &str) -> Result<SymlinkPolicy, Failure> {
    text.parse::<SymlinkPolicy>().map_err(|_| {
        Failure::usage(format!(
            "unknown symlink policy `{text}`; expected deny, within_root or follow"
        ))
    })
}

/// Opens a location as a backend.
pub fn open_location(location: &str, policy: SymlinkPolicy, writable: bool) -> Result<Arc<dyn SkillBackend>, Failure> {
    if location.starts_with("s3://") {
        let backend = ObjectStoreBackend::from_s3_url(location, &S3Options::default())
            .map_err(|e| Failure::usage(format!("cannot use `{location}`: {e}")))?;
        return Ok(Arc::new(if writable { backend } else { backend.read_only() }));
    }
    if let Some(file) = location.strip_prefix("memory:") {
        if writable {
            return Err(Failure::usage(format!(
                "`{location}` is loaded into memory for one command, so a change to it would be lost; write to a directory or s3:// location"
            )));
        }
        let text = std::fs::read_to_string(file)
            .map_err(|e| Failure::usage(format!("cannot read the memory file `{file}`: {e}")))?;
        let backend = MemoryBackend::from_json(&text)
            .map_err(|e| Failure::usage(format!("cannot load the memory file `{file}`: {e}")))?;
        return Ok(Arc::new(backend));
    }
    let backend = FsBackend::with_policy(location, policy)
        .map_err(|e| Failure::usage(format!("cannot open the directory `{location}`: {e}")))?;
    Ok(Arc::new(if writable { backend } else { backend.read_only() }))
}

/// Gives a source its own symlink policy by mounting its directory alone,
/// so links are judged against the source's directory.
fn confine_source(
    table: &mut MountTable,
    mounts: &[Mount],
    source: &Source,
    policy: SymlinkPolicy,
) -> Result<(), Failure> {
    let path = source.path();
    let mount = mounts
        .iter()
        .filter(|m| path.starts_with(&m.at))
        .max_by_key(|m| m.at.segments().count())
        .ok_or_else(|| Failure::usage(format!("no mount serves the source {path}")))?;
    if !is_local(&mount.location) {
        return Err(Failure::usage(format!(
            "a symlink policy applies to local directories only; the source {path} is served by {}",
            mount.location
        )));
    }
    let inner = path.strip_prefix(&mount.at).expect("the mount is an ancestor");
    let host: PathBuf = Path::new(&mount.location).join(inner.relative_str());
    let backend = FsBackend::with_policy(&host, policy)
        .map_err(|e| Failure::usage(format!("cannot open the source {path}: {e}")))?;
    let backend = if source.is_writable() {
        backend
    } else {
        backend.read_only()
    };
    table
        .mount(path.clone(), Arc::new(backend))
        .map_err(|e| Failure::usage(format!("cannot mount the source {path}: {e}")))
}
