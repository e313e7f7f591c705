//! `.skill` archives: packing (deterministic, strictly validated, bounded
//! walks), every refusal of the reader with its kind and the destination
//! untouched, and pack-then-install round trips on memory, a directory and
//! the S3 test server.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::common;
use crate::common::{Kind, skill_md};
use async_trait::async_trait;
use bytes::Bytes;
use proptest::prelude::*;
use skillstore::backends::{
    Blob, Capabilities, Entry, EntryKind, ErrorKind, FsBackend, MemoryBackend, Metadata, PutMode, ReadOptions,
    SkillBackend, SkillBackendExt, SymlinkPolicy, VPath, Version,
};
use skillstore::edit::history::Action;
use skillstore::{
    ArchiveError, ArchiveLimits, Catalog, Change, InstallOptions, LoadOptions, SkillArchive, SkillEditor, Source,
    SourceList, pack,
};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

fn p(s: &str) -> VPath {
    VPath::new(s).unwrap()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

// ---------------------------------------------------------------------------
// Archives built in the tests.

/// An archive written by the `zip` crate, each entry deflated.
fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    zip_with(entries, CompressionMethod::Deflated)
}

fn zip_with(entries: &[(&str, &[u8])], method: CompressionMethod) -> Vec<u8> {
    let mut zip = ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in entries {
        zip.start_file(*name, SimpleFileOptions::default().compression_method(method))
            .unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

/// A valid SKILL.md for `pdf`, the skill most attack archives carry.
fn pdf_md() -> Vec<u8> {
    skill_md("pdf", "Read PDFs.")
}

/// One entry of an archive assembled byte by byte, for what the writer
/// refuses to make: stored (method 0) unless told otherwise.
#[derive(Clone)]
struct Raw {
    name: Vec<u8>,
    data: Vec<u8>,
    flags: u16,
    method: u16,
    /// The Unix mode (file type and permissions) in the external attributes.
    mode: u32,
    /// The uncompressed size the headers declare, if not the data's length.
    declared: Option<u32>,
    /// The checksum the headers declare, if not the data's.
    crc: Option<u32>,
    /// The local header this entry's central record points at, if not its
    /// own (an index into the entries).
    points_at: Option<usize>,
}

impl Raw {
    fn new(name: impl AsRef<[u8]>, data: impl AsRef<[u8]>) -> Self {
        Raw {
            name: name.as_ref().to_vec(),
            data: data.as_ref().to_vec(),
            flags: 0,
            method: 0,
            mode: 0o100_644,
            declared: None,
            crc: None,
            points_at: None,
        }
    }
}

fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn raw_zip(entries: &[Raw]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut offsets = Vec::new();
    let fields = |e: &Raw| {
        let crc = e.crc.unwrap_or_else(|| crc32(&e.data));
        let size = e.declared.unwrap_or(e.data.len() as u32);
        (crc, e.data.len() as u32, size)
    };
    for e in entries {
        offsets.push(out.len() as u32);
        let (crc, csize, size) = fields(e);
        out.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&e.flags.to_le_bytes());
        out.extend_from_slice(&e.method.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&0x21u16.to_le_bytes());
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&csize.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&e.name);
        out.extend_from_slice(&e.data);
    }
    let directory = out.len() as u32;
    for (i, e) in entries.iter().enumerate() {
        let (crc, csize, size) = fields(e);
        out.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        out.extend_from_slice(&((3u16 << 8) | 20).to_le_bytes());
        out.extend_from_slice(&20u16.to_le_bytes());
        out.extend_from_slice(&e.flags.to_le_bytes());
        out.extend_from_slice(&e.method.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&0x21u16.to_le_bytes());
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&csize.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.extend_from_slice(&(e.name.len() as u16).to_le_bytes());
        out.extend_from_slice(&[0; 8]);
        out.extend_from_slice(&(e.mode << 16).to_le_bytes());
        out.extend_from_slice(&offsets[e.points_at.unwrap_or(i)].to_le_bytes());
        out.extend_from_slice(&e.name);
    }
    let size = out.len() as u32 - directory;
    out.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&(entries.len() as u16).to_le_bytes());
    out.extend_from_slice(&size.to_le_bytes());
    out.extend_from_slice(&directory.to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out
}

/// A raw archive of a valid `pdf` skill plus `extra`.
fn pdf_with(extra: Raw) -> Vec<u8> {
    raw_zip(&[Raw::new("pdf/SKILL.md", pdf_md()), extra])
}

/// Overwrites the little-endian u32 at `at` in every local and central
/// header of a single-entry archive written by the `zip` crate.
fn patch_sizes(mut bytes: Vec<u8>, size: u32) -> Vec<u8> {
    bytes[22..26].copy_from_slice(&size.to_le_bytes());
    let central = bytes.windows(4).position(|w| w == [0x50, 0x4b, 0x01, 0x02]).unwrap();
    bytes[central + 24..central + 28].copy_from_slice(&size.to_le_bytes());
    bytes
}

// ---------------------------------------------------------------------------
// A destination: a writable source whose every file is compared before and
// after each refused install.

fn sources() -> SourceList {
    SourceList::from_sources([Source::parse("/team").unwrap().with_writable(true)]).unwrap()
}

struct Destination {
    backend: Arc<dyn SkillBackend>,
    editor: SkillEditor,
    _keep: common::Tree,
}

async fn destination(kind: Kind, files: &[(&str, &[u8])]) -> Destination {
    let tree = common::tree(kind, files).await;
    let team = sources().get("team").unwrap().clone();
    let editor = SkillEditor::new(Arc::clone(&tree.backend), &team)
        .unwrap()
        .with_author("tester");
    Destination {
        backend: Arc::clone(&tree.backend),
        editor,
        _keep: tree,
    }
}

/// Every file under `dir`, relative to it, with its bytes.
async fn snapshot(backend: &dyn SkillBackend, dir: &VPath) -> BTreeMap<String, Bytes> {
    let mut files = BTreeMap::new();
    let mut pending = vec![(dir.clone(), String::new())];
    while let Some((current, prefix)) = pending.pop() {
        let Ok(entries) = backend.list(&current).await else {
            continue;
        };
        for entry in entries {
            let relative = format!("{prefix}{}", entry.name);
            let path = current.join(&entry.name).unwrap();
            match entry.kind {
                EntryKind::Dir => pending.push((path, relative + "/")),
                _ => {
                    files.insert(relative, backend.read_all(&path).await.unwrap());
                }
            }
        }
    }
    files
}

