//! Dynamic completion: skill names and source labels, read from the
//! namespace the working directory's `skillstore.yaml` describes (the
//! command line being completed is not parsed yet, so its own `--config`
//! or `--source` does not apply). Anything that fails completes nothing.
//!
//! Completion runs at a key press, in whatever directory the shell is in,
//! on a configuration that may have come with a cloned repository: it
//! reads local files only. A configuration that mounts anything but local
//! directories and memory files (Git, S3, a discovery endpoint) completes
//! no skill name, so a key press never reaches the network, runs a
//! credential helper or `ssh`, or waits on a remote. Source labels come
//! from the configuration alone.

use clap_complete::CompletionCandidate;

/// The catalog's skill names, each with its description as help.
pub fn skill_names() -> Vec<CompletionCandidate> {
    let Some(namespace) = namespace() else {
        return Vec::new();
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_all().build() else {
        return Vec::new();
    };
    let catalog = runtime.block_on(namespace.load());
    catalog
        .skills()
        .iter()
        .map(|s| {
            let help = s.metadata.description.lines().next().unwrap_or("").to_owned();
            CompletionCandidate::new(s.name()).help(Some(help.into()))
        })
        .collect()
}

/// The namespace's source labels.
pub fn source_labels() -> Vec<CompletionCandidate> {
    let Some(namespace) = namespace() else {
        return Vec::new();
    };
    namespace
        .sources()
        .iter()
        .map(|s| CompletionCandidate::new(s.label()))
        .collect()
}

/// The working directory's namespace, when every mount is local.
fn namespace() -> Option<skillstore::Namespace> {
    let config = skillstore::Config::load_or_default(None, true).ok()?;
    let local = config.mounts.iter().all(|m| {
        m.location.starts_with("memory:")
            || skillstore::location::Location::parse(&m.location).is_ok_and(|l| l.is_local_dir())
    });
    if !local {
        return None;
    }
    // No cache either: a key press writes nothing.
    let mut config = config;
    config.disable_cache();
    config.open().ok()
}
