//! `sync DIR` and `mount DIR`: the merged winners where a sandbox reads
//! them, once, kept in step, or served live through FUSE.

use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::time::Duration;

use skillstore::SharedCatalog;
use skillstore::sync::{SyncOptions, SyncReport, sync, watch};

use super::commands::degraded;
use super::namespace::build;
use super::terminal::shown;
use super::{Failure, Global, emit, shutdown};

/// What `sync` was asked to do.
#[derive(Debug, clap::Args)]
pub struct SyncFlags {
    /// The directory to write (created if absent; may be a mount point; files of yours in it are
    /// kept). It never moves: each skill directory in it is switched whole, so a container may
    /// mount DIR itself.
    dir: PathBuf,
    /// Disabled skills too.
    #[arg(long)]
    all: bool,
    /// Trust the sources with programs: files starting with `#!` become executable.
    #[arg(long)]
    keep_modes: bool,
    /// The most files one skill may hold (default 10,000; a skill with more is left out and reported).
    #[arg(long, value_name = "N")]
    max_files: Option<usize>,
    /// The most bytes one skill may hold (default 64 MiB; a skill with more is left out and reported).
    #[arg(long, value_name = "BYTES")]
    max_skill_bytes: Option<u64>,
    /// The most bytes the whole tree may hold (default 1 GiB; skills past it are left out and reported).
    #[arg(long, value_name = "BYTES")]
    max_total_bytes: Option<u64>,
    /// Print each report as one line of JSON.
    #[arg(long)]
    json: bool,
    /// Keep DIR in step: refresh and sync every INTERVAL (e.g. 30s) until SIGINT or SIGTERM.
    #[arg(long, value_name = "INTERVAL", value_parser = shutdown::parse_interval)]
    watch: Option<Duration>,
}

pub async fn run(global: &Global, flags: SyncFlags) -> Result<(), Failure> {
    let namespace = build(global)?;
    let mut options = SyncOptions {
        all_skills: flags.all,
        keep_modes: flags.keep_modes,
        ..namespace.sync_options().clone()
    };
    options.max_files_per_skill = flags.max_files.unwrap_or(options.max_files_per_skill);
    options.max_skill_bytes = flags.max_skill_bytes.unwrap_or(options.max_skill_bytes);
    options.max_total_bytes = flags.max_total_bytes.unwrap_or(options.max_total_bytes);
    let dir = flags.dir.as_path();
    let catalog = namespace.load().await;
    let Some(interval) = flags.watch else {
        // A source that could not be listed leaves the tree as it was: exit 3.
        let code = if degraded(&catalog).is_some() { 3 } else { 1 };
        let report = sync(&catalog, dir, &options).await.map_err(|e| Failure {
            code,
            message: e.to_string(),
        })?;
        print(&report, dir, flags.json)?;
        // Skills a lock or a signature policy withheld (at the load, or
        // because a checked file could not be read as checked when synced)
        // are not in the tree: the rest was synced, and the command exits 3.
        if let Some(failure) = degraded(&catalog) {
            return Err(failure);
        }
        return withheld_from_sync(&report).map_or(Ok(()), Err);
    };
    let shared = SharedCatalog::new(catalog).following(namespace.clone());
    let mut failure = None;
    watch(
        &shared,
        dir,
        &options,
        interval,
        shutdown::signal(),
        |result| match result {
            Ok(report) => match print(&report, dir, flags.json) {
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

/// Exit 3 when the sync withheld a checked skill it could not write as
/// checked.
fn withheld_from_sync(report: &SyncReport) -> Option<Failure> {
    if report.withheld.is_empty() {
        return None;
    }
    let names: Vec<String> = report.withheld.iter().map(|n| format!("`{}`", shown(n))).collect();
    Some(Failure {
        code: 3,
        message: format!(
            "withheld: {} changed since its lock or signature was checked, so this sync left it out \
             (a copy synced before is kept); sync again to check it again",
            names.join(", ")
        ),
    })
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
    for file in &report.repaired {
        let copy = report.repaired_copies.as_deref().map_or(String::new(), |tree| {
            format!(
                " (the changed copy is {}/{}; the next sync that changes the tree keeps it)",
                shown(tree),
                shown(file)
            )
        });
        eprintln!(
            "warning: {} was changed in the tree since sync wrote it; written again from the source{copy}",
            shown(file)
        );
    }
    for tree in &report.kept {
        if report.kept_now.contains(tree) {
            eprintln!(
                "warning: {} holds files sync did not write or that were changed; it is kept: look through it and remove it",
                shown(tree)
            );
        } else {
            eprintln!(
                "note: {}, kept by an earlier sync, is still there: look through it and remove it",
                shown(tree)
            );
        }
    }
    if json {
        let mut line = serde_json::to_vec(report).map_err(|e| Failure::failed(e.to_string()))?;
        line.push(b'\n');
        return emit(&line);
    }
    let dir = dir.display().to_string();
    let dir = shown(&dir);
    let count = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let line = if report.switched {
        let kept = match report.kept_now.len() {
            0 => String::new(),
            n => format!("; {} kept", count(n, "tree")),
        };
        format!(
            "synced {} into {dir}: {} added, {} updated, {} removed, {} repaired ({} copied, {} unchanged){kept}\n",
            count(report.skills, "skill"),
            report.added.len(),
            report.updated.len(),
            report.removed.len(),
            report.repaired.len(),
            count(report.files_copied, "file"),
            report.files_linked,
        )
    } else {
        format!("{dir} is up to date ({})\n", count(report.skills, "skill"))
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
    pub timeout: Option<Duration>,
}

pub async fn mount(global: &Global, args: MountArgs<'_>) -> Result<(), Failure> {
    mount_point(args.dir)?;
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
    if let Some(timeout) = args.timeout {
        options.request_timeout = timeout;
    }
    let catalog = namespace.load().await;
    if let Some(failure) = degraded(&catalog) {
        eprintln!(
            "warning: {}; the mount shows them once a refresh reaches them",
            shown(&failure.message)
        );
    }
    let skills = catalog.skills().len();
    let mounted = skillstore_fuse::Mounted::mount(
        SharedCatalog::new(catalog).following(namespace.clone()),
        args.dir,
        options,
    )
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

/// Refuses a mount point that is not an existing directory, naming it.
fn mount_point(dir: &Path) -> Result<(), Failure> {
    let shown_dir = dir.display().to_string();
    let shown_dir = shown(&shown_dir);
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(Failure::failed(format!(
            "cannot mount at {shown_dir}: not a directory (the mount point must be an existing, empty directory)"
        ))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Failure::failed(format!(
            "cannot mount at {shown_dir}: no such directory (create it first: mkdir -p {shown_dir})"
        ))),
        Err(e) => Err(Failure::failed(format!("cannot mount at {shown_dir}: {e}"))),
    }
}