impl Destination {
    /// Reads and installs `archive`: the change, or the error's kind.
    async fn install(&self, archive: &[u8], limits: &ArchiveLimits, options: InstallOptions) -> Result<Change, String> {
        let read = SkillArchive::read(archive, limits).map_err(|e| e.kind().to_owned())?;
        self.editor
            .install(&read, options)
            .await
            .map_err(|e| e.kind().as_str().to_owned())
    }

    /// Asserts that installing `archive` is refused with `kind` and that
    /// not a byte of the source changed.
    async fn refuses(&self, archive: &[u8], limits: &ArchiveLimits, kind: &str) {
        let before = snapshot(&*self.backend, &VPath::root()).await;
        let got = self.install(archive, limits, InstallOptions::replacing()).await;
        assert_eq!(
            got.err().as_deref(),
            Some(kind),
            "expected the archive refused as {kind}"
        );
        assert_eq!(
            snapshot(&*self.backend, &VPath::root()).await,
            before,
            "{kind}: something was written"
        );
    }
}

/// Runs `check` against a memory destination that already holds a skill.
fn against_destination<F, Fut>(check: F)
where
    F: FnOnce(Destination) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    runtime().block_on(async {
        let existing = skill_md("notes", "Take notes.");
        let dest = destination(Kind::Memory, &[("/team/notes/SKILL.md", &existing)]).await;
        check(dest).await;
    });
}

fn refused(archive: &[u8], kind: &str) {
    refused_under(archive, &ArchiveLimits::default(), kind);
}

fn refused_under(archive: &[u8], limits: &ArchiveLimits, kind: &str) {
    let archive = archive.to_vec();
    let limits = limits.clone();
    let kind = kind.to_owned();
    against_destination(|dest| async move { dest.refuses(&archive, &limits, &kind).await });
}

// ---------------------------------------------------------------------------
// Every attack, refused with its own kind, nothing written.

#[test]
fn parent_segments_are_refused() {
    for name in [
        "pdf/../../etc/cron.d/job",
        "pdf/references/../../../x",
        "../pdf/SKILL.md",
        "pdf/..",
    ] {
        refused(&pdf_with(Raw::new(name, "x")), "parent_segment");
    }
}

#[test]
fn absolute_paths_are_refused() {
    for name in ["/etc/passwd", "/pdf/references/x.md"] {
        refused(&pdf_with(Raw::new(name, "x")), "absolute_path");
    }
}

#[test]
fn backslashes_are_refused() {
    for name in ["pdf\\..\\..\\windows\\x", "pdf/references\\x.md"] {
        refused(&pdf_with(Raw::new(name, "x")), "backslash_path");
    }
}

#[test]
fn drive_letters_are_refused() {
    for name in ["C:/Windows/x", "c:pdf/x", "Z:\\x"] {
        refused(&pdf_with(Raw::new(name, "x")), "drive_letter");
    }
}

#[test]
fn names_breaking_virtual_path_rules_are_refused() {
    for name in ["pdf/./x.md", "pdf//x.md", "pdf/a\u{1}b.md", "pdf/a\u{7f}.md"] {
        refused(&pdf_with(Raw::new(name, "x")), "invalid_path");
    }
    // The top-level directory must be a skill directory name.
    refused(
        &raw_zip(&[Raw::new(".hidden/SKILL.md", skill_md(".hidden", "x"))]),
        "invalid_path",
    );
}

#[test]
fn non_utf8_names_are_refused() {
    refused(&pdf_with(Raw::new(b"pdf/\xff\xfe.md", "x")), "non_utf8_name");
}

#[test]
fn symlink_entries_are_refused() {
    let mut zip = ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file("pdf/SKILL.md", SimpleFileOptions::default()).unwrap();
    zip.write_all(&pdf_md()).unwrap();
    zip.add_symlink("pdf/references/passwd", "/etc/passwd", SimpleFileOptions::default())
        .unwrap();
    refused(&zip.finish().unwrap().into_inner(), "symlink_entry");

    let mut link = Raw::new("pdf/up", "../..");
    link.mode = 0o120_777;
    refused(&pdf_with(link), "symlink_entry");
}

#[test]
fn special_entries_are_refused() {
    for mode in [0o010_644, 0o020_644, 0o060_644, 0o140_644] {
        let mut special = Raw::new("pdf/assets/thing", "");
        special.mode = mode;
        refused(&pdf_with(special), "special_entry");
    }
}

#[test]
fn duplicate_names_are_refused_exactly_and_after_folding() {
    refused(
        &raw_zip(&[
            Raw::new("pdf/SKILL.md", pdf_md()),
            Raw::new("pdf/references/a.md", "one"),
            Raw::new("pdf/references/a.md", "two"),
        ]),
        "duplicate_entry",
    );
    // The same SKILL.md twice, the second one hostile.
    refused(
        &raw_zip(&[
            Raw::new("pdf/SKILL.md", pdf_md()),
            Raw::new("pdf/SKILL.md", skill_md("pdf", "Something else.")),
        ]),
        "duplicate_entry",
    );
    let md = pdf_md();
    for (a, b) in [
        ("pdf/references/caf\u{e9}.md", "pdf/references/cafe\u{301}.md"),
        ("pdf/references/Guide.md", "pdf/references/guide.md"),
        ("pdf/skill.md", "pdf/SKILL.md"),
    ] {
        let archive = raw_zip(&[Raw::new("pdf/SKILL.md", &md), Raw::new(a, "one"), Raw::new(b, "two")]);
        refused(&archive, "duplicate_entry");
    }
    // A file with the path of a directory, in another case.
    refused(
        &raw_zip(&[
            Raw::new("pdf/SKILL.md", &md),
            Raw::new("pdf/References", "a file"),
            Raw::new("pdf/references/a.md", "below"),
        ]),
        "duplicate_entry",
    );
}

#[test]
fn an_archive_needs_exactly_one_top_level_directory() {
    refused(&zip_of(&[]), "no_top_directory");
    refused(&zip_of(&[("SKILL.md", &pdf_md())]), "no_top_directory");
    refused(
        &zip_of(&[("pdf/SKILL.md", &pdf_md()), ("README.md", b"hi")]),
        "no_top_directory",
    );
    refused(
        &zip_of(&[("pdf/SKILL.md", &pdf_md()), ("other/SKILL.md", &skill_md("other", "x"))]),
        "several_top_directories",
    );
    refused(
        &zip_of(&[("pdf/SKILL.md", &pdf_md()), ("__MACOSX/pdf/._SKILL.md", b"x")]),
        "several_top_directories",
    );
    refused(
        &zip_of(&[("pdf/references/a.md", b"no skill here")]),
        "missing_skill_md",
    );
}

