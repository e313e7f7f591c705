//! `publish`: upload a local skills tree, with the read guards, skipping
//! what the destination already holds.

use std::collections::{BTreeMap, BTreeSet};
use std::io::IsTerminal;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;
use futures::StreamExt;
use indicatif::{ProgressBar, ProgressStyle};
use md5::{Digest, Md5};
use skillstore::backends::{
    DEFAULT_READ_LIMIT, EntryKind, ErrorKind, FsBackend, MemoryBackend, Metadata, PassReason, PutMode, ReadOptions,
    SkillBackend, SkillBackendExt, SymlinkPolicy, VPath, Version, WalkLimits,
};
use skillstore::index::{HeadEntry, INDEX_FILE};
use skillstore::integrity::SignatureStatus;
use skillstore::integrity::policy::{CheckedFiles, Expected, SignaturePolicy, check_dir_files, signature_message};
use skillstore::integrity::signature::{AllowedSigners, SIGNATURE_FILE};
use skillstore::skill::{SKILL_FILE, is_skill_file_name};

use super::terminal::shown;
use super::{Failure, emit};
use skillstore::location::read_local_text;
use skillstore::validate::check_tree;
use skillstore::{DefaultContentCheck, Location};

/// A file found in the local tree.
struct LocalFile {
    path: VPath,
    size: u64,
}

/// Why a local entry was not published.
struct Skipped {
    path: VPath,
    reason: String,
}

enum Sent {
    Uploaded(u64),
    Unchanged,
    Skipped(String),
    Failed(String),
}

/// A SKILL.md as the destination now holds it, for the index.
type Published = Option<(Bytes, Version)>;

