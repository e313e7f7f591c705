//! Writing skills on every writable backend: each operation, each refusal,
//! history and rollback, and many writers at once.

use std::sync::Arc;

use crate::common;
use crate::common::{Kind, skill_md};
use skillstore::backends::{ErrorKind, PutMode, SkillBackend, SkillBackendExt, VPath};
use skillstore::edit::history::{Action, Content};
use skillstore::{
    Catalog, ContentCheck, Error, LoadOptions, Patch, PendingFile, SharedCatalog, SkillEditor, Source, SourceList,
    Verdict,
};

fn p(s: &str) -> VPath {
    VPath::new(s).unwrap()
}

fn sources() -> SourceList {
    SourceList::from_sources([
        Source::parse("/base").unwrap(),
        Source::parse("/team").unwrap().with_writable(true),
    ])
    .unwrap()
}

struct Setup {
    tree: common::Tree,
    editor: SkillEditor,
}

impl Setup {
    fn backend(&self) -> &Arc<dyn SkillBackend> {
        &self.tree.backend
    }

    async fn text(&self, path: &str) -> String {
        self.backend().read_to_string(&p(path)).await.unwrap()
    }

    async fn exists(&self, path: &str) -> bool {
        self.backend().exists(&p(path)).await.unwrap()
    }
}

async fn setup(kind: Kind) -> Setup {
    let base = skill_md("pdf", "Read PDFs.");
    let tree = common::tree(kind, &[("/base/pdf/SKILL.md", &base)]).await;
    let team = sources().get("team").unwrap().clone();
    let editor = SkillEditor::new(Arc::clone(&tree.backend), &team)
        .unwrap()
        .with_author("tester");
    Setup { tree, editor }
}

async fn kind_of<T: std::fmt::Debug>(result: impl std::future::Future<Output = Result<T, Error>>) -> &'static str {
    result.await.unwrap_err().kind().as_str()
}

async fn create_edit_and_the_catalog_sees_each_change(kind: Kind) {
    let s = setup(kind).await;
    let shared = SharedCatalog::new(Catalog::load(Arc::clone(s.backend()), sources(), LoadOptions::default()).await);
    let elsewhere = Catalog::load(Arc::clone(s.backend()), sources(), LoadOptions::default()).await;
    let editor = s.editor.clone().with_catalog(shared.clone());

    let created = editor.create("notes", skill_md("notes", "Take notes.")).await.unwrap();
    assert_eq!(created.record.id, 1);
    assert_eq!(created.record.action, Action::Create);
    let notes = shared.snapshot().get("notes").cloned().expect("seen at once");
    assert_eq!(notes.source, "team");
    assert_eq!(Some(&notes.version), created.version_of("SKILL.md"));
    assert!(elsewhere.get("notes").is_none());
    assert_eq!(
        elsewhere.refresh().await.get("notes").unwrap().metadata.description,
        "Take notes."
    );

    // Overriding a base skill from the writable layer.
    editor
        .create("pdf", skill_md("pdf", "Read PDFs, team style."))
        .await
        .unwrap();
    let pdf = shared.snapshot().get("pdf").cloned().unwrap();
    assert_eq!((pdf.source.as_str(), pdf.shadowed.len()), ("team", 1));

    let edited = editor
        .edit(
            "notes",
            skill_md("notes", "Take better notes."),
            created.version_of("SKILL.md"),
        )
        .await
        .unwrap();
    assert_eq!(
        edited.record.files[0].previous_version.as_ref(),
        created.version_of("SKILL.md")
    );
    assert_eq!(
        shared.snapshot().get("notes").unwrap().metadata.description,
        "Take better notes."
    );
    assert!(s.text("/team/notes/SKILL.md").await.contains("better"));
}