#[test]
fn entry_count_limit_is_enforced_and_settable() {
    let md = pdf_md();
    let entries: Vec<(String, &[u8])> = (0..5).map(|i| (format!("pdf/references/{i}.md"), &b"x"[..])).collect();
    let mut all: Vec<(&str, &[u8])> = vec![("pdf/SKILL.md", &md)];
    all.extend(entries.iter().map(|(n, d)| (n.as_str(), *d)));
    let archive = zip_of(&all);
    let mut limits = ArchiveLimits::default();
    limits.max_entries = 5;
    refused_under(&archive, &limits, "too_many_entries");
    limits.max_entries = 6;
    assert_eq!(SkillArchive::read(&archive, &limits).unwrap().files().len(), 6);
}

#[test]
fn total_size_limit_is_enforced_and_settable() {
    let md = pdf_md();
    let big = vec![b'a'; 600];
    let archive = zip_with(
        &[
            ("pdf/SKILL.md", &md),
            ("pdf/references/a.md", &big),
            ("pdf/references/b.md", &big),
        ],
        CompressionMethod::Stored,
    );
    let mut limits = ArchiveLimits::default();
    limits.max_total_bytes = 1000;
    refused_under(&archive, &limits, "total_too_large");
    limits.max_total_bytes = 2000;
    assert!(SkillArchive::read(&archive, &limits).is_ok());
}

#[test]
fn archive_size_limit_is_enforced() {
    let archive = zip_of(&[("pdf/SKILL.md", &pdf_md())]);
    let mut limits = ArchiveLimits::default();
    limits.max_archive_bytes = archive.len() as u64 - 1;
    refused_under(&archive, &limits, "archive_too_large");
}

#[test]
fn a_small_archive_claiming_gigabytes_is_refused_by_its_ratio() {
    // Ten entries of ten bytes each declaring nearly 4 GB: a few hundred
    // bytes claiming forty gigabytes.
    let mut entries = vec![Raw::new("pdf/SKILL.md", pdf_md())];
    for i in 0..10 {
        let mut bomb = Raw::new(format!("pdf/assets/{i}.bin"), [0u8; 10]);
        bomb.declared = Some(u32::MAX - 1);
        entries.push(bomb);
    }
    let archive = raw_zip(&entries);
    assert!(archive.len() < 10 * 1024);
    refused(&archive, "compression_ratio");
}

#[test]
fn a_deflate_bomb_is_refused_by_its_ratio() {
    let zeros = vec![0u8; 5 * 1024 * 1024];
    let archive = zip_of(&[("pdf/SKILL.md", &pdf_md()), ("pdf/assets/zeros.bin", &zeros)]);
    assert!(archive.len() < 20 * 1024, "{}", archive.len());
    refused(&archive, "compression_ratio");
}

#[test]
fn many_small_bombs_are_refused_by_the_whole_archive_ratio() {
    // Each entry is at the exempt floor; together they inflate too much.
    let mut limits = ArchiveLimits::default();
    limits.ratio_floor = 64 * 1024;
    let zeros = vec![0u8; 64 * 1024];
    let md = pdf_md();
    let names: Vec<String> = (0..40).map(|i| format!("pdf/assets/{i}.bin")).collect();
    let mut entries: Vec<(&str, &[u8])> = vec![("pdf/SKILL.md", &md)];
    entries.extend(names.iter().map(|n| (n.as_str(), &zeros[..])));
    refused_under(&zip_of(&entries), &limits, "compression_ratio");
}

#[test]
fn nested_archives_are_files_never_unpacked() {
    runtime().block_on(async {
        let inner = zip_of(&[("evil/SKILL.md", &skill_md("evil", "x")), ("../../escape", b"x")]);
        let archive = zip_of(&[("pdf/SKILL.md", &pdf_md()), ("pdf/assets/bundle.zip", &inner)]);
        let dest = destination(Kind::Memory, &[]).await;
        dest.install(&archive, &ArchiveLimits::default(), InstallOptions::default())
            .await
            .unwrap();
        let files = snapshot(&*dest.backend, &p("/team/pdf")).await;
        assert_eq!(files.keys().collect::<Vec<_>>(), ["SKILL.md", "assets/bundle.zip"]);
        assert_eq!(files["assets/bundle.zip"], inner);
        assert!(!dest.backend.exists(&p("/team/evil")).await.unwrap());
    });
}

#[test]
fn encrypted_entries_are_refused() {
    let mut secret = Raw::new("pdf/references/secret.md", "ciphertext");
    secret.flags = 1;
    refused(&pdf_with(secret), "encrypted_entry");
    // Even SKILL.md itself.
    let mut md = Raw::new("pdf/SKILL.md", pdf_md());
    md.flags = 1;
    refused(&raw_zip(&[md]), "encrypted_entry");
}

#[test]
fn compression_methods_other_than_deflate_are_refused() {
    for method in [12u16, 14, 93, 99] {
        let mut packed = Raw::new("pdf/references/a.md", "data");
        packed.method = method;
        refused(&pdf_with(packed), "unsupported_compression");
    }
}

#[test]
fn entries_whose_sizes_lie_are_refused() {
    // Declares fewer bytes than it holds.
    let mut short = Raw::new("pdf/references/a.md", vec![b'a'; 100]);
    short.declared = Some(10);
    refused(&pdf_with(short), "size_mismatch");
    // Declares more than it holds, with the checksum of what it holds.
    let mut long = Raw::new("pdf/references/a.md", vec![b'a'; 100]);
    long.declared = Some(200);
    refused(&pdf_with(long), "size_mismatch");
    // A deflated entry declaring a fraction of what it inflates to.
    let text: Vec<u8> = (0..20_000u32).map(|i| b'a' + (i * 7 % 26) as u8).collect();
    let lying = patch_sizes(zip_of(&[("pdf/SKILL.md", &text)]), 100);
    refused(&lying, "size_mismatch");
}

#[test]
fn corrupt_entries_are_refused() {
    let mut bad = Raw::new("pdf/references/a.md", "hello");
    bad.crc = Some(0xdead_beef);
    refused(&pdf_with(bad), "corrupt_entry");
}

