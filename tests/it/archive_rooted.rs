//! Rooted archives, the layout Agent Skills discovery serves (`SKILL.md`
//! at the archive's root): packing is deterministic and reads back to the
//! same files; reading refuses what the `.skill` reader refuses; the two
//! layouts are not taken for each other.

use std::io::Write as _;

use bytes::Bytes;
use proptest::prelude::*;
use skillstore::{ArchiveFile, ArchiveLimits, SkillArchive, pack_rooted};
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipWriter};

fn md(name: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: Reads things.\n---\nSteps.\n").into_bytes()
}

fn file(path: &str, data: &[u8]) -> ArchiveFile {
    ArchiveFile {
        path: path.to_owned(),
        data: Bytes::copy_from_slice(data),
    }
}

fn zip_of(entries: &[(&str, &[u8])]) -> Vec<u8> {
    let mut zip = ZipWriter::new(std::io::Cursor::new(Vec::new()));
    for (name, data) in entries {
        zip.start_file(
            *name,
            SimpleFileOptions::default().compression_method(CompressionMethod::Deflated),
        )
        .unwrap();
        zip.write_all(data).unwrap();
    }
    zip.finish().unwrap().into_inner()
}

fn refused(bytes: &[u8], kind: &str) {
    let err = SkillArchive::read_rooted(bytes, "pdf", &ArchiveLimits::default()).unwrap_err();
    assert_eq!(err.kind(), kind, "{err}");
}

fn relative_path() -> impl Strategy<Value = String> {
    let segment = prop::sample::select(vec!["references", "scripts", "assets", "a.md", "run.sh", "x y", "é"]);
    prop::collection::vec(segment, 1..4).prop_map(|s| s.join("/"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Whatever order the files come in, the bytes are the same, and
    /// reading them back gives exactly the files, SKILL.md at the root.
    #[test]
    fn packing_is_deterministic_and_reads_back(
        extra in prop::collection::btree_map(relative_path(), prop::collection::vec(any::<u8>(), 0..200), 0..6),
        seed in any::<u64>(),
    ) {
        let md = md("pdf");
        let mut files = vec![file("SKILL.md", &md)];
        // A path that is another's directory cannot be a file too.
        let keys: Vec<&String> = extra.keys().collect();
        for (path, data) in &extra {
            if keys.iter().any(|k| k.starts_with(&format!("{path}/"))) {
                continue;
            }
            files.push(file(path, data));
        }
        let limits = ArchiveLimits::default();
        let packed = pack_rooted("pdf", &files, &limits).unwrap();
        let mut shuffled = files.clone();
        let len = shuffled.len();
        shuffled.rotate_left((seed as usize) % len);
        if seed % 2 == 1 {
            shuffled.reverse();
        }
        prop_assert_eq!(&packed, &pack_rooted("pdf", &shuffled, &limits).unwrap());
        let read = SkillArchive::read_rooted(&packed, "pdf", &limits).unwrap();
        files.sort_by(|a, b| a.path.cmp(&b.path));
        prop_assert_eq!(read.files(), &files[..]);
        prop_assert_eq!(read.name(), "pdf");
    }
}

#[test]
fn the_two_layouts_are_not_taken_for_each_other() {
    let md = md("pdf");
    let limits = ArchiveLimits::default();
    let rooted = pack_rooted("pdf", &[file("SKILL.md", &md)], &limits).unwrap();
    let err = SkillArchive::read(&rooted, &limits).unwrap_err();
    assert_eq!(err.kind(), "no_top_directory");
    let wrapped = zip_of(&[("pdf/SKILL.md", &md)]);
    refused(&wrapped, "missing_skill_md");
}

#[test]
fn pack_rooted_needs_skill_md() {
    let err = pack_rooted("pdf", &[file("references/a.md", b"x")], &ArchiveLimits::default()).unwrap_err();
    assert_eq!(err.kind(), "missing_skill_md");
}

#[test]
fn hostile_entries_are_refused_as_in_skill_archives() {
    let md = md("pdf");
    refused(&zip_of(&[("SKILL.md", &md), ("../escape", b"x")]), "parent_segment");
    refused(
        &zip_of(&[("SKILL.md", &md), ("references/../../x", b"x")]),
        "parent_segment",
    );
    refused(&zip_of(&[("SKILL.md", &md), ("/etc/passwd", b"x")]), "absolute_path");
    refused(&zip_of(&[("SKILL.md", &md), ("a\\b", b"x")]), "backslash_path");
    refused(&zip_of(&[("SKILL.md", &md), ("C:x", b"x")]), "drive_letter");
    refused(&zip_of(&[("SKILL.md", &md), ("skill.md", b"x")]), "duplicate_entry");
    refused(&zip_of(&[]), "missing_skill_md");
    refused(b"not a zip", "not_an_archive");

    let mut zip = ZipWriter::new(std::io::Cursor::new(Vec::new()));
    zip.start_file("SKILL.md", SimpleFileOptions::default()).unwrap();
    zip.write_all(&md).unwrap();
    zip.add_symlink("references/passwd", "/etc/passwd", SimpleFileOptions::default())
        .unwrap();
    refused(&zip.finish().unwrap().into_inner(), "symlink_entry");

    // A bomb: 64 MiB of zeros deflate to a few kilobytes; past the ratio,
    // and with the ratio lifted, past the file limit.
    let zeros = vec![0u8; 64 * 1024 * 1024];
    let bomb = zip_of(&[("SKILL.md", &md), ("assets/zeros", &zeros)]);
    refused(&bomb, "compression_ratio");
    let mut limits = ArchiveLimits::default();
    limits.max_ratio = u64::MAX;
    let err = SkillArchive::read_rooted(&bomb, "pdf", &limits).unwrap_err();
    assert_eq!(err.kind(), "file_too_large");
}

#[test]
fn the_name_must_be_a_directory_name() {
    let md = md("pdf");
    let bytes = zip_of(&[("SKILL.md", &md)]);
    for bad in ["", ".", "..", "a/b", ".hidden"] {
        let err = SkillArchive::read_rooted(&bytes, bad, &ArchiveLimits::default()).unwrap_err();
        assert_eq!(err.kind(), "invalid_path", "{bad:?}");
    }
}
