//! The merged skills of a `skillstore` namespace as a read-only FUSE
//! filesystem, laid out as a sync would write them: `DIR/NAME/...`, one
//! directory per winning skill.
//!
//! Guarantees:
//! - the tree is read-only: every write, create or remove is refused;
//! - the skill directories are the catalog's winners (enabled ones unless
//!   [`MountOptions::all_skills`]); directories below them are listed from
//!   the backend when first visited after a refresh, never entering a
//!   directory link, no deeper than [`MountOptions::max_depth`] and with at
//!   most [`MountOptions::max_entries`] entries each;
//! - a file is read when it is opened, whole, through the backend under the
//!   read limit and confined to its skill's directory once links resolve
//!   (backends read whole objects or prefixes, not ranges); the bytes are
//!   cached by path and version, up to [`MountOptions::cache_bytes`], so
//!   reopening an unchanged file reads nothing;
//! - the catalog is refreshed every [`MountOptions::refresh_interval`] in
//!   the background, and at once by [`Mounted::refresh`]; a change shows
//!   once the kernel's attribute cache ([`MountOptions::attr_ttl`]) lapses;
//! - errors reach readers as `errno` values and are logged with virtual
//!   paths only.
//!
//! Mounting needs `/dev/fuse` and either root (the kernel's `mount(2)` is
//! called directly, no C library or helper involved) or the `fusermount3`
//! helper of the `fuse3` package for an unprivileged user.

mod cache;
mod fs;

use std::io;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use skillstore::SharedCatalog;
use skillstore::backends::DEFAULT_READ_LIMIT;

/// How a mount behaves.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MountOptions {
    /// Show disabled skills too (by default only enabled ones).
    pub all_skills: bool,
    /// How often the catalog is refreshed in the background.
    pub refresh_interval: Duration,
    /// How long the kernel may cache names and attributes before asking
    /// again; zero makes every change visible as soon as it is refreshed.
    pub attr_ttl: Duration,
    /// The largest file read, in bytes (the namespace's read limit).
    pub read_limit: u64,
    /// How many directory levels below a skill's directory are shown.
    pub max_depth: usize,
    /// The most entries shown in one directory.
    pub max_entries: usize,
    /// The most bytes of file contents kept between opens.
    pub cache_bytes: usize,
    /// Let users other than the one mounting read the tree (a container
    /// whose processes run as another user).
    pub allow_other: bool,
}

impl Default for MountOptions {
    /// Enabled skills, a refresh every 30 s, a 1 s attribute cache, the
    /// default 10 MiB read limit, 32 levels, 10,000 entries a directory,
    /// 64 MiB of cached contents, the mounting user only.
    fn default() -> Self {
        MountOptions {
            all_skills: false,
            refresh_interval: Duration::from_secs(30),
            attr_ttl: Duration::from_secs(1),
            read_limit: DEFAULT_READ_LIMIT,
            max_depth: 32,
            max_entries: 10_000,
            cache_bytes: 64 * 1024 * 1024,
            allow_other: false,
        }
    }
}

/// A mounted tree. Dropping it (or [`Mounted::unmount`]) unmounts it and
/// stops the background refresh.
pub struct Mounted {
    session: Option<fuser::BackgroundSession>,
    inner: Arc<fs::Inner>,
    refresher: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for Mounted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mounted").finish_non_exhaustive()
    }
}

impl Mounted {
    /// Mounts `catalog` read-only at the directory `dir` and serves it on a
    /// thread of its own. Must be called inside a Tokio runtime, which
    /// serves the backend reads and the background refresh. Fails with a
    /// message saying why when the machine cannot mount.
    pub fn mount(catalog: SharedCatalog, dir: &Path, options: MountOptions) -> io::Result<Mounted> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| io::Error::other("a skills mount must be made inside a Tokio runtime"))?;
        check_can_mount(dir)?;
        let inner = Arc::new(fs::Inner::new(catalog, options.clone(), runtime));
        let mut config = fuser::Config::default();
        config.mount_options = vec![
            fuser::MountOption::RO,
            fuser::MountOption::NoDev,
            fuser::MountOption::NoSuid,
            fuser::MountOption::NoExec,
            fuser::MountOption::FSName("skillstore".into()),
            fuser::MountOption::Subtype("skillstore".into()),
        ];
        if options.allow_other {
            config.acl = fuser::SessionACL::All;
        }
        let session =
            fuser::spawn_mount(fs::SkillsFs::new(Arc::clone(&inner)), dir, &config).map_err(explain_mount_error)?;
        let refresher = tokio::spawn({
            let inner = Arc::clone(&inner);
            async move {
                loop {
                    tokio::time::sleep(inner.options.refresh_interval).await;
                    inner.refresh().await;
                }
            }
        });
        Ok(Mounted {
            session: Some(session),
            inner,
            refresher,
        })
    }

    /// Refreshes the catalog now; what changed in the sources shows from
    /// here on (after the attribute cache lapses).
    pub async fn refresh(&self) {
        self.inner.refresh().await;
    }

    /// Unmounts the tree and waits for its thread to end.
    pub fn unmount(mut self) -> io::Result<()> {
        self.refresher.abort();
        match self.session.take() {
            Some(session) => session.umount_and_join(),
            None => Ok(()),
        }
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        self.refresher.abort();
        if let Some(session) = self.session.take()
            && let Err(e) = session.umount_and_join()
        {
            tracing::warn!(error = %e, "cannot unmount the skills tree");
        }
    }
}

/// Mounts `catalog` at `dir` and serves it until `shutdown` completes,
/// then unmounts it. For a command that runs in the foreground until
/// SIGINT or SIGTERM.
pub async fn serve(
    catalog: SharedCatalog,
    dir: &Path,
    options: MountOptions,
    shutdown: impl Future<Output = ()>,
) -> io::Result<()> {
    let mounted = Mounted::mount(catalog, dir, options)?;
    shutdown.await;
    mounted.unmount()
}

/// Says why a mount cannot be made before trying, where that can be known.
fn check_can_mount(dir: &Path) -> io::Result<()> {
    match std::fs::metadata("/dev/fuse") {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "cannot mount: this machine has no /dev/fuse (load the fuse kernel module, or give the container --device /dev/fuse)",
            ));
        }
        Err(e) => return Err(io::Error::new(e.kind(), format!("cannot mount: /dev/fuse: {e}"))),
    }
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(()),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "cannot mount: the mount point is not a directory",
        )),
        Err(e) => Err(io::Error::new(e.kind(), format!("cannot mount: the mount point: {e}"))),
    }
}

fn explain_mount_error(e: io::Error) -> io::Error {
    let why = match e.kind() {
        io::ErrorKind::PermissionDenied => {
            "not permitted to mount: run as root, or install fusermount3 (package fuse3) for an unprivileged mount"
        }
        io::ErrorKind::NotFound => {
            "cannot mount: no way to mount as this user (fusermount3 from the fuse3 package is missing)"
        }
        _ => "cannot mount",
    };
    io::Error::new(e.kind(), format!("{why}: {e}"))
}
