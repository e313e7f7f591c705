//! `sync DIR` and `mount DIR`: the merged winners where a sandbox reads
//! them, once, kept in step, or served live through FUSE.

use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

use skillstore::SharedCatalog;
use skillstore::sync::{SyncOptions, SyncReport, sync, watch};

use super::commands::degraded;
use super::namespace::build;
use super::terminal::shown;
use super::{Failure, Global, emit, shutdown};

/// What `sync` was asked to do.
#[derive(Debug)]
pub struct SyncArgs<'a> {
    pub dir: &'a Path,
    pub all: bool,
    pub keep_modes: bool,
    pub max_files: Option<usize>,
    pub json: bool,
    pub watch: Option<Duration>,
}

pub async fn run(global: &Global, args: SyncArgs<'_>) -> Result<(), Failure> {
    let namespace = build(global)?;
    let mut options = SyncOptions {
        all_skills: args.all,
        keep_modes: args.keep_modes,
        read_limit: namespace.load_options().read_limit,
        ..SyncOptions::default()
    };
    if let Some(max) = args.max_files {
        options.max_files_per_skill = max;
    }
    let catalog = namespace.load().await;
    let Some(interval) = args.watch else {
        // A source that could not be listed leaves the tree as it was: exit 3.
        let code = if degraded(&catalog).is_some() { 3 } else { 1 };
        let report = sync(&catalog, args.dir, &options).await.map_err(|e| Failure {
            code,
            message: e.to_string(),
        })?;
        return print(&report, args.dir, args.json);
    };
    let shared = SharedCatalog::new(catalog);
    let mut failure = None;
    watch(
        &shared,
        args.dir,
        &options,
        interval,
        shutdown::signal(),
        |result| match result {
            Ok(report) => match print(&report, args.dir, args.json) {
                Ok(()) => ControlFlow::Continue(()),
                Err(f) => {
                    failure = Some(f);
                    ControlFlow::Break(())
                }
            },
            // The live generation stays; the next round tries again.
            Err(e) => {
                eprintln!("error: {}", shown(&e.to_string()));
                ControlFlow::Continue(())
            }
        },
    )
    .await;
    failure.map_or(Ok(()), Err)
}

fn print(report: &SyncReport, dir: &Path, json: bool) -> Result<(), Failure> {
    for refusal in &report.refused {
        let what = if refusal.whole_skill {
            "left out"
        } else {
            "file left out"
        };
        eprintln!(
            "warning: {} {what}: {} ({}): {}",
            shown(&refusal.skill),
            shown(&refusal.path),
            refusal.kind,
            shown(&refusal.message)
        );
    }
    if json {
        let mut line = serde_json::to_vec(report).map_err(|e| Failure::failed(e.to_string()))?;
        line.push(b'\n');
        return emit(&line);
    }
    let dir = dir.display().to_string();
    let dir = shown(&dir);
    let line = if report.switched {
        format!(
            "synced {} skills into {dir}: {} added, {} updated, {} removed ({} files copied, {} unchanged)\n",
            report.skills,
            report.added.len(),
            report.updated.len(),
            report.removed.len(),
            report.files_copied,
            report.files_linked,
        )
    } else {
        format!("{dir} is up to date ({} skills)\n", report.skills)
    };
    emit(line.as_bytes())
}

/// What `mount` was asked to do.
#[derive(Debug)]
pub struct MountArgs<'a> {
    pub dir: &'a Path,
    pub all: bool,
    pub allow_other: bool,
    pub refresh: Option<Duration>,
}

pub async fn mount(global: &Global, args: MountArgs<'_>) -> Result<(), Failure> {
    let namespace = build(global)?;
    let mut options = skillstore_fuse::MountOptions {
        all_skills: args.all,
        allow_other: args.allow_other,
        read_limit: namespace.load_options().read_limit,
        ..skillstore_fuse::MountOptions::default()
    };
    if let Some(refresh) = args.refresh {
        options.refresh_interval = refresh;
    }
    let catalog = namespace.load().await;
    if let Some(failure) = degraded(&catalog) {
        eprintln!(
            "warning: {}; the mount shows them once a refresh reaches them",
            shown(&failure.message)
        );
    }
    let skills = catalog.skills().len();
    let mounted = skillstore_fuse::Mounted::mount(SharedCatalog::new(catalog), args.dir, options)
        .map_err(|e| Failure::failed(e.to_string()))?;
    eprintln!(
        "mounted {skills} skills read-only at {}; SIGINT or SIGTERM unmounts",
        shown(&args.dir.display().to_string()).as_ref()
    );
    shutdown::signal().await;
    mounted
        .unmount()
        .map_err(|e| Failure::failed(format!("cannot unmount: {e}")))
}
