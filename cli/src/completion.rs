//! Dynamic completion: skill names and source labels, read from the
//! namespace the working directory's `skillstore.yaml` describes (the
//! command line being completed is not parsed yet, so its own `--config`
//! or `--source` does not apply). Anything that fails completes nothing.

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

fn namespace() -> Option<skillstore::Namespace> {
    skillstore::Config::load_or_default(None, true).ok()?.open().ok()
}
