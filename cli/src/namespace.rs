//! Command-line flags as one more way of building a [`Config`]; the
//! library assembles the namespace from it.

use std::path::{Path, PathBuf};

use skillstore::integrity::lock::lock_path;
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
    build_checking(global, false).map(|(namespace, _)| namespace)
}

/// As [`build`], with the lock file it checks against. With `verify`, the
/// lock file `lock` writes is read when it exists, without `--locked`.
pub fn build_checking(global: &Global, verify: bool) -> Result<(Namespace, Option<PathBuf>), Failure> {
    let mut config = config(global)?;
    let lock = locked_file(global, &config, verify)?;
    if let Some(file) = &lock {
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
    Ok((namespace, lock))
}

/// The lock file `config` is checked against: `--locked=FILE`; for a bare
/// `--locked`, [`lock_path`] (refused when it does not exist); without the
/// flag, the configuration's `lock:`, or with `verify` the file `lock`
/// writes when it exists.
pub fn locked_file(global: &Global, config: &Config, verify: bool) -> Result<Option<PathBuf>, Failure> {
    match &global.locked {
        Some(Some(file)) => Ok(Some(file.clone())),
        Some(None) => {
            let file = lock_path(config);
            if !file.exists() {
                return Err(Failure::usage(format!(
                    "--locked: there is no lock file at {}; `skillstore lock` writes it",
                    file.display()
                )));
            }
            Ok(Some(file))
        }
        None if config.lock.is_some() => Ok(Some(lock_path(config))),
        None if verify => Ok(Some(lock_path(config)).filter(|file| file.exists())),
        None => Ok(None),
    }
}
