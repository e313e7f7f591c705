//! The editor's rules hold for rollbacks from a tampered history, history
//! ids cannot overflow, and its walks do not follow directory links.

use std::sync::Arc;

use skillstore::backends::{FsBackend, MemoryBackend, PutMode, SkillBackend, SkillBackendExt, VPath};
use skillstore::edit::history::history_path;
use skillstore::{SkillEditor, Source, SourceList};

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

/// Finding: `rollback` restored files without the supporting-directory rule
/// that writes apply.
#[tokio::test]
async fn rollback_obeys_the_write_rules() {
    let backend = Arc::new(MemoryBackend::new());
    let editor = editor(backend.clone());
    editor.create("notes", NOTES).await.unwrap();
    for (path, text) in [
        ("run.sh", "#!/bin/sh\nplanted"),
        ("../other/SKILL.md", "planted"),
        (".history/notes.jsonl", "planted"),
    ] {
        append_line(&*backend, &forged_line(2, path, text)).await;
        let err = editor.rollback("notes", 2).await.unwrap_err();
        assert!(matches!(err.kind().as_str(), "invalid_path" | "usage"), "{path}: {err}");
        assert!(
            backend
                .read_all(&VPath::new("/team/notes/run.sh").unwrap())
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