pub async fn run(
    dir: &Path,
    location: &str,
    concurrency: usize,
    checked: bool,
    allowed_signers: Option<&Path>,
) -> Result<(), Failure> {
    if dir.join(SKILL_FILE).is_file() {
        return Err(Failure::usage(format!(
            "{} is one skill's directory; publish takes a tree of layers (DIR/LAYER/NAME/SKILL.md): \
             publish the directory two levels up, or `pack` this skill",
            dir.display()
        )));
    }
    let local = FsBackend::with_policy(dir, SymlinkPolicy::WithinRoot)
        .map_err(|e| Failure::usage(format!("cannot open the directory {}: {e}", dir.display())))?
        .read_only();
    let parsed = Location::parse(location)?;
    let (destination, memory_file): (Arc<dyn SkillBackend>, Option<(MemoryBackend, &Path)>) = match &parsed {
        Location::Memory(file) => {
            let memory = if file.exists() {
                let text = read_local_text(file, DEFAULT_READ_LIMIT, "memory file")?;
                MemoryBackend::from_json(&text)
                    .map_err(|e| Failure::usage(format!("cannot load the memory file `{}`: {e}", file.display())))?
            } else {
                MemoryBackend::new()
            };
            (Arc::new(memory.clone()), Some((memory, file.as_path())))
        }
        other => {
            if let Location::Dir(target) = other {
                create_target(target)?;
            }
            (other.open(SymlinkPolicy::WithinRoot, DEFAULT_READ_LIMIT)?, None)
        }
    };
    if !destination.capabilities().write {
        return Err(Failure::usage(format!("`{location}` cannot be written to")));
    }

    let (files, mut skipped) = walk(&local).await?;
    if checked {
        let paths: Vec<VPath> = files.iter().map(|f| f.path.clone()).collect();
        let report = check_tree(&local, &paths, &DefaultContentCheck).await;
        for w in &report.warnings {
            eprintln!(
                "warning: {}: [{}] {}",
                shown(w.path.as_ref()),
                w.kind,
                shown(&w.message)
            );
        }
        if !report.errors.is_empty() {
            let list: Vec<String> = report
                .errors
                .iter()
                .map(|e| format!("  {}: [{}] {}", shown(e.path.as_ref()), e.kind, shown(&e.message)))
                .collect();
            return Err(Failure::failed(format!(
                "nothing published: {} problem(s) (pass --no-check to publish anyway)\n{}",
                report.errors.len(),
                list.join("\n")
            )));
        }
    }
    // The hash of every file of every checked skill as the check read it:
    // a file is uploaded only when the bytes read for the upload have it.
    let checked = match allowed_signers {
        Some(file) => Some(Arc::new(check_signatures(&local, &files, file).await?)),
        None => None,
    };
    let total: u64 = files.iter().map(|f| f.size).sum();
    let file_count = files.len();
    // The bar's position counts bytes; the files done are its message.
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(total);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {msg}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar.set_message(format!("0/{file_count} files"));
        bar
    } else {
        ProgressBar::hidden()
    };
    let files_done = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let compare_md5 = matches!(parsed, Location::S3 { .. });
    let local = Arc::new(local);
    let results: Vec<(VPath, Sent, Published)> = futures::stream::iter(files)
        .map(|file| {
            let local = Arc::clone(&local);
            let destination = Arc::clone(&destination);
            let bar = bar.clone();
            let checked = checked.clone();
            let files_done = Arc::clone(&files_done);
            async move {
                let (sent, published) = match checked.as_deref().and_then(|c| c.expected(&file.path)) {
                    Some(Expected::NotChecked) => (
                        Sent::Skipped("added to a checked skill after its signature check: not part of it".into()),
                        None,
                    ),
                    _ => send(&*local, &*destination, &file, compare_md5, checked.as_deref()).await,
                };
                let done = files_done.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1;
                bar.set_message(format!("{done}/{file_count} files"));
                bar.inc(file.size);
                (file.path, sent, published)
            }
        })
        .buffer_unordered(concurrency.max(1))
        .collect()
        .await;
    bar.finish_and_clear();

    let (mut uploaded, mut bytes, mut unchanged) = (0usize, 0u64, 0usize);
    let mut failed = Vec::new();
    let mut indexed: BTreeMap<VPath, Vec<(String, Option<HeadEntry>)>> = BTreeMap::new();
    let mut layers_written: BTreeSet<VPath> = BTreeSet::new();
    for (path, sent, published) in results {
        if let Some((data, version)) = published
            && let Some((source, key, dir)) = index_key(&path)
        {
            let entry = skillstore::index::entry_for(&dir, &data, version);
            indexed.entry(source).or_default().push((key, entry));
        }
        match sent {
            Sent::Uploaded(size) => {
                uploaded += 1;
                bytes += size;
                if let Some(layer) = path.segments().next().and_then(|s| VPath::root().join(s).ok()) {
                    layers_written.insert(layer);
                }
            }
            Sent::Unchanged => unchanged += 1,
            Sent::Skipped(reason) => skipped.push(Skipped { path, reason }),
            Sent::Failed(reason) => failed.push((path, reason)),
        }
    }
    // Each directory holding skills gets an index of what was published,
    // where the destination can be listed deep (it is of no use elsewhere).
    let mut index_failed = Vec::new();
    if destination.capabilities().deep_list {
        for (source, changes) in &indexed {
            if let Err(e) = skillstore::index::update(&*destination, source, changes).await {
                index_failed.push(format!(
                    "{}: {e}",
                    source.join(INDEX_FILE).unwrap_or_else(|_| source.clone())
                ));
            }
        }
    }
    for failure in &index_failed {
        eprintln!("warning: the index was not written ({failure}); loads will read every SKILL.md");
    }
    // Readers following the store's change journal learn of the upload.
    let written: Vec<VPath> = layers_written.into_iter().collect();
    if let Err(e) = skillstore::changes::record_outside(&parsed, &written).await {
        eprintln!(
            "warning: the change journal was not told ({e}); readers following it will see the upload at their fallback poll"
        );
    }
    if let Some((memory, file)) = memory_file {
        let json = memory.to_json().map_err(|e| Failure::failed(e.to_string()))?;
        std::fs::write(file, json).map_err(|e| Failure::failed(format!("cannot write `{}`: {e}", file.display())))?;
    }

    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    let mut summary = format!(
        "published {uploaded} file(s), {bytes} bytes, to {location}; {unchanged} unchanged, {} skipped, {} failed\n",
        skipped.len(),
        failed.len()
    );
    for s in &skipped {
        summary.push_str(&format!("  skipped {}: {}\n", s.path, s.reason));
    }
    emit(summary.as_bytes())?;
    if failed.is_empty() {
        return Ok(());
    }
    failed.sort();
    let list: Vec<String> = failed.iter().map(|(p, reason)| format!("{p} ({reason})")).collect();
    Err(Failure::failed(format!("not uploaded: {}", list.join("; "))))
}