async fn refusals_write_nothing(kind: Kind) {
    let s = setup(kind).await;
    let e = &s.editor;
    e.create("notes", skill_md("notes", "Take notes.")).await.unwrap();
    let before = s.text("/team/notes/SKILL.md").await;

    assert_eq!(
        kind_of(e.create("notes", skill_md("notes", "Again."))).await,
        "already_exists"
    );
    let invalid = e
        .create("other", skill_md("not-other", "Wrong name."))
        .await
        .unwrap_err();
    assert_eq!(invalid.kind(), "invalid_skill");
    assert!(invalid.to_string().contains("name_mismatch"), "{invalid}");
    assert!(!s.exists("/team/other/SKILL.md").await);
    assert_eq!(kind_of(e.create("bad", "no frontmatter at all")).await, "invalid_skill");
    assert_eq!(
        kind_of(e.create("Bad Name", skill_md("Bad Name", "x"))).await,
        "invalid_skill"
    );
    for name in ["..", ".history", "a/b", ""] {
        assert_eq!(kind_of(e.create(name, skill_md("x", "x"))).await, "usage", "{name:?}");
    }
    assert_eq!(
        kind_of(e.edit("missing", skill_md("missing", "x"), None)).await,
        "skill_not_found"
    );
    assert_eq!(
        kind_of(e.edit("notes", skill_md("renamed", "Different name."), None)).await,
        "invalid_skill"
    );
    let huge = format!(
        "{}{}",
        String::from_utf8(skill_md("notes", "Big.")).unwrap(),
        "x".repeat(10 << 20)
    );
    assert_eq!(kind_of(e.edit("notes", huge, None)).await, "too_large");
    assert_eq!(s.text("/team/notes/SKILL.md").await, before);

    let read_only = Source::parse("/base").unwrap();
    let refused = SkillEditor::new(Arc::clone(s.backend()), &read_only).unwrap_err();
    assert_eq!(refused.kind(), "read_only");
    assert_eq!(
        e.history("notes").await.unwrap().len(),
        1,
        "only the create is recorded"
    );
}

async fn stale_writers_get_a_conflict(kind: Kind) {
    let s = setup(kind).await;
    let e = &s.editor;
    let v1 = e.create("notes", skill_md("notes", "One.")).await.unwrap();
    let v1 = v1.version_of("SKILL.md").unwrap().clone();
    e.edit("notes", skill_md("notes", "Two."), Some(&v1)).await.unwrap();
    assert_eq!(
        kind_of(e.edit("notes", skill_md("notes", "Three."), Some(&v1))).await,
        "version_conflict"
    );
    let mut patch = Patch::new("Two.", "Three.");
    patch.expected = Some(v1.clone());
    assert_eq!(kind_of(e.patch("notes", &patch)).await, "version_conflict");
    assert_eq!(kind_of(e.delete("notes", Some(&v1))).await, "version_conflict");
    assert!(s.text("/team/notes/SKILL.md").await.contains("Two."));
    // The retrying helper re-applies the patch to the current version.
    e.patch_with_retry("notes", &patch, 3).await.unwrap();
    assert!(s.text("/team/notes/SKILL.md").await.contains("Three."));
}

async fn patches_need_the_expected_count(kind: Kind) {
    let s = setup(kind).await;
    let e = &s.editor;
    e.create("notes", skill_md("notes", "Take notes.")).await.unwrap();
    let err = e.patch("notes", &Patch::new("Body.", "Text.\nMore Text.")).await;
    assert!(err.is_ok(), "{err:?}");
    assert!(s.text("/team/notes/SKILL.md").await.contains("Text.\nMore Text."));
    let mut twice = Patch::new("Text", "Words");
    assert_eq!(kind_of(e.patch("notes", &twice)).await, "patch_mismatch");
    twice.count = 2;
    e.patch("notes", &twice).await.unwrap();
    assert!(s.text("/team/notes/SKILL.md").await.contains("Words.\nMore Words."));
    assert_eq!(
        kind_of(e.patch("notes", &Patch::new("absent", "x"))).await,
        "patch_mismatch"
    );
    assert_eq!(kind_of(e.patch("notes", &Patch::new("", "x"))).await, "usage");
    // A patch that breaks the frontmatter is refused like any new SKILL.md.
    assert_eq!(
        kind_of(e.patch("notes", &Patch::new("name: notes", "name: other"))).await,
        "invalid_skill"
    );

    e.write_file("notes", "references/guide.md", "step one\n", None)
        .await
        .unwrap();
    let mut file_patch = Patch::new("one", "two");
    file_patch.file = "references/guide.md".into();
    e.patch("notes", &file_patch).await.unwrap();
    assert_eq!(s.text("/team/notes/references/guide.md").await, "step two\n");
    let history = e.history("notes").await.unwrap();
    let actions: Vec<Action> = history.iter().map(|r| r.action).collect();
    assert_eq!(
        actions,
        [
            Action::Create,
            Action::Patch,
            Action::Patch,
            Action::WriteFile,
            Action::Patch
        ]
    );
}

