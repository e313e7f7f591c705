//! The raw-read floor: list the layers of a skills tree and read every
//! SKILL.md whole, on all cores, with nothing else. `skillstore list` is
//! measured against this program's whole-process time.
//!
//!     cargo bench --bench read_floor -- ROOT [LAYER ...]
//!
//! (or run the built binary directly). Prints the SKILL.md files it
//! listed, those it read and their bytes, and fails (exit 1) when it read
//! none or fewer than it listed: a floor that read nothing is no floor.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

fn main() {
    let mut args = std::env::args().skip(1).filter(|a| a != "--bench");
    let Some(root) = args.next().map(PathBuf::from) else {
        eprintln!("usage: read_floor ROOT [LAYER ...]");
        std::process::exit(2);
    };
    let mut layers: Vec<String> = args.collect();
    if layers.is_empty() {
        layers = ["base", "user", "project", "team"].map(String::from).to_vec();
    }
    let mut files = Vec::new();
    for layer in &layers {
        let Ok(entries) = std::fs::read_dir(root.join(layer)) else {
            continue;
        };
        for entry in entries.flatten() {
            files.push(entry.path().join("SKILL.md"));
        }
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let next = AtomicUsize::new(0);
    let (count, bytes) = std::thread::scope(|scope| {
        let workers: Vec<_> = (0..threads)
            .map(|_| scope.spawn(|| read_share(&files, &next)))
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("reader thread"))
            .fold((0, 0), |(c, b), (wc, wb)| (c + wc, b + wb))
    });
    println!("{count} files, {bytes} bytes ({} listed)", files.len());
    if count == 0 || count < files.len() {
        eprintln!(
            "read_floor: read {count} of {} SKILL.md files listed under {} (layers {layers:?})",
            files.len(),
            root.display()
        );
        std::process::exit(1);
    }
}

/// Reads files from the shared list until none is left.
fn read_share(files: &[PathBuf], next: &AtomicUsize) -> (usize, usize) {
    let (mut count, mut bytes) = (0, 0);
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        let Some(path) = files.get(i) else {
            return (count, bytes);
        };
        if let Ok(data) = std::fs::read(Path::new(path)) {
            count += 1;
            bytes += data.len();
        }
    }
}
