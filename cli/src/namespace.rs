//! Command-line flags as one more way of building a [`Config`]; the
//! library assembles the namespace from it.

use std::path::Path;

use skillstore::{Config, Location, Namespace};

use super::{Failure, Global};

/// The configuration the flags describe: the `--config` file (or
/// `./skillstore.yaml` when no `--source` is given), then `--mount`,
/// `--source` and `--writable` on top. Relative flag locations resolve
/// against the working directory.
pub fn config(global: &Global) -> Result<Config, Failure> {
    let mut config = Config::load_or_default(global.config.as_deref(), global.sources.is_empty())?;
    for flag in &global.mounts {
        let Some((at, location)) = flag.split_once('=') else {
            return Err(Failure::usage(format!("--mount takes VPATH=LOCATION, got `{flag}`")));
        };
        config.set_mount(at, location, Path::new("."))?;
    }
    if !global.sources.is_empty() {
        config.set_sources(global.sources.iter().map(String::as_str))?;
    }
    for name in &global.writable {
        config.make_writable(name);
    }
    if global.no_cache {
        config.disable_cache();
    }
    Ok(config)
}

/// The namespace the flags describe. A `memory:` location lives for one
/// command here, so a writable source in one is refused: its changes
/// would be lost.
pub fn build(global: &Global) -> Result<Namespace, Failure> {
    let mut config = config(global)?;
    if let Some(file) = &global.locked {
        config.set_lock(file);
    }
    let namespace = config.open()?;
    for source in namespace.sources().iter().filter(|s| s.is_writable()) {
        if let Some(location @ Location::Memory(_)) = namespace.source_location(source.name()) {
            return Err(Failure::usage(format!(
                "`{location}` is loaded into memory for one command, so a change to it would be lost; write to a directory or s3:// location"
            )));
        }
    }
    Ok(namespace)
}
