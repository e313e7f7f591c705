//! Real-world skills and generated layered trees from the shared test data
//! (`../shared` beside the repository, or `SKILLSTORE_SHARED`).

use std::path::PathBuf;
use std::sync::Arc;

use skillstore::backends::{FsBackend, MemoryBackend};
use skillstore::{Catalog, LoadOptions, Severity, Source, SourceList, Strictness, parse_skill_md};

/// The shared data directory. Under CI its absence fails the test; a clone
/// without it skips these tests with a message.
fn shared() -> Option<PathBuf> {
    let dir = std::env::var_os("SKILLSTORE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"));
    if dir.join("corpus").is_dir() {
        return Some(dir);
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but the shared data is missing at {}",
        dir.display()
    );
    eprintln!("skipping: no shared data at {}", dir.display());
    None
}

fn layered_sources() -> SourceList {
    SourceList::from_sources(["/base/", "/user/", "/project/", "/team/"].map(|p| Source::parse(p).unwrap())).unwrap()
}

/// Each skill of the real-world corpus gets the same verdict from the
/// strict parser as from the specification's reference validator, run for
/// real (`skills-ref` 0.1.1, `agentskills validate DIR`, named by
/// `SKILLSTORE_AGENTSKILLS`; `scripts/test.sh` installs it into
/// `target/venvs/skills-ref`). Ignored without it; with `--include-ignored`
/// (as CI runs) a missing command fails the test. The corpus holds both
/// verdicts (`claude-api`'s description is over 1,024 characters), so the
/// comparison is never between two "valid"s only.
#[test]
#[ignore = "needs skills-ref: set SKILLSTORE_AGENTSKILLS and pass --include-ignored"]
fn corpus_validates_as_skills_ref_judges_it() {
    let agentskills = PathBuf::from(
        std::env::var_os("SKILLSTORE_AGENTSKILLS")
            .expect("SKILLSTORE_AGENTSKILLS names the `agentskills` command of skills-ref 0.1.1"),
    );
    let Some(shared) = shared() else { return };
    let corpus = shared.join("corpus/anthropic-skills");
    let mut verdicts = Vec::new();
    let mut differ = Vec::new();
    for entry in std::fs::read_dir(&corpus).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        let bytes = std::fs::read(dir.join("SKILL.md")).unwrap();
        let parsed = parse_skill_md(&bytes, Some(&name), Strictness::Strict);
        let reference = std::process::Command::new(&agentskills)
            .arg("validate")
            .arg(&dir)
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}: {e}", agentskills.display()));
        let said =
            String::from_utf8_lossy(&reference.stdout).into_owned() + &String::from_utf8_lossy(&reference.stderr);
        if parsed.is_valid() != reference.status.success() {
            let kinds: Vec<&str> = parsed.problems.iter().map(|p| p.kind.as_str()).collect();
            differ.push(format!(
                "{name}: skillstore {} {kinds:?}, skills-ref {} {said}",
                parsed.is_valid(),
                reference.status.success()
            ));
        }
        verdicts.push((name, parsed.is_valid()));
    }
    assert_eq!(verdicts.len(), 11, "{verdicts:?}");
    assert!(differ.is_empty(), "verdicts differ:\n{}", differ.join("\n"));
    assert!(
        verdicts.iter().any(|(_, valid)| *valid) && verdicts.iter().any(|(_, valid)| !*valid),
        "the corpus no longer holds both verdicts: {verdicts:?}"
    );
}

#[tokio::test]
async fn corpus_loads_whole_with_one_warning() {
    let Some(shared) = shared() else { return };
    let backend = FsBackend::new(shared.join("corpus")).unwrap().read_only();
    let sources = SourceList::from_sources([Source::parse("/anthropic-skills").unwrap()]).unwrap();
    let catalog = Catalog::load(Arc::new(backend), sources, LoadOptions::default()).await;
    assert_eq!(catalog.skills().len(), 11);
    let warnings: Vec<(&str, Severity)> = catalog
        .diagnostics()
        .iter()
        .map(|d| (d.kind.as_str(), d.severity))
        .collect();
    assert_eq!(warnings, [("description_too_long", Severity::Warning)]);
    assert_eq!(
        catalog.get("claude-api").unwrap().metadata.description.chars().count(),
        1024
    );
}