/// Every regular file under the local root, and what was passed over. The
/// walk never descends into a directory link and is bounded, so a tree
/// holding `a/up -> ..` is published once, not forever.
async fn walk(local: &FsBackend) -> Result<(Vec<LocalFile>, Vec<Skipped>), Failure> {
    let walked = local
        .walk(&VPath::root(), WalkLimits::default())
        .await
        .map_err(|e| Failure::failed(format!("cannot list the directory: {e}")))?;
    if walked.truncated {
        return Err(Failure::failed(format!(
            "the tree holds more than {} files; publish part of it",
            WalkLimits::default().max_files
        )));
    }
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    for file in walked.files {
        let size = file.entry.size.unwrap_or(0);
        if file.path.segments().any(|s| s.starts_with('.')) && !is_signature(&file.path) {
            // A source's `.history/` holds every earlier version of its
            // skills, secrets taken out included: it stays where it is.
            skipped.push(Skipped {
                path: file.path,
                reason: "a hidden path (histories and dot-files are not published)".to_owned(),
            });
        } else if size > DEFAULT_READ_LIMIT {
            skipped.push(Skipped {
                path: file.path,
                reason: format!("{size} bytes, over the {DEFAULT_READ_LIMIT}-byte limit"),
            });
        } else {
            files.push(LocalFile { path: file.path, size });
        }
    }
    for passed in walked.passed_over {
        let reason = match passed.reason {
            PassReason::DirectoryLink => "a link to a directory (not followed)".to_owned(),
            PassReason::UnresolvedLink => match local.stat(&passed.path).await {
                Err(e) => e.kind().describe().to_owned(),
                Ok(_) => "a link the symlink policy does not resolve".to_owned(),
            },
            PassReason::Special => ErrorKind::NotRegularFile.describe().to_owned(),
            PassReason::TooDeep => "nested too deeply".to_owned(),
            PassReason::Unlisted(kind) => format!("cannot be listed: {}", kind.describe()),
            _ => "passed over".to_owned(),
        };
        skipped.push(Skipped {
            path: passed.path,
            reason,
        });
    }
    files.sort_by(|a, b| a.path.cmp(&b.path));
    Ok((files, skipped))
}

/// True for `/LAYER/NAME/.skillstore/signature`: a skill's signature,
/// which travels with it (the one hidden path published).
fn is_signature(path: &VPath) -> bool {
    path.as_str()
        .strip_suffix(&format!("/{SIGNATURE_FILE}"))
        .is_some_and(|dir| dir.split('/').filter(|s| !s.is_empty()).count() == 2 && !dir.contains("/."))
}

/// Every skill of the tree (each directory holding a file that makes it a
/// skill for a catalog, `SKILL.md` or `skill.md`) checked against the
/// `allowed_signers` file `file`, signatures required, as a source with
/// that policy checks an install: any refused, nothing is published. The
/// files of the skills that pass, with the hashes the check read.
async fn check_signatures(local: &FsBackend, files: &[LocalFile], file: &Path) -> Result<CheckedFiles, Failure> {
    let text = read_local_text(file, DEFAULT_READ_LIMIT, "allowed_signers file")?;
    let policy = SignaturePolicy {
        allowed: AllowedSigners::parse(&text)?,
        required: true,
    };
    // Every directory holding a SKILL.md, at any depth: whatever would be
    // published as a skill is checked.
    let dirs: BTreeSet<VPath> = files
        .iter()
        .filter(|f| f.path.file_name().is_some_and(is_skill_file_name))
        .filter_map(|f| f.path.parent().filter(|d| !d.is_root()))
        .collect();
    let mut refused = Vec::new();
    let mut checked = CheckedFiles::new();
    for dir in dirs {
        let found = check_dir_files(local, &dir, &policy).await;
        if let SignatureStatus::Refused(why) = found.status {
            refused.push(format!(
                "  {}: [{}] {}",
                shown(dir.as_ref()),
                why.as_str(),
                signature_message(why).replace("it is not served", "it is not published")
            ));
            continue;
        }
        checked.add(dir, found);
    }
    if refused.is_empty() {
        return Ok(checked);
    }
    Err(Failure::failed(format!(
        "nothing published: {} skill(s) refused by the signature check\n{}",
        refused.len(),
        refused.join("\n")
    )))
}

/// The source directory, index key and skill directory name of a published
/// `.../SOURCE/DIR/SKILL.md`.
fn index_key(path: &VPath) -> Option<(VPath, String, String)> {
    let dir = path.parent()?;
    let source = dir.parent()?;
    let name = dir.as_str().rsplit('/').next()?.to_owned();
    let key = format!("{name}/{SKILL_FILE}");
    skillstore::index::skill_dir_of(&key)?;
    Some((source, key, name))
}