#[test]
fn overlapping_entries_are_refused() {
    let mut second = Raw::new("pdf/references/b.md", pdf_md());
    second.points_at = Some(0);
    refused(&pdf_with(second), "overlapping_entries");
}

#[test]
fn files_over_the_read_limit_are_refused() {
    // SKILL.md over the 10 MiB default, stored so that its ratio is 1.
    let mut md = pdf_md();
    md.resize(10 * 1024 * 1024 + 1, b'x');
    refused(&raw_zip(&[Raw::new("pdf/SKILL.md", &md)]), "file_too_large");
    // Any file, under a lowered limit.
    let mut limits = ArchiveLimits::default();
    limits.max_file_bytes = 1000;
    refused_under(
        &pdf_with(Raw::new("pdf/assets/a.bin", [7u8; 1001])),
        &limits,
        "file_too_large",
    );
}

#[test]
fn what_is_not_an_archive_is_refused() {
    refused(b"not a zip at all", "not_an_archive");
    let archive = zip_of(&[("pdf/SKILL.md", &pdf_md())]);
    refused(&archive[..archive.len() - 10], "not_an_archive");
}

#[test]
fn skill_md_is_validated_strictly() {
    // The name must match the directory.
    refused(&zip_of(&[("pdf/SKILL.md", &skill_md("other", "x"))]), "invalid_skill");
    refused(&zip_of(&[("pdf/SKILL.md", b"no frontmatter")]), "invalid_skill");
}

// ---------------------------------------------------------------------------
// Installing.

#[test]
fn install_refuses_an_existing_skill_unless_replacing() {
    runtime().block_on(async {
        let existing = skill_md("pdf", "Old.");
        let dest = destination(
            Kind::Memory,
            &[
                ("/team/pdf/SKILL.md", &existing),
                ("/team/pdf/references/stale.md", b"stale"),
                ("/team/pdf/references/same.md", b"same"),
            ],
        )
        .await;
        let new = skill_md("pdf", "New.");
        let archive = zip_of(&[
            ("pdf/SKILL.md", &new),
            ("pdf/references/same.md", b"same"),
            ("pdf/references/license.txt", b"license"),
        ]);
        let limits = ArchiveLimits::default();
        let before = snapshot(&*dest.backend, &VPath::root()).await;
        let refused = dest.install(&archive, &limits, InstallOptions::default()).await;
        assert_eq!(refused.err().as_deref(), Some("already_exists"));
        assert_eq!(snapshot(&*dest.backend, &VPath::root()).await, before);

        let change = dest
            .install(&archive, &limits, InstallOptions::replacing())
            .await
            .unwrap();
        assert_eq!(change.record.action, Action::Install);
        let touched: Vec<&str> = change.record.files.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(touched, ["references/license.txt", "references/stale.md", "SKILL.md"]);
        let files = snapshot(&*dest.backend, &p("/team/pdf")).await;
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            ["SKILL.md", "references/license.txt", "references/same.md"]
        );
        assert_eq!(files["SKILL.md"], new);

        // One history entry, holding what the install replaced.
        let history = dest.editor.history("pdf").await.unwrap();
        assert_eq!(history.len(), 1);
        let stale = history[0]
            .files
            .iter()
            .find(|f| f.path == "references/stale.md")
            .unwrap();
        assert!(stale.new.is_none() && stale.previous.is_some());
    });
}

/// Finding: an archive holding `outside/.git/config` installed and was
/// served, where a write of the same path is `invalid_path`. Install
/// applies the rule every write applies (the content rule): hidden paths
/// are refused, while the files real skills hold beside SKILL.md
/// (`LICENSE.txt`, `python/`) install as they can be written.
#[test]
fn install_skips_the_path_rule_writes_obey() {
    against_destination(|dest| async move {
        let md = skill_md("outside", "Outside.");
        // The content rule refuses these while the archive is read, each
        // with its own kind, before the editor's path rule is asked.
        for (path, kind) in [
            (".git/config", "git_entry"),
            (".GIT/hooks/post-checkout", "git_entry"),
            (".history/x.jsonl", "hidden_path"),
            ("python/.env", "hidden_path"),
        ] {
            let archive = zip_of(&[("outside/SKILL.md", &md), (&format!("outside/{path}"), b"[core]\n")]);
            dest.refuses(&archive, &ArchiveLimits::default(), kind).await;
        }
        let archive = zip_of(&[
            ("outside/SKILL.md", &md),
            ("outside/references/deep/guide.md", b"# Guide"),
            ("outside/scripts/run.sh", b"#!/bin/sh\necho run\n"),
            ("outside/assets/logo.svg", b"<svg/>"),
            ("outside/templates/t.md", b"T"),
            ("outside/LICENSE.txt", b"Apache-2.0"),
            ("outside/python/api/README.md", b"# API"),
        ]);
        let change = dest
            .install(&archive, &ArchiveLimits::default(), InstallOptions::default())
            .await
            .unwrap();
        assert_eq!(change.record.files.len(), 7);
        assert_eq!(
            change.record.files.last().unwrap().path,
            "SKILL.md",
            "SKILL.md lands last"
        );
        let catalog = Catalog::load(Arc::clone(&dest.backend), sources(), LoadOptions::default()).await;
        assert_eq!(catalog.get("outside").unwrap().source, "team");
    });
}