async fn supporting_files_follow_the_path_rules(kind: Kind) {
    let s = setup(kind).await;
    let e = &s.editor;
    e.create("notes", skill_md("notes", "Take notes.")).await.unwrap();
    for dir in ["references", "scripts", "assets", "templates"] {
        e.write_file("notes", &format!("{dir}/deep/file.txt"), "x", None)
            .await
            .unwrap();
        assert!(s.exists(&format!("/team/notes/{dir}/deep/file.txt")).await);
    }
    for bad in [
        "SKILL.md",
        "skill.md",
        ".git/config",
        "references/.hidden.md",
        ".history/1.json",
        "references/",
        "/references/x.md",
        "../pdf/references/x.md",
        "references/../../pdf/x.md",
        "references/./x.md",
        "references//x.md",
        "references\\x.md",
        "references/x\0.md",
    ] {
        let err = e.write_file("notes", bad, "x", None).await.unwrap_err();
        assert_eq!(err.kind(), "invalid_path", "{bad:?}: {err}");
        assert_eq!(
            kind_of(e.remove_file("notes", bad, None)).await,
            "invalid_path",
            "{bad:?}"
        );
    }
    assert_eq!(
        kind_of(e.write_file("missing", "references/x.md", "x", None)).await,
        "skill_not_found"
    );
    e.remove_file("notes", "templates/deep/file.txt", None).await.unwrap();
    assert!(!s.exists("/team/notes/templates/deep/file.txt").await);
    assert_eq!(
        kind_of(e.remove_file("notes", "templates/deep/file.txt", None)).await,
        "not_found"
    );
}

#[derive(Debug)]
struct NoSecrets;

impl ContentCheck for NoSecrets {
    fn check(&self, file: &PendingFile<'_>) -> Verdict {
        if file.data.windows(6).any(|w| w == b"SECRET") {
            Verdict::Block(format!("{} holds a secret", file.path))
        } else {
            Verdict::Allow
        }
    }
}

async fn the_content_check_blocks_and_warns(kind: Kind) {
    let s = setup(kind).await;
    let e = &s.editor;
    e.create("notes", skill_md("notes", "Take notes.")).await.unwrap();
    let elf = b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0".to_vec();
    let err = e.write_file("notes", "assets/tool", elf, None).await.unwrap_err();
    assert_eq!(err.kind(), "content_blocked");
    assert!(err.to_string().contains("ELF"), "{err}");
    assert!(!s.exists("/team/notes/assets/tool").await);

    let script = e
        .write_file("notes", "scripts/run.sh", "#!/bin/sh\necho hi\n", None)
        .await
        .unwrap();
    assert_eq!(script.warnings.len(), 1);
    assert!(script.warnings[0].contains("scripts/run.sh"));

    let strict = e.clone().with_check(Arc::new(NoSecrets));
    assert_eq!(
        kind_of(strict.write_file("notes", "references/k.md", "SECRET=1", None)).await,
        "content_blocked"
    );
    assert_eq!(
        kind_of(strict.create(
            "leaky",
            format!("{}SECRET\n", String::from_utf8(skill_md("leaky", "x")).unwrap())
        ))
        .await,
        "content_blocked"
    );
    assert!(!s.exists("/team/leaky/SKILL.md").await);
}

async fn delete_and_rollback_restore_exact_bytes(kind: Kind) {
    let s = setup(kind).await;
    let e = &s.editor;
    let first = skill_md("notes", "Take notes.");
    e.create("notes", first.clone()).await.unwrap();
    let binary: Vec<u8> = (0..=255u8).rev().cycle().take(3000).collect();
    e.write_file("notes", "assets/table.bin", binary.clone(), None)
        .await
        .unwrap();
    e.edit("notes", skill_md("notes", "Second."), None).await.unwrap();
    let history = e.history("notes").await.unwrap();
    assert_eq!(history.len(), 3);
    assert!(matches!(history[1].files[0].new, Some(Content::Base64(_))));
    assert_eq!(history[2].author, "tester");

    let deleted = e.delete("notes", None).await.unwrap();
    assert_eq!(deleted.record.action, Action::Delete);
    assert_eq!(deleted.record.files.len(), 2);
    assert!(!s.exists("/team/notes/SKILL.md").await);
    assert!(!s.exists("/team/notes/assets/table.bin").await);
    assert_eq!(kind_of(e.delete("notes", None)).await, "skill_not_found");

    // Back to just after the asset was written: first SKILL.md, and the asset.
    let restored = e.rollback("notes", 2).await.unwrap();
    assert_eq!(restored.record.action, Action::Rollback);
    assert_eq!(restored.record.rollback_to, Some(2));
    assert_eq!(
        s.backend().read_all(&p("/team/notes/SKILL.md")).await.unwrap(),
        first.as_slice()
    );
    assert_eq!(
        s.backend().read_all(&p("/team/notes/assets/table.bin")).await.unwrap(),
        binary.as_slice()
    );
    // Back to before the asset existed: it goes.
    e.rollback("notes", 1).await.unwrap();
    assert!(!s.exists("/team/notes/assets/table.bin").await);
    let history = e.history("notes").await.unwrap();
    assert_eq!(history.iter().map(|r| r.id).collect::<Vec<_>>(), [1, 2, 3, 4, 5, 6]);
    assert_eq!(kind_of(e.rollback("notes", 99)).await, "history");
    // The history lives beside the skills, and is not taken for one.
    let catalog = Catalog::load(Arc::clone(s.backend()), sources(), LoadOptions::default()).await;
    assert!(catalog.diagnostics().is_empty(), "{:?}", catalog.diagnostics());
    assert_eq!(catalog.skills().len(), 2);
}

