//! The editor's rules hold for rollbacks from a tampered history, history
//! ids cannot overflow, its walks do not follow directory links, and a
//! change is never reported failed once it landed: the history stays within
//! its limit, and what cannot be recorded is refused before writing.

use std::sync::Arc;

use skillstore::backends::{FsBackend, MemoryBackend, PutMode, SkillBackend, SkillBackendExt, VPath};
use skillstore::edit::history::{MAX_HISTORY_BYTES, history_path};
use skillstore::{ArchiveLimits, InstallOptions, SkillArchive, SkillEditor, Source, SourceList};

const NOTES: &str = "---\nname: notes\ndescription: Take notes.\n---\nStep 1\n";

fn editor(backend: Arc<dyn SkillBackend>) -> SkillEditor {
    let sources = SourceList::from_sources([
        Source::parse("/base/").unwrap(),
        Source::parse("/team/").unwrap().with_writable(true),
    ])
    .unwrap();
    SkillEditor::new(backend, sources.get("team").unwrap()).unwrap()
}

/// A history line that writes `path` with `text`, as a tampered file would.
fn forged_line(id: u64, path: &str, text: &str) -> String {
    serde_json::json!({
        "id": id, "time": "2026-01-01T00:00:00.000Z", "action": "write_file", "author": "mallory",
        "files": [{"path": path, "previous_version": null, "new_version": "v", "previous": null, "new": {"text": text}}]
    })
    .to_string()
}

async fn append_line(backend: &dyn SkillBackend, line: &str) {
    let path = history_path(&VPath::new("/team").unwrap(), "notes").unwrap();
    let mut text = backend.read_to_string(&path).await.unwrap();
    text.push_str(line);
    text.push('\n');
    backend.put(&path, text.into(), PutMode::Overwrite).await.unwrap();
}

/// Finding: `rollback` restored files without the path rule that writes
/// apply.
#[tokio::test]
async fn rollback_obeys_the_write_rules() {
    let backend = Arc::new(MemoryBackend::new());
    let editor = editor(backend.clone());
    editor.create("notes", NOTES).await.unwrap();
    for (path, text) in [
        (".git/hooks/post-checkout", "#!/bin/sh\nplanted"),
        ("../other/SKILL.md", "planted"),
        (".history/notes.jsonl", "planted"),
    ] {
        append_line(&*backend, &forged_line(2, path, text)).await;
        let err = editor.rollback("notes", 2).await.unwrap_err();
        assert!(matches!(err.kind().as_str(), "invalid_path" | "usage"), "{path}: {err}");
        assert!(
            backend
                .read_all(&VPath::new("/team/notes/.git/hooks/post-checkout").unwrap())
                .await
                .is_err()
        );
        // Put the history back as it was.
        let hpath = history_path(&VPath::new("/team").unwrap(), "notes").unwrap();
        let text = backend.read_to_string(&hpath).await.unwrap();
        let kept: String = text.lines().take(1).map(|l| format!("{l}\n")).collect();
        backend.put(&hpath, kept.into(), PutMode::Overwrite).await.unwrap();
    }
    // A forged SKILL.md must still pass strict validation.
    append_line(&*backend, &forged_line(2, "SKILL.md", "no frontmatter")).await;
    let err = editor.rollback("notes", 2).await.unwrap_err();
    assert_eq!(err.kind().as_str(), "invalid_skill", "{err}");
    // And a forged binary still meets the content check.
    let hpath = history_path(&VPath::new("/team").unwrap(), "notes").unwrap();
    let first: String = backend
        .read_to_string(&hpath)
        .await
        .unwrap()
        .lines()
        .take(1)
        .map(|l| format!("{l}\n"))
        .collect();
    backend.put(&hpath, first.into(), PutMode::Overwrite).await.unwrap();
    append_line(&*backend, &forged_line(2, "assets/tool", "\u{7f}ELF\u{2}\u{1}\u{1}")).await;
    let err = editor.rollback("notes", 2).await.unwrap_err();
    assert_eq!(err.kind().as_str(), "content_blocked", "{err}");
}