/// Relative paths, some of which every write refuses.
fn relative_path() -> impl Strategy<Value = String> {
    let segment = prop::sample::select(vec![
        "references",
        "scripts",
        "assets",
        "templates",
        "other",
        ".git",
        "config",
        "SKILL.md",
        "a.md",
        "..",
        ".",
        "run.sh",
        "x y",
    ]);
    prop::collection::vec(segment, 1..4).prop_map(|segments| segments.join("/"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// An archive file lands where, and only where, a single write may
    /// write: SKILL.md through create, anything else through write_file.
    #[test]
    fn install_accepts_a_path_exactly_when_a_write_does(relative in relative_path()) {
        runtime().block_on(async {
            let md = skill_md("pdf", "Read PDFs.");
            let dest = destination(Kind::Memory, &[]).await;
            let written = match relative.as_str() {
                "SKILL.md" => dest.editor.create("pdf", md.clone()).await.map(drop),
                _ => {
                    dest.editor.create("pdf", md.clone()).await.unwrap();
                    let result = dest.editor.write_file("pdf", &relative, "x", None).await.map(drop);
                    dest.editor.delete("pdf", None).await.unwrap();
                    result
                }
            };
            let entry = format!("pdf/{relative}");
            let archive = if relative == "SKILL.md" {
                zip_of(&[("pdf/SKILL.md", &md)])
            } else {
                zip_of(&[("pdf/SKILL.md", &md), (&entry, b"x")])
            };
            let Ok(read) = SkillArchive::read(&archive, &ArchiveLimits::default()) else {
                // The reader refused it first (`..`, `.`, a file under
                // SKILL.md): no install to compare.
                assert!(written.is_err(), "{relative:?}: a write took what the reader refused");
                return;
            };
            let installed = dest.editor.install(&read, InstallOptions::replacing()).await.map(drop);
            assert_eq!(installed.is_ok(), written.is_ok(), "{relative:?}: install {installed:?}, write {written:?}");
            if let Err(e) = installed {
                assert_eq!(e.kind().as_str(), "invalid_path", "{relative:?}");
            }
        });
    }
}

#[test]
fn install_goes_through_the_content_check() {
    against_destination(|dest| async move {
        let archive = zip_of(&[
            ("pdf/SKILL.md", &pdf_md()),
            ("pdf/assets/tool", b"\x7fELF\x02\x01\x01\0"),
        ]);
        dest.refuses(&archive, &ArchiveLimits::default(), "content_blocked")
            .await;
    });
}

// ---------------------------------------------------------------------------
// An install lands whole or not at all.

/// A backend that fails one chosen write (put or delete), as a full disk
/// or a dropped connection would, and counts the writes made.
#[derive(Debug)]
struct Faulty {
    inner: Arc<dyn SkillBackend>,
    writes: AtomicUsize,
    fail_at: AtomicUsize,
}

impl Faulty {
    fn new(inner: Arc<dyn SkillBackend>) -> Arc<Self> {
        Arc::new(Faulty {
            inner,
            writes: AtomicUsize::new(0),
            fail_at: AtomicUsize::new(usize::MAX),
        })
    }

    /// Fails the `n`th write from now (0: the next one), once.
    fn fail_write(&self, n: usize) {
        self.writes.store(0, Ordering::SeqCst);
        self.fail_at.store(n, Ordering::SeqCst);
    }

    fn writes(&self) -> usize {
        self.writes.load(Ordering::SeqCst)
    }

    fn write(&self, path: &VPath) -> skillstore::backends::Result<()> {
        if self.writes.fetch_add(1, Ordering::SeqCst) == self.fail_at.load(Ordering::SeqCst) {
            return Err(skillstore::backends::Error::at(ErrorKind::StorageFull, path).with_detail("injected"));
        }
        Ok(())
    }
}

#[async_trait]
impl SkillBackend for Faulty {
    fn capabilities(&self) -> Capabilities {
        self.inner.capabilities()
    }
    async fn list(&self, dir: &VPath) -> skillstore::backends::Result<Vec<Entry>> {
        self.inner.list(dir).await
    }
    async fn stat(&self, path: &VPath) -> skillstore::backends::Result<Metadata> {
        self.inner.stat(path).await
    }
    async fn read(&self, path: &VPath, options: ReadOptions) -> skillstore::backends::Result<Blob> {
        self.inner.read(path, options).await
    }
    async fn put(&self, path: &VPath, data: Bytes, mode: PutMode) -> skillstore::backends::Result<Version> {
        self.write(path)?;
        self.inner.put(path, data, mode).await
    }
    async fn delete(&self, path: &VPath) -> skillstore::backends::Result<()> {
        self.write(path)?;
        self.inner.delete(path).await
    }
    async fn delete_if_version(&self, path: &VPath, expected: &Version) -> skillstore::backends::Result<()> {
        self.write(path)?;
        self.inner.delete_if_version(path, expected).await
    }
}

/// A skill `pdf` made and changed through the editor (so it has a
/// history), on `kind`, behind a [`Faulty`] wrapper.
async fn faulty_destination(kind: Kind, files: &[(&str, &[u8])]) -> (Destination, Arc<Faulty>) {
    let tree = common::tree(kind, &[]).await;
    let faulty = Faulty::new(Arc::clone(&tree.backend));
    let backend: Arc<dyn SkillBackend> = faulty.clone();
    let team = sources().get("team").unwrap().clone();
    let editor = SkillEditor::new(Arc::clone(&backend), &team)
        .unwrap()
        .with_author("tester");
    for (path, data) in files {
        match *path {
            "SKILL.md" => editor.create("pdf", data.to_vec()).await.map(drop),
            _ => editor.write_file("pdf", path, data.to_vec(), None).await.map(drop),
        }
        .unwrap();
    }
    let dest = Destination {
        backend,
        editor,
        _keep: tree,
    };
    (dest, faulty)
}

/// Installs `archive` (replacing) with the `n`th write failing, and asserts
/// that it failed and that not a byte of the source (history included)
/// changed.
async fn fails_whole(dest: &Destination, faulty: &Faulty, archive: &[u8], n: usize) {
    let before = snapshot(&*dest.backend, &VPath::root()).await;
    faulty.fail_write(n);
    let got = dest
        .install(archive, &ArchiveLimits::default(), InstallOptions::replacing())
        .await;
    faulty.fail_write(usize::MAX);
    assert_eq!(got.err().as_deref(), Some("storage_full"), "write {n}");
    let after = snapshot(&*dest.backend, &VPath::root()).await;
    assert_eq!(
        after.keys().collect::<Vec<_>>(),
        before.keys().collect::<Vec<_>>(),
        "write {n} failed and the files present changed"
    );
    assert!(after == before, "write {n} failed and a file's bytes changed");
}

/// Finding: an `install --replace` that ran out of disk part-way left old
/// and new files live, and a partial history entry. Whichever write fails
/// (a file, a removal, SKILL.md, the history record), nothing changes.
async fn install_is_not_all_or_nothing(kind: Kind) {
    let old_md = skill_md("pdf", "Old.");
    let existing: [(&str, &[u8]); 3] = [
        ("SKILL.md", &old_md),
        ("references/a.md", b"old a"),
        ("references/stale.md", b"stale"),
    ];
    let new_md = skill_md("pdf", "New.");
    let archive = zip_of(&[
        ("pdf/SKILL.md", &new_md),
        ("pdf/references/a.md", b"new a"),
        ("pdf/references/b.md", b"new b"),
    ]);
    // How many writes a whole install makes.
    let (dest, faulty) = faulty_destination(kind, &existing).await;
    faulty.fail_write(usize::MAX);
    dest.install(&archive, &ArchiveLimits::default(), InstallOptions::replacing())
        .await
        .unwrap();
    // a.md, b.md, stale.md, SKILL.md, the audit record and the history
    // record; an object store then updates the source's index, which is no
    // part of the change.
    let writes = 6;
    assert!(faulty.writes() >= writes);
    for n in 0..writes {
        let (dest, faulty) = faulty_destination(kind, &existing).await;
        fails_whole(&dest, &faulty, &archive, n).await;
        // And the same install goes through once the storage is back.
        let change = dest
            .install(&archive, &ArchiveLimits::default(), InstallOptions::replacing())
            .await
            .unwrap();
        assert_eq!(change.record.id, 4);
        let files = snapshot(&*dest.backend, &p("/team/pdf")).await;
        assert_eq!(
            files.keys().collect::<Vec<_>>(),
            ["SKILL.md", "references/a.md", "references/b.md"]
        );
    }
}

#[test]
fn install_is_not_all_or_nothing_on_memory() {
    runtime().block_on(install_is_not_all_or_nothing(Kind::Memory));
}

#[test]
fn install_is_not_all_or_nothing_on_a_directory() {
    runtime().block_on(install_is_not_all_or_nothing(Kind::Fs));
}

#[test]
fn install_is_not_all_or_nothing_on_s3() {
    runtime().block_on(install_is_not_all_or_nothing(Kind::S3));
}

#[test]
#[ignore = "needs moto: set SKILLSTORE_MOTO_ENDPOINT and pass --include-ignored"]
fn install_is_not_all_or_nothing_on_moto() {
    runtime().block_on(install_is_not_all_or_nothing(Kind::Moto));
}

/// The files a skill may hold in the property below.
const POOL: [&str; 5] = [
    "references/a.md",
    "references/deep/b.md",
    "scripts/run.sh",
    "assets/x.bin",
    "templates/t.md",
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]

    /// Whatever the skill held and whatever the archive holds, an install
    /// whose nth write fails changes nothing, for every n; without a
    /// failure the skill's files become exactly the archive's, with one
    /// more history entry.
    #[test]
    fn install_lands_whole_or_not_at_all_under_injected_failures(
        existing in prop::collection::vec(prop::option::of(0u8..3), POOL.len()),
        incoming in prop::collection::vec(prop::option::of(0u8..3), POOL.len()),
        same_skill_md in any::<bool>(),
    ) {
        runtime().block_on(async {
            let old_md = skill_md("pdf", "Old.");
            let new_md = if same_skill_md { old_md.clone() } else { skill_md("pdf", "New.") };
            let contents = |v: u8| format!("content {v}\n").into_bytes();
            let existing: Vec<(&str, Vec<u8>)> = std::iter::once(("SKILL.md", old_md.clone()))
                .chain(POOL.iter().zip(&existing).filter_map(|(p, v)| v.map(|v| (*p, contents(v)))))
                .collect();
            let existing: Vec<(&str, &[u8])> = existing.iter().map(|(p, d)| (*p, d.as_slice())).collect();
            let entries: Vec<(String, Vec<u8>)> = std::iter::once(("pdf/SKILL.md".to_owned(), new_md.clone()))
                .chain(POOL.iter().zip(&incoming).filter_map(|(p, v)| v.map(|v| (format!("pdf/{p}"), contents(v)))))
                .collect();
            let entries_ref: Vec<(&str, &[u8])> = entries.iter().map(|(p, d)| (p.as_str(), d.as_slice())).collect();
            let archive = zip_of(&entries_ref);

            let (dest, faulty) = faulty_destination(Kind::Memory, &existing).await;
            let entries_before = dest.editor.history("pdf").await.unwrap().len();
            faulty.fail_write(usize::MAX);
            dest.install(&archive, &ArchiveLimits::default(), InstallOptions::replacing()).await.unwrap();
            let writes = faulty.writes();
            let files = snapshot(&*dest.backend, &p("/team/pdf")).await;
            let expected: BTreeMap<String, Bytes> = entries
                .iter()
                .map(|(p, d)| (p.strip_prefix("pdf/").unwrap().to_owned(), Bytes::from(d.clone())))
                .collect();
            assert_eq!(files, expected);
            assert_eq!(dest.editor.history("pdf").await.unwrap().len(), entries_before + 1);

            for n in 0..writes {
                let (dest, faulty) = faulty_destination(Kind::Memory, &existing).await;
                fails_whole(&dest, &faulty, &archive, n).await;
            }
        });
    }
}

/// Finding: an `install --replace` that ran out of disk part-way left old
/// and new files live. On a real, size-limited tmpfs, a file that does not
/// fit, or a history record that does not, leaves the skill as it was.
#[test]
#[ignore = "mounts a size-limited tmpfs, which needs root; scripts/test.sh runs it"]
fn an_install_that_runs_out_of_disk_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("disk");
    std::fs::create_dir(&root).unwrap();
    let status = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
        .arg(&root)
        .status()
        .unwrap();
    assert!(status.success(), "this test needs to mount a tmpfs (run as root)");
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
        }
    }
    let _unmount = Unmount(root.clone());
    let kib = |n: usize, byte: u8| vec![byte; n * 1024];
    let skill = root.join("team/pdf");
    std::fs::create_dir_all(skill.join("references")).unwrap();
    std::fs::write(skill.join("SKILL.md"), skill_md("pdf", "Old.")).unwrap();
    std::fs::write(skill.join("references/a.md"), kib(40, b'a')).unwrap();
    std::fs::write(skill.join("references/b.md"), kib(40, b'b')).unwrap();
    let backend: Arc<dyn SkillBackend> = Arc::new(FsBackend::new(&root).unwrap());
    let team = sources().get("team").unwrap().clone();
    let editor = SkillEditor::new(Arc::clone(&backend), &team).unwrap();
    let new_md = skill_md("pdf", "New.");
    runtime().block_on(async {
        let before = snapshot(&*backend, &VPath::root()).await;
        // A file that does not fit, after two that did; then files that fit
        // with a history record that does not.
        for (c_size, what) in [(200, "a file"), (60, "the history record")] {
            let c = kib(c_size, b'c');
            let archive = zip_of(&[
                ("pdf/SKILL.md", &new_md),
                ("pdf/references/a.md", &kib(40, b'A')),
                ("pdf/references/b.md", &kib(40, b'B')),
                ("pdf/references/c.md", &c),
            ]);
            let read = SkillArchive::read(&archive, &ArchiveLimits::default()).unwrap();
            let err = editor.install(&read, InstallOptions::replacing()).await.unwrap_err();
            assert_eq!(err.kind().as_str(), "storage_full", "{what}: {err}");
            assert!(!err.to_string().contains(root.to_str().unwrap()), "{err}");
            let after = snapshot(&*backend, &VPath::root()).await;
            assert!(
                after == before,
                "{what} did not fit and the skill changed: {:?}",
                after.keys()
            );
        }
    });
}