async fn thirty_two_concurrent_patchers_lose_nothing(kind: Kind) {
    let s = setup(kind).await;
    let body = "---\nname: shared\ndescription: Edited by many.\n---\n\n# Lines\n<!-- end -->\n";
    s.editor.create("shared", body).await.unwrap();
    let writers: Vec<_> = (0..32)
        .map(|i| {
            let editor = s.editor.clone().with_author(format!("writer-{i}"));
            tokio::spawn(async move {
                let patch = Patch::new("<!-- end -->", format!("line from writer {i}\n<!-- end -->"));
                editor.patch_with_retry("shared", &patch, 1000).await
            })
        })
        .collect();
    for writer in writers {
        writer.await.unwrap().unwrap();
    }
    let text = s.text("/team/shared/SKILL.md").await;
    if !kind.atomic_conditionals() {
        // moto: two replace-if-version writes on one version can both
        // succeed, and the later one then drops the earlier one's line.
        // What holds: the file is one whole version, no line twice, and at
        // least three lines of four kept.
        assert!(
            text.starts_with("---\nname: shared\n") && text.ends_with("<!-- end -->\n"),
            "{text}"
        );
        let present = (0..32)
            .filter(|i| {
                let count = text.matches(&format!("line from writer {i}\n")).count();
                assert!(count <= 1, "writer {i}'s line {count} times:\n{text}");
                count == 1
            })
            .count();
        eprintln!("{present} of 32 patches kept (the store's conditional writes are not atomic)");
        // A race lost now and then, never most: a store that checked
        // nothing would keep a handful.
        assert!(present >= 24, "only {present} of 32 patches kept:\n{text}");
        return;
    }
    for i in 0..32 {
        assert_eq!(
            text.matches(&format!("line from writer {i}\n")).count(),
            1,
            "writer {i}"
        );
    }
    let history = s.editor.history("shared").await.unwrap();
    assert_eq!(history.len(), 33);
    assert_eq!(history.iter().filter(|r| r.action == Action::Patch).count(), 32);
    let mut authors: Vec<&str> = history[1..].iter().map(|r| r.author.as_str()).collect();
    authors.sort_unstable();
    authors.dedup();
    assert_eq!(authors.len(), 32);
    // Entries are in the order the changes were made: each starts where the
    // one before ended.
    for pair in history.windows(2) {
        assert_eq!(pair[1].files[0].previous_version, pair[0].files[0].new_version);
        assert_eq!(pair[1].files[0].previous, pair[0].files[0].new);
    }
}

/// A store whose conditional writes are a check and then a write, as
/// moto's are: the condition is checked against a stat, then (after a
/// pause that lets another writer check too) the bytes are written
/// unconditionally.
#[derive(Debug)]
struct CheckThenWrite {
    inner: Arc<dyn SkillBackend>,
}