/// Finding: a history id near `u64::MAX` overflowed.
#[tokio::test]
async fn history_ids_near_the_maximum_do_not_overflow() {
    let backend = Arc::new(MemoryBackend::new());
    let editor = editor(backend.clone());
    editor.create("notes", NOTES).await.unwrap();
    append_line(&*backend, &forged_line(u64::MAX, "references/a.md", "a")).await;
    let err = editor
        .write_file("notes", "references/b.md", b"b".to_vec(), None)
        .await
        .unwrap_err();
    assert_eq!(err.kind().as_str(), "history", "{err}");
    assert!(err.to_string().contains("exhausted"), "{err}");
}

/// Finding: recursive walks followed `a/up -> ..` forever. Deleting a skill
/// holding such a link ends, removes the files and leaves the links.
#[tokio::test]
async fn delete_does_not_follow_directory_links() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("team/notes/references/a")).unwrap();
    std::fs::create_dir_all(dir.path().join("base")).unwrap();
    std::fs::write(dir.path().join("team/notes/SKILL.md"), NOTES).unwrap();
    std::fs::write(dir.path().join("team/notes/references/a/x.md"), "x").unwrap();
    std::os::unix::fs::symlink("..", dir.path().join("team/notes/references/a/up")).unwrap();
    std::os::unix::fs::symlink(".", dir.path().join("team/notes/references/b")).unwrap();
    let backend = Arc::new(FsBackend::new(dir.path()).unwrap());
    let editor = editor(backend);
    let change = editor.delete("notes", None).await.unwrap();
    let mut paths: Vec<&str> = change.record.files.iter().map(|f| f.path.as_str()).collect();
    paths.sort();
    assert_eq!(paths, ["SKILL.md", "references/a/x.md"]);
    assert!(!dir.path().join("team/notes/SKILL.md").exists());
    assert!(dir.path().join("team/notes/references/a/up").symlink_metadata().is_ok());
}

/// Fills the history of `notes` to within `room` bytes of the history
/// limit with one forged record.
async fn fill_history(backend: &dyn SkillBackend, room: usize) {
    let path = history_path(&VPath::new("/team").unwrap(), "notes").unwrap();
    let mut text = backend.read_to_string(&path).await.unwrap();
    let frame = forged_line(2, "references/pad.md", "").len() + 1;
    let pad = MAX_HISTORY_BYTES as usize - text.len() - frame - room;
    text.push_str(&forged_line(2, "references/pad.md", &"x".repeat(pad)));
    text.push('\n');
    assert_eq!(text.len(), MAX_HISTORY_BYTES as usize - room);
    backend.put(&path, text.into(), PutMode::Overwrite).await.unwrap();
}

/// Finding: past the history limit a write answered 500 and landed
/// unrecorded. The history keeps its newest records within the limit, so
/// writes go on, each recorded.
#[tokio::test]
async fn past_the_history_limit_a_write_answers_500_and_lands_unrecorded() {
    let backend = Arc::new(MemoryBackend::new());
    let editor = editor(backend.clone());
    editor.create("notes", NOTES).await.unwrap();
    fill_history(&*backend, 100).await;
    for i in 0..3 {
        let change = editor
            .write_file("notes", "references/b.md", format!("b{i}"), None)
            .await
            .unwrap_or_else(|e| panic!("write {i}: {e}"));
        assert_eq!(change.record.id, 3 + i);
        let history = editor.history("notes").await.unwrap();
        assert_eq!(history.last().unwrap(), &change.record);
        let path = history_path(&VPath::new("/team").unwrap(), "notes").unwrap();
        let size = backend.stat(&path).await.unwrap().size.unwrap();
        assert!(size <= MAX_HISTORY_BYTES, "{size}");
    }
    // The forged 64 MiB record was the oldest to go; entry 1 went with it
    // so the newest fit.
    let ids: Vec<u64> = editor.history("notes").await.unwrap().iter().map(|r| r.id).collect();
    assert_eq!(ids, [3, 4, 5]);
    // A rollback to an entry no longer kept says so.
    assert_eq!(
        editor.rollback("notes", 1).await.unwrap_err().kind().as_str(),
        "history"
    );
    editor.rollback("notes", 3).await.unwrap();
}