// ---------------------------------------------------------------------------
// Packing.

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/skills")
}

/// The files of a local skill directory, relative to it.
fn local_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut files = Vec::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((current, prefix)) = pending.pop() {
        for entry in std::fs::read_dir(&current).unwrap() {
            let entry = entry.unwrap();
            let name = entry.file_name().into_string().unwrap();
            if entry.file_type().unwrap().is_dir() {
                pending.push((entry.path(), format!("{prefix}{name}/")));
            } else {
                files.push((format!("{prefix}{name}"), std::fs::read(entry.path()).unwrap()));
            }
        }
    }
    files.sort();
    files
}

/// The csv-report example, with a deeper directory and a binary file.
fn sample_skill() -> Vec<(String, Vec<u8>)> {
    let mut files = local_files(&examples().join("base/csv-report"));
    files.push(("references/LICENSE.txt".into(), b"Apache-2.0\n".to_vec()));
    files.push(("references/python/api/README.md".into(), b"# Python\n".to_vec()));
    files.push(("assets/blank.bin".into(), vec![0, 1, 2, 255]));
    files.sort();
    files
}

async fn pack_then_install_round_trips(kind: Kind) {
    let skill = sample_skill();
    let placed: Vec<(String, &[u8])> = skill
        .iter()
        .map(|(path, data)| (format!("/src/csv-report/{path}"), data.as_slice()))
        .collect();
    let placed: Vec<(&str, &[u8])> = placed.iter().map(|(p, d)| (p.as_str(), *d)).collect();
    let dest = destination(kind, &placed).await;
    let limits = ArchiveLimits::default();

    let packed = pack(&*dest.backend, &p("/src/csv-report"), &limits).await.unwrap();
    let change = dest.install(&packed, &limits, InstallOptions::default()).await.unwrap();
    assert_eq!(change.record.action, Action::Install);
    assert_eq!(change.record.files.len(), skill.len());

    let installed = snapshot(&*dest.backend, &p("/team/csv-report")).await;
    let expected: BTreeMap<String, Bytes> = skill.iter().map(|(p, d)| (p.clone(), Bytes::from(d.clone()))).collect();
    assert_eq!(installed, expected);
    let repacked = pack(&*dest.backend, &p("/team/csv-report"), &limits).await.unwrap();
    assert!(repacked == packed, "a packed, installed skill packs to the same bytes");
    assert_eq!(dest.editor.history("csv-report").await.unwrap().len(), 1);
}