#[async_trait::async_trait]
impl SkillBackend for CheckThenWrite {
    fn capabilities(&self) -> skillstore::backends::Capabilities {
        self.inner.capabilities()
    }
    async fn list(&self, dir: &VPath) -> skillstore::backends::Result<Vec<skillstore::backends::Entry>> {
        self.inner.list(dir).await
    }
    async fn stat(&self, path: &VPath) -> skillstore::backends::Result<skillstore::backends::Metadata> {
        self.inner.stat(path).await
    }
    async fn read(
        &self,
        path: &VPath,
        options: skillstore::backends::ReadOptions,
    ) -> skillstore::backends::Result<skillstore::backends::Blob> {
        self.inner.read(path, options).await
    }
    async fn put(
        &self,
        path: &VPath,
        data: bytes::Bytes,
        mode: PutMode,
    ) -> skillstore::backends::Result<skillstore::backends::Version> {
        let current = match self.inner.stat(path).await {
            Ok(meta) => meta.version,
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(e),
        };
        let refused = match (&mode, &current) {
            (PutMode::Create, Some(_)) => Some(ErrorKind::AlreadyExists),
            (PutMode::IfVersion(want), got) if got.as_ref() != Some(want) => Some(ErrorKind::VersionConflict),
            _ => None,
        };
        if let Some(kind) = refused {
            return Err(skillstore::backends::Error::at(kind, path));
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        self.inner.put(path, data, PutMode::Overwrite).await
    }
    async fn delete(&self, path: &VPath) -> skillstore::backends::Result<()> {
        self.inner.delete(path).await
    }
}

/// What skillstore does on a store whose conditional writes are not
/// atomic (moto's, see `Kind::atomic_conditionals`): it trusts the store.
/// Two creates of one skill at once both succeed and the later bytes
/// stay; two patches of one version both succeed and the earlier line is
/// lost. On our S3 double and on real S3 the same races have one winner
/// (`thirty_two_concurrent_patchers_lose_nothing`, the conformance case
/// `concurrent_create_only_has_one_winner`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_a_store_that_checks_then_writes_concurrent_writers_can_both_win() {
    let store: Arc<dyn SkillBackend> = Arc::new(CheckThenWrite {
        inner: Arc::new(skillstore::backends::MemoryBackend::new()),
    });
    let team = sources().get("team").unwrap().clone();
    let editor = |author: &str| SkillEditor::new(Arc::clone(&store), &team).unwrap().with_author(author);
    let (one, two) = (editor("one"), editor("two"));
    let body = |who: &str| format!("---\nname: shared\ndescription: Made by {who}.\n---\n\n<!-- end -->\n");
    let (first, second) = tokio::join!(one.create("shared", body("one")), two.create("shared", body("two")));
    assert!(
        first.is_ok() && second.is_ok(),
        "both creates succeed: {first:?} {second:?}"
    );
    let text = store.read_to_string(&p("/team/shared/SKILL.md")).await.unwrap();
    assert!(text == body("one") || text == body("two"), "{text}");

    let line = |who: &str| Patch::new("<!-- end -->", format!("line from {who}\n<!-- end -->"));
    let (line_one, line_two) = (line("one"), line("two"));
    let (first, second) = tokio::join!(
        one.patch_with_retry("shared", &line_one, 10),
        two.patch_with_retry("shared", &line_two, 10)
    );
    assert!(
        first.is_ok() && second.is_ok(),
        "both patches succeed: {first:?} {second:?}"
    );
    let text = store.read_to_string(&p("/team/shared/SKILL.md")).await.unwrap();
    assert_eq!(
        text.matches("line from ").count(),
        1,
        "one of the two lines is lost:\n{text}"
    );
}

macro_rules! on_every_writable_backend {
    ($($case:ident),* $(,)?) => {
        mod memory { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Kind::Memory).await } )* }
        mod fs { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Kind::Fs).await } )* }
        mod object_store { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Kind::ObjectStore).await } )* }
        mod s3 { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] async fn $case() { super::$case(super::Kind::S3).await } )* }
        mod moto { $( #[tokio::test(flavor = "multi_thread", worker_threads = 2)] #[ignore = "needs moto: set SKILLSTORE_MOTO_ENDPOINT and pass --include-ignored"] async fn $case() { super::$case(super::Kind::Moto).await } )* }
    };
}

on_every_writable_backend!(
    create_edit_and_the_catalog_sees_each_change,
    refusals_write_nothing,
    stale_writers_get_a_conflict,
    patches_need_the_expected_count,
    supporting_files_follow_the_path_rules,
    the_content_check_blocks_and_warns,
    delete_and_rollback_restore_exact_bytes,
    thirty_two_concurrent_patchers_lose_nothing,
);

#[tokio::test]
async fn a_read_only_mount_refuses_with_its_own_kind() {
    let dir = tempfile::tempdir().unwrap();
    let backend = skillstore::backends::FsBackend::new(dir.path()).unwrap().read_only();
    let team = sources().get("team").unwrap().clone();
    let editor = SkillEditor::new(Arc::new(backend), &team).unwrap();
    let err = editor.create("notes", skill_md("notes", "x")).await.unwrap_err();
    assert_eq!(err.kind(), "read_only");
    assert!(matches!(err, Error::Backend(ref b) if b.kind() == ErrorKind::ReadOnly));
}
