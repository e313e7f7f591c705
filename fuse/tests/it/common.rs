//! Helpers shared by the mount tests: whether a directory is a mount point
//! now, and `serve` running in the background until told to stop.

#![allow(dead_code)]

use std::io;
use std::path::{Path, PathBuf};

use skillstore::SharedCatalog;
use skillstore_fuse::{MountOptions, serve};

/// True when `at` is a mount point of this process's namespace.
pub fn is_mounted(at: &Path) -> bool {
    let at = at.canonicalize().unwrap();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(at.to_str().unwrap()))
}

/// [`serve`] of `catalog` at `at`, mounted and running in the background.
pub struct Served {
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<io::Result<()>>,
}

impl Served {
    /// Mounts and serves, or fails the test saying why this machine cannot.
    pub async fn start(catalog: SharedCatalog, at: PathBuf, options: MountOptions) -> Served {
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            serve(catalog, &at, options, async move {
                ready_tx.send(()).unwrap();
                stopped.await.unwrap();
            })
            .await
        });
        if ready_rx.await.is_err() {
            let err = task.await.unwrap().unwrap_err();
            panic!("this test needs a real FUSE mount and got none: {err}");
        }
        Served { stop, task }
    }

    /// Completes the shutdown future, as SIGTERM does, and returns what
    /// `serve` returned.
    pub async fn stop(self) -> io::Result<()> {
        self.stop.send(()).unwrap();
        self.task.await.unwrap()
    }
}