async fn send(
    local: &dyn SkillBackend,
    destination: &dyn SkillBackend,
    file: &LocalFile,
    compare_md5: bool,
    checked: Option<&CheckedFiles>,
) -> (Sent, Published) {
    let in_checked_skill = checked.is_some_and(|c| c.expected(&file.path).is_some());
    // A file of a skill (`/LAYER/NAME/...`) is read confined to its skill's
    // directory, as a catalog serves it: no link out of the skill, and none
    // to a hidden name (`notes.txt -> .env`).
    let options = if file.path.segments().count() > 2 {
        ReadOptions::default().confined(2)
    } else {
        ReadOptions::default()
    };
    let data = match local.read(&file.path, options).await {
        Ok(blob) => blob.data,
        Err(e) if in_checked_skill => {
            return (Sent::Failed(format!("checked, then cannot be read: {e}")), None);
        }
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::TooLarge | ErrorKind::NotRegularFile | ErrorKind::SymlinkRefused | ErrorKind::SymlinkEscape
            ) =>
        {
            return (Sent::Skipped(e.to_string()), None);
        }
        Err(e) => return (Sent::Failed(e.to_string()), None),
    };
    // The bytes uploaded are the ones read here: they must be the ones the
    // signature check read.
    if checked.is_some_and(|c| !c.admits(&file.path, &data)) {
        return (
            Sent::Failed("changed since its skill's signature was checked; not uploaded".into()),
            None,
        );
    }
    let is_skill_md = file.path.as_str().ends_with(&format!("/{SKILL_FILE}"));
    match destination.stat(&file.path).await {
        Ok(meta) if unchanged(destination, &file.path, &meta, &data, compare_md5).await => {
            let published = meta.version.filter(|_| is_skill_md).map(|v| (data, v));
            return (Sent::Unchanged, published);
        }
        _ => {}
    }
    let size = data.len() as u64;
    match destination.put(&file.path, data.clone(), PutMode::Overwrite).await {
        Ok(version) => (Sent::Uploaded(size), is_skill_md.then_some((data, version))),
        Err(e) => (Sent::Failed(e.to_string()), None),
    }
}

/// Whether the destination already holds exactly `data`: by ETag (the MD5
/// of a single-part upload) on S3, by comparing bytes elsewhere.
async fn unchanged(destination: &dyn SkillBackend, path: &VPath, meta: &Metadata, data: &Bytes, md5: bool) -> bool {
    if meta.kind != EntryKind::File || meta.size != Some(data.len() as u64) {
        return false;
    }
    if md5 {
        let digest = Md5::digest(data);
        let hex = skillstore::backends::hex(&digest);
        return meta
            .version
            .as_ref()
            .is_some_and(|v| v.as_str().trim_matches('"') == hex);
    }
    match destination.read(path, ReadOptions::default()).await {
        Ok(blob) => blob.data == *data,
        Err(_) => false,
    }
}

/// A local destination is made when absent, as `sync` makes its target:
/// the directory itself, never the directories above it.
fn create_target(target: &Path) -> Result<(), Failure> {
    match std::fs::create_dir(target) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Failure::usage(format!(
            "cannot make `{}`: the directory above it does not exist",
            target.display()
        ))),
        Err(e) => Err(Failure::failed(format!("cannot make `{}`: {e}", target.display()))),
    }
}

#[cfg(test)]
mod tests {
    use skillstore::integrity::policy::CheckedDir;
    use skillstore::integrity::sha256_hex;

    use super::*;

    /// Finding: the signature check read a skill's files once and the
    /// upload read them again, so a file changed in between was published
    /// with exit 0. The upload writes only bytes with the checked hash.
    #[tokio::test]
    async fn a_file_changed_since_the_check_is_not_uploaded() {
        let path = VPath::new("/l/a/scripts/run.sh").unwrap();
        let local = MemoryBackend::new();
        local
            .put(&path, Bytes::from_static(b"echo EVIL\n"), PutMode::Overwrite)
            .await
            .unwrap();
        let destination = MemoryBackend::new();
        let file = LocalFile {
            path: path.clone(),
            size: 10,
        };
        let checked_as = |bytes: &[u8]| {
            let mut checked = CheckedFiles::new();
            let files = vec![(path.clone(), sha256_hex(bytes))];
            let status = SignatureStatus::Unsigned;
            checked.add(VPath::new("/l/a").unwrap(), CheckedDir { status, files });
            checked
        };
        let checked = checked_as(b"echo run\n");
        let (sent, _) = send(&local, &destination, &file, false, Some(&checked)).await;
        assert!(matches!(sent, Sent::Failed(ref why) if why.contains("changed since")));
        assert!(destination.stat(&path).await.is_err(), "nothing was written");

        // The bytes checked are uploaded.
        let checked = checked_as(b"echo EVIL\n");
        let (sent, _) = send(&local, &destination, &file, false, Some(&checked)).await;
        assert!(matches!(sent, Sent::Uploaded(10)));
    }
}