#[test]
fn pack_then_install_round_trips_on_memory() {
    runtime().block_on(pack_then_install_round_trips(Kind::Memory));
}

#[test]
fn pack_then_install_round_trips_on_a_directory() {
    runtime().block_on(pack_then_install_round_trips(Kind::Fs));
}

#[test]
fn pack_then_install_round_trips_on_s3() {
    runtime().block_on(pack_then_install_round_trips(Kind::S3));
}

#[test]
#[ignore = "needs moto: set SKILLSTORE_MOTO_ENDPOINT and pass --include-ignored"]
fn pack_then_install_round_trips_on_moto() {
    runtime().block_on(pack_then_install_round_trips(Kind::Moto));
}

/// Copies the sample skill into a fresh directory.
fn sample_dir() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("csv-report");
    for (path, data) in sample_skill() {
        let target = dir.join(&path);
        std::fs::create_dir_all(target.parent().unwrap()).unwrap();
        std::fs::write(target, data).unwrap();
    }
    (root, dir)
}

/// `save` writes through no link planted beside its output (whatever its
/// name), replaces a link at the output itself rather than following it,
/// and leaves no temporary file behind, also when it fails.
#[test]
fn save_never_follows_what_is_planted_beside_the_output() {
    let dir = tempfile::tempdir().unwrap();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "precious\n").unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    for planted in [".pdf.partial", ".pdf.skill.partial", "other.skill"] {
        std::os::unix::fs::symlink(&victim, out.join(planted)).unwrap();
    }
    skillstore::archive::save(&out.join("pdf.skill"), b"first").unwrap();
    skillstore::archive::save(&out.join("other.skill"), b"second").unwrap();
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
    assert_eq!(std::fs::read(out.join("pdf.skill")).unwrap(), b"first");
    assert!(!out.join("other.skill").symlink_metadata().unwrap().is_symlink());
    assert_eq!(std::fs::read(out.join("other.skill")).unwrap(), b"second");
    // A directory at the output: the save fails and leaves nothing.
    std::fs::create_dir(out.join("dir.skill")).unwrap();
    assert!(skillstore::archive::save(&out.join("dir.skill"), b"x").is_err());
    let mut left: Vec<String> = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    left.sort();
    assert_eq!(
        left,
        [
            ".pdf.partial",
            ".pdf.skill.partial",
            "dir.skill",
            "other.skill",
            "pdf.skill"
        ]
    );
}