/// A zip holding one skill directory.
fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    zip_with(entries, zip::CompressionMethod::Deflated)
}

fn zip_with(entries: &[(&str, &[u8])], method: zip::CompressionMethod) -> Vec<u8> {
    use std::io::Write as _;
    let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in entries {
        let options = zip::write::SimpleFileOptions::default().compression_method(method);
        zip.start_file(*name, options).unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// Every file under `/team`, with its bytes.
async fn team_files(backend: &dyn SkillBackend) -> Vec<(String, bytes::Bytes)> {
    let walked = backend
        .walk(
            &VPath::new("/team").unwrap(),
            skillstore::backends::WalkLimits::default(),
        )
        .await
        .unwrap();
    let mut files = Vec::new();
    for file in walked.files {
        let path = VPath::new(format!("/team/{}", file.relative)).unwrap();
        files.push((file.relative, backend.read_all(&path).await.unwrap()));
    }
    files.sort();
    files
}

/// Finding: an archive within every limit installed, then the command
/// exited 1 "not recorded" because the history would pass 64 MiB; a
/// `.history` link did the same. A change is never reported failed once it
/// landed: it goes on and is recorded, or is refused before a byte is
/// written.
#[tokio::test]
async fn install_succeeds_and_says_it_failed() {
    let archive = zip_of(&[
        ("notes/SKILL.md", NOTES.as_bytes()),
        ("notes/references/new.md", b"new"),
    ]);
    let archive = SkillArchive::read(&archive, &ArchiveLimits::default()).unwrap();

    // A history near its limit: the install lands and is recorded.
    let backend = Arc::new(MemoryBackend::new());
    let full = editor(backend.clone());
    full.create("notes", NOTES).await.unwrap();
    fill_history(&*backend, 100).await;
    let change = full.install(&archive, InstallOptions::replacing()).await.unwrap();
    assert_eq!(full.history("notes").await.unwrap().last().unwrap(), &change.record);

    // A `.history` that is a link out of the source: refused, and nothing
    // was written.
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("root/team/notes")).unwrap();
    std::fs::create_dir_all(dir.path().join("root/base")).unwrap();
    std::fs::create_dir_all(dir.path().join("elsewhere")).unwrap();
    std::fs::write(dir.path().join("root/team/notes/SKILL.md"), NOTES).unwrap();
    std::os::unix::fs::symlink("../../elsewhere", dir.path().join("root/team/.history")).unwrap();
    let backend = Arc::new(FsBackend::new(dir.path().join("root")).unwrap());
    let linked = editor(backend.clone());
    let before = team_files(&*backend).await;
    let err = linked.install(&archive, InstallOptions::replacing()).await.unwrap_err();
    assert_eq!(team_files(&*backend).await, before, "{err}");
    assert!(
        std::fs::read_dir(dir.path().join("elsewhere"))
            .unwrap()
            .next()
            .is_none()
    );
    let err = linked
        .write_file("notes", "references/b.md", "b", None)
        .await
        .unwrap_err();
    assert_eq!(team_files(&*backend).await, before, "{err}");
}

/// A change whose history record alone could not fit is refused with
/// `too_large` before anything is written.
#[tokio::test]
async fn a_change_too_large_to_record_is_refused_before_writing() {
    // Two files of 6 MiB of control characters, stored: each byte is six
    // in a JSON record (`\u0001`), 72 MiB in all.
    let control = vec![1u8; 6 * 1024 * 1024];
    let archive = zip_with(
        &[
            ("notes/SKILL.md", NOTES.as_bytes()),
            ("notes/assets/a.bin", &control),
            ("notes/assets/b.bin", &control),
        ],
        zip::CompressionMethod::Stored,
    );
    let archive = SkillArchive::read(&archive, &ArchiveLimits::default()).unwrap();
    let backend = Arc::new(MemoryBackend::new());
    let editor = editor(backend.clone());
    editor.create("notes", NOTES).await.unwrap();
    let before = team_files(&*backend).await;
    let err = editor.install(&archive, InstallOptions::replacing()).await.unwrap_err();
    assert_eq!(err.kind().as_str(), "too_large", "{err}");
    assert_eq!(team_files(&*backend).await, before);
}