#[tokio::test]
async fn generated_trees_load_in_deepagents_order_on_fs_and_memory() {
    let Some(shared) = shared() else { return };
    let work = tempfile::tempdir().unwrap();
    let root = work.path().join("tree");
    let json = work.path().join("tree.json");
    let status = std::process::Command::new("python3")
        .arg(shared.join("bench/peer/gen_fixture.py"))
        .arg(&root)
        .args(["-n", "25", "--json"])
        .arg(&json)
        .stdout(std::process::Stdio::null())
        .status()
        .expect("python3 runs the generator");
    assert!(status.success());
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(root.join("expected.json")).unwrap()).unwrap();
    let want: Vec<(String, String, String)> = expected["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["path"].as_str().unwrap().to_owned(),
                s["layer"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(want.len(), 89);

    let fs = Arc::new(FsBackend::new(&root).unwrap().read_only());
    let memory = Arc::new(MemoryBackend::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap());
    for backend in [fs as Arc<dyn skillstore::backends::SkillBackend>, memory] {
        let catalog = Catalog::load(backend, layered_sources(), LoadOptions::default()).await;
        let got: Vec<(String, String, String)> = catalog
            .skills()
            .iter()
            .map(|s| (s.name().to_owned(), s.path.to_string(), s.source.clone()))
            .collect();
        assert_eq!(got, want);
        assert!(catalog.diagnostics().is_empty(), "{:?}", catalog.diagnostics());
        let overridden: usize = catalog.skills().iter().map(|s| s.shadowed.len()).sum();
        assert_eq!(overridden, expected["overridden"].as_u64().unwrap() as usize);
    }
}

/// Every strictly valid skill of the corpus packs and installs whole (its
/// `LICENSE.txt` and other folders beside SKILL.md included), and each file
/// reads back as it is on disk.
#[tokio::test]
async fn corpus_skills_pack_and_install_whole() {
    use skillstore::backends::{SkillBackendExt, VPath};
    use skillstore::{ArchiveLimits, InstallOptions, SkillArchive, SkillEditor, pack_dir};

    let Some(shared) = shared() else { return };
    let corpus = shared.join("corpus/anthropic-skills");
    let backend = Arc::new(MemoryBackend::new());
    let sources = SourceList::from_sources([
        Source::parse("/base/").unwrap(),
        Source::parse("/team/").unwrap().with_writable(true),
    ])
    .unwrap();
    let editor = SkillEditor::new(backend.clone(), sources.get("team").unwrap()).unwrap();
    let mut installed = 0;
    for entry in std::fs::read_dir(&corpus).unwrap() {
        let dir = entry.unwrap().path();
        let name = dir.file_name().unwrap().to_str().unwrap().to_owned();
        if name == "claude-api" {
            continue; // its description is over the limit: pack refuses it strictly
        }
        let (_, bytes) = pack_dir(&dir, &ArchiveLimits::default()).await.unwrap();
        let archive = SkillArchive::read(&bytes, &ArchiveLimits::default()).unwrap();
        let change = editor.install(&archive, InstallOptions::default()).await;
        let change = change.unwrap_or_else(|e| panic!("{name}: {e}"));
        for file in &change.record.files {
            let on_disk = std::fs::read(dir.join(&file.path)).unwrap();
            let path = VPath::new(format!("/team/{name}/{}", file.path)).unwrap();
            assert_eq!(backend.read_all(&path).await.unwrap(), on_disk, "{name}/{}", file.path);
        }
        installed += 1;
    }
    assert_eq!(installed, 10);
}