#[test]
fn pack_is_deterministic() {
    runtime().block_on(async {
        let (root, dir) = sample_dir();
        let fs = FsBackend::new(root.path()).unwrap();
        let limits = ArchiveLimits::default();
        let first = pack(&fs, &p("/csv-report"), &limits).await.unwrap();
        let second = pack(&fs, &p("/csv-report"), &limits).await.unwrap();
        assert!(first == second);

        // Other timestamps and modes, the same bytes.
        let when = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_234_567_890);
        for (path, _) in sample_skill() {
            let file = std::fs::File::options().write(true).open(dir.join(&path)).unwrap();
            file.set_modified(when).unwrap();
            use std::os::unix::fs::PermissionsExt as _;
            file.set_permissions(std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let touched = pack(&fs, &p("/csv-report"), &limits).await.unwrap();
        assert!(touched == first, "timestamps or modes changed the archive");

        // The same files in another backend, the same bytes.
        let memory = MemoryBackend::new();
        for (path, data) in sample_skill() {
            memory
                .put(&p(&format!("/csv-report/{path}")), data.into(), Default::default())
                .await
                .unwrap();
        }
        assert!(pack(&memory, &p("/csv-report"), &limits).await.unwrap() == first);

        // Entries in byte order of their paths, with fixed dates and modes.
        let mut zip = zip::ZipArchive::new(std::io::Cursor::new(&first)).unwrap();
        let names: Vec<String> = zip.file_names().map(|n| n.unwrap().into_owned()).collect();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        for i in 0..zip.len() {
            let entry = zip.by_index(i).unwrap();
            assert_eq!(entry.unix_mode(), Some(0o100_644));
            assert_eq!(entry.last_modified(), Some(zip::DateTime::DEFAULT));
            assert_eq!(entry.compression(), CompressionMethod::Deflated);
        }
    });
}

#[test]
fn pack_validates_strictly_first() {
    runtime().block_on(async {
        let memory = MemoryBackend::new();
        let kind = |e: ArchiveError| e.kind();
        memory
            .put(&p("/skills/pdf/references/a.md"), "x".into(), Default::default())
            .await
            .unwrap();
        let limits = ArchiveLimits::default();
        assert_eq!(
            kind(pack(&memory, &p("/skills/pdf"), &limits).await.unwrap_err()),
            "missing_skill_md"
        );
        // Valid leniently (an unknown field), not strictly.
        memory
            .put(
                &p("/skills/pdf/SKILL.md"),
                "---\nname: pdf\ndescription: Read PDFs.\ncolour: blue\n---\nBody\n".into(),
                Default::default(),
            )
            .await
            .unwrap();
        assert_eq!(
            kind(pack(&memory, &p("/skills/pdf"), &limits).await.unwrap_err()),
            "invalid_skill"
        );
        // The directory's name is the skill's name.
        memory
            .put(&p("/skills/other/SKILL.md"), pdf_md().into(), Default::default())
            .await
            .unwrap();
        assert_eq!(
            kind(pack(&memory, &p("/skills/other"), &limits).await.unwrap_err()),
            "invalid_skill"
        );
    });
}

#[test]
fn pack_walks_are_bounded_and_follow_no_unresolved_links() {
    runtime().block_on(async {
        let (root, dir) = sample_dir();
        std::os::unix::fs::symlink("..", dir.join("references/loop")).unwrap();
        let limits = ArchiveLimits::default();
        // The default policy resolves the link (it stays inside the root):
        // the walk stops at the depth limit instead of going round forever.
        let within = FsBackend::new(root.path()).unwrap();
        let err = pack(&within, &p("/csv-report"), &limits).await.unwrap_err();
        assert!(matches!(err.kind(), "too_deep" | "too_many_entries"), "{err}");
        // Denying links, the link is refused by name.
        let deny = FsBackend::with_policy(root.path(), SymlinkPolicy::Deny).unwrap();
        let err = pack(&deny, &p("/csv-report"), &limits).await.unwrap_err();
        assert_eq!(err.kind(), "special_entry", "{err}");
        assert!(err.to_string().contains("references/loop"), "{err}");
        assert!(!err.to_string().contains(&*root.path().to_string_lossy()), "{err}");
    });
}

#[test]
fn pack_refuses_files_over_the_limit() {
    runtime().block_on(async {
        let memory = MemoryBackend::new();
        memory
            .put(&p("/pdf/SKILL.md"), pdf_md().into(), Default::default())
            .await
            .unwrap();
        memory
            .put(&p("/pdf/assets/big.bin"), vec![1u8; 2000].into(), Default::default())
            .await
            .unwrap();
        let mut limits = ArchiveLimits::default();
        limits.max_file_bytes = 1000;
        let err = pack(&memory, &p("/pdf"), &limits).await.unwrap_err();
        assert_eq!(err.kind(), "file_too_large");
        limits.max_file_bytes = 2000;
        limits.max_total_bytes = 2000;
        let err = pack(&memory, &p("/pdf"), &limits).await.unwrap_err();
        assert_eq!(err.kind(), "total_too_large");
    });
}

#[test]
fn every_example_skill_packs_and_reads_back() {
    runtime().block_on(async {
        let root = examples();
        let fs = FsBackend::with_policy(&root, SymlinkPolicy::Deny).unwrap();
        let limits = ArchiveLimits::default();
        let mut packed = 0;
        for layer in std::fs::read_dir(&root).unwrap() {
            let layer = layer.unwrap();
            for skill in std::fs::read_dir(layer.path()).unwrap() {
                let skill = skill.unwrap().path();
                if !skill.join("SKILL.md").is_file() {
                    continue;
                }
                let relative = skill.strip_prefix(&root).unwrap().to_str().unwrap();
                let bytes = pack(&fs, &p(&format!("/{relative}")), &limits).await.unwrap();
                let archive = SkillArchive::read(&bytes, &limits).unwrap();
                assert_eq!(archive.name(), skill.file_name().unwrap().to_str().unwrap());
                let read: Vec<(String, Vec<u8>)> = archive
                    .files()
                    .iter()
                    .map(|f| (f.path.clone(), f.data.to_vec()))
                    .collect();
                assert_eq!(read, local_files(&skill), "{relative}");
                packed += 1;
            }
        }
        assert!(packed >= 8, "{packed}");
    });
}

#[test]
fn refusal_kinds_are_distinct_snake_case() {
    use skillstore::Refusal::*;
    let all = [
        NotAnArchive,
        ArchiveTooLarge,
        TooManyEntries,
        NonUtf8Name,
        AbsolutePath,
        DriveLetter,
        BackslashPath,
        ParentSegment,
        InvalidPath,
        SymlinkEntry,
        SpecialEntry,
        EncryptedEntry,
        UnsupportedCompression,
        DuplicateEntry,
        NoTopDirectory,
        SeveralTopDirectories,
        MissingSkillMd,
        FileTooLarge,
        TotalTooLarge,
        CompressionRatio,
        OverlappingEntries,
        SizeMismatch,
        CorruptEntry,
        TooDeep,
    ];
    let names: std::collections::BTreeSet<&str> = all.iter().map(|r| r.as_str()).collect();
    assert_eq!(names.len(), all.len());
    for name in names {
        assert!(
            name.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_'),
            "{name}"
        );
    }
}
