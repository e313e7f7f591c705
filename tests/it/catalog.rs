//! Catalog behaviour, the same cases on every backend.

use std::sync::atomic::Ordering;

use crate::common;
use crate::common::{Watched, fill, skill_md};
use skillstore::backends::testkit::Fixture;
use skillstore::backends::{PutMode, SkillBackend, VPath};
use skillstore::{
    Catalog, Error, LoadOptions, Patterns, PromptOptions, PromptStyle, Severity, SkillFilter, Source, SourceList,
    render,
};

fn sources(paths: &[&str]) -> SourceList {
    SourceList::from_sources(paths.iter().map(|p| Source::parse(p).unwrap())).unwrap()
}

fn names(catalog: &Catalog) -> Vec<(&str, &str)> {
    catalog.skills().iter().map(|s| (s.name(), s.source.as_str())).collect()
}

fn diagnostic_kinds(catalog: &Catalog) -> Vec<(&str, Severity, Option<&str>)> {
    catalog
        .diagnostics()
        .iter()
        .map(|d| (d.kind.as_str(), d.severity, d.path.as_ref().map(|p| p.as_str())))
        .collect()
}

/// Loads a catalog; the returned tree keeps the files alive while it is used.
async fn load(f: Fixture, files: &[(&str, &[u8])], paths: &[&str]) -> (Catalog, common::Tree) {
    let tree = fill(f, files).await;
    let catalog = Catalog::load(tree.backend.clone(), sources(paths), LoadOptions::default()).await;
    (catalog, tree)
}

async fn merge_order_matches_deepagents(f: Fixture) {
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("/base/shared/SKILL.md", skill_md("shared", "base shared")),
        ("/base/foo/SKILL.md", skill_md("foo", "base foo")),
        ("/base/foo-kit/SKILL.md", skill_md("foo-kit", "base foo-kit")),
        ("/base/a/SKILL.md", skill_md("a", "base a")),
        ("/user/shared/SKILL.md", skill_md("shared", "user shared")),
        ("/user/b/SKILL.md", skill_md("b", "user b")),
        ("/team/a/SKILL.md", skill_md("a", "team a")),
    ];
    let files: Vec<(&str, &[u8])> = files.iter().map(|(p, d)| (*p, d.as_slice())).collect();
    let (catalog, _tree) = load(f, &files, &["/base/", "/user/", "/project/", "/team/"]).await;
    assert_eq!(
        names(&catalog),
        [
            ("a", "team"),
            ("foo-kit", "base"),
            ("foo", "base"),
            ("shared", "user"),
            ("b", "user")
        ]
    );
    let a = catalog.get("a").unwrap();
    assert_eq!(a.metadata.description, "team a");
    assert_eq!(a.path.as_str(), "/team/a/SKILL.md");
    assert_eq!(a.shadowed.len(), 1);
    assert_eq!(
        (a.shadowed[0].source.as_str(), a.shadowed[0].path.as_str()),
        ("base", "/base/a/SKILL.md")
    );
    assert!(catalog.get("foo").unwrap().shadowed.is_empty());
    // The missing /project/ source is a warning, and hides nothing.
    assert_eq!(
        diagnostic_kinds(&catalog),
        [("source_not_found", Severity::Warning, Some("/project"))]
    );
}

async fn the_frontmatter_name_is_the_override_key(f: Fixture) {
    let beta = skill_md("beta", "from user/alpha");
    let base_beta = skill_md("beta", "from base");
    let files: [(&str, &[u8]); 2] = [("/base/beta/SKILL.md", &base_beta), ("/user/alpha/SKILL.md", &beta)];
    let (catalog, _tree) = load(f, &files, &["/base", "/user"]).await;
    assert_eq!(names(&catalog), [("beta", "user")]);
    assert_eq!(catalog.get("beta").unwrap().metadata.description, "from user/alpha");
    assert_eq!(
        diagnostic_kinds(&catalog),
        [("name_mismatch", Severity::Warning, Some("/user/alpha/SKILL.md"))]
    );
}

async fn one_bad_skill_never_hides_the_others(f: Fixture) {
    let good = skill_md("good", "fine");
    let files: [(&str, &[u8]); 6] = [
        ("/base/good/SKILL.md", &good),
        ("/base/yaml/SKILL.md", b"---\nname: [yaml\n---\n"),
        ("/base/nofm/SKILL.md", b"# no frontmatter\n"),
        ("/base/nodesc/SKILL.md", b"---\nname: nodesc\n---\n"),
        ("/base/latin/SKILL.md", b"---\nname: latin\ndescription: caf\xe9\n---\n"),
        ("/base/alias/SKILL.md", b"---\nname: &n alias\ndescription: *n\n---\n"),
    ];
    let (catalog, _tree) = load(f, &files, &["/base"]).await;
    assert_eq!(names(&catalog), [("good", "base")]);
    let mut kinds = diagnostic_kinds(&catalog);
    kinds.sort();
    assert_eq!(
        kinds,
        [
            ("invalid_yaml", Severity::Error, Some("/base/yaml/SKILL.md")),
            ("missing_description", Severity::Error, Some("/base/nodesc/SKILL.md")),
            ("no_frontmatter", Severity::Error, Some("/base/nofm/SKILL.md")),
            ("not_utf8", Severity::Error, Some("/base/latin/SKILL.md")),
            ("yaml_alias", Severity::Error, Some("/base/alias/SKILL.md")),
        ]
    );
    for d in catalog.diagnostics() {
        assert_eq!(d.source.as_deref(), Some("base"));
    }
}

async fn directories_without_skill_md_and_loose_files_are_not_skills(f: Fixture) {
    let good = skill_md("good", "fine");
    let files: [(&str, &[u8]); 3] = [
        ("/base/good/SKILL.md", &good),
        ("/base/notes/README.md", b"not a skill"),
        ("/base/loose.md", b"a file beside the skills"),
    ];
    let (catalog, _tree) = load(f, &files, &["/base"]).await;
    assert_eq!(names(&catalog), [("good", "base")]);
    assert!(catalog.diagnostics().is_empty(), "{:?}", catalog.diagnostics());
}

async fn an_oversized_skill_md_is_refused_from_its_size(f: Fixture) {
    let mut big = skill_md("big", "too big");
    big.resize(10 * 1024 * 1024 + 1, b'x');
    let small = skill_md("small", "fine");
    let files: [(&str, &[u8]); 2] = [("/base/big/SKILL.md", &big), ("/base/small/SKILL.md", &small)];
    let (catalog, _tree) = load(f, &files, &["/base"]).await;
    assert_eq!(names(&catalog), [("small", "base")]);
    assert_eq!(
        diagnostic_kinds(&catalog),
        [("file_too_large", Severity::Error, Some("/base/big/SKILL.md"))]
    );
}

async fn a_frontmatter_longer_than_the_first_read_is_read_whole(f: Fixture) {
    let long = format!(
        "---\nname: long\ndescription: d\nmetadata:\n  notes: \"{}\"\n---\nbody",
        "n".repeat(20_000)
    );
    let files: [(&str, &[u8]); 1] = [("/base/long/SKILL.md", long.as_bytes())];
    let (catalog, _tree) = load(f, &files, &["/base"]).await;
    let skill = catalog.get("long").expect("loaded after a longer read");
    assert_eq!(skill.metadata.metadata["notes"].len(), 20_000);
}

async fn line_endings_bom_and_eof_fences_all_load(f: Fixture) {
    let files: [(&str, &[u8]); 3] = [
        (
            "/base/crlf/SKILL.md",
            b"---\r\nname: crlf\r\ndescription: windows\r\n---\r\nbody\r\n",
        ),
        (
            "/base/bom/SKILL.md",
            "\u{feff}---\nname: bom\ndescription: marked\n---\n".as_bytes(),
        ),
        ("/base/eof/SKILL.md", b"---\nname: eof\ndescription: no newline\n---"),
    ];
    let (catalog, _tree) = load(f, &files, &["/base"]).await;
    assert_eq!(names(&catalog), [("bom", "base"), ("crlf", "base"), ("eof", "base")]);
    assert!(catalog.diagnostics().is_empty());
}

async fn unicode_names_load(f: Fixture) {
    let cafe = skill_md("café-outil", "outil");
    let files: [(&str, &[u8]); 1] = [("/base/café-outil/SKILL.md", &cafe)];
    let (catalog, _tree) = load(f, &files, &["/base"]).await;
    assert_eq!(names(&catalog), [("café-outil", "base")]);
    assert!(catalog.diagnostics().is_empty());
}

async fn long_descriptions_are_cut_with_a_warning(f: Fixture) {
    let long = skill_md("long", &"w".repeat(1500));
    let files: [(&str, &[u8]); 1] = [("/base/long/SKILL.md", &long)];
    let (catalog, _tree) = load(f, &files, &["/base"]).await;
    assert_eq!(catalog.get("long").unwrap().metadata.description.len(), 1024);
    assert_eq!(
        diagnostic_kinds(&catalog),
        [("description_too_long", Severity::Warning, Some("/base/long/SKILL.md"))]
    );
}

async fn reads_go_through_the_winning_source_and_stay_inside(f: Fixture) {
    let base = skill_md("pdf", "base");
    let team = skill_md("pdf", "team");
    let files: [(&str, &[u8]); 5] = [
        ("/base/pdf/SKILL.md", &base),
        ("/base/pdf/references/base-only.md", b"base ref"),
        ("/team/pdf/SKILL.md", &team),
        ("/team/pdf/references/forms.md", b"team forms"),
        ("/team/pdf/scripts/fill.py", b"print('fill')"),
    ];
    let (catalog, _tree) = load(f, &files, &["/base", "/team"]).await;
    assert_eq!(catalog.read_skill("pdf").await.unwrap(), team);
    assert_eq!(
        &catalog.read_file("pdf", "references/forms.md").await.unwrap()[..],
        b"team forms"
    );
    // The base layer's files are not reachable through the team's skill.
    assert!(catalog.read_file("pdf", "references/base-only.md").await.is_err());
    for bad in [
        "../../base/pdf/SKILL.md",
        "/team/pdf/SKILL.md",
        "references/../SKILL.md",
        "./SKILL.md",
        "a\\b",
        "",
    ] {
        let err = catalog.read_file("pdf", bad).await.unwrap_err();
        assert!(matches!(err, Error::InvalidSkillPath { .. }), "{bad:?}: {err}");
    }
    assert!(matches!(
        catalog.read_skill("nope").await.unwrap_err(),
        Error::SkillNotFound(_)
    ));
    let (files, cut) = catalog.list_files("pdf", 4, 100).await.unwrap();
    assert_eq!(files, ["SKILL.md", "references/forms.md", "scripts/fill.py"]);
    assert!(!cut);
    let (files, cut) = catalog.list_files("pdf", 4, 2).await.unwrap();
    assert_eq!(files.len(), 2);
    assert!(cut);
}

async fn refresh_reads_only_what_changed(f: Fixture) {
    let tree = fill(f, &[]).await;
    for i in 0..6 {
        let path = VPath::new(format!("/base/s{i}/SKILL.md")).unwrap();
        tree.backend
            .put(&path, skill_md(&format!("s{i}"), "v1").into(), PutMode::Overwrite)
            .await
            .unwrap();
    }
    let watched = Watched::new(tree.backend.clone());
    let catalog = Catalog::load(watched.clone(), sources(&["/base"]), LoadOptions::default()).await;
    assert_eq!(catalog.skills().len(), 6);
    assert_eq!(watched.reads(), 6);

    watched.reset();
    let same = catalog.refresh().await;
    assert_eq!(watched.reads(), 0, "an unchanged catalog reads no SKILL.md");
    assert_eq!(same.skills(), catalog.skills());

    let path = VPath::new("/base/s3/SKILL.md").unwrap();
    tree.backend
        .put(&path, skill_md("s3", "v2, longer").into(), PutMode::Overwrite)
        .await
        .unwrap();
    tree.backend
        .put(
            &VPath::new("/base/new/SKILL.md").unwrap(),
            skill_md("new", "new").into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    watched.reset();
    let changed = same.refresh().await;
    assert_eq!(watched.reads(), 2, "only the changed and the new skill are read");
    assert_eq!(changed.get("s3").unwrap().metadata.description, "v2, longer");
    assert!(changed.get("new").is_some());
}

async fn refresh_during_an_outage_keeps_the_last_good_catalog(f: Fixture) {
    let tree = fill(f, &[]).await;
    tree.backend
        .put(
            &VPath::new("/base/a/SKILL.md").unwrap(),
            skill_md("a", "v1").into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    let watched = Watched::new(tree.backend.clone());
    let catalog = Catalog::load(watched.clone(), sources(&["/base"]), LoadOptions::default()).await;
    watched.fail_lists.store(true, Ordering::SeqCst);
    let stale = catalog.refresh().await;
    assert!(stale.is_stale());
    assert_eq!(stale.get("a").unwrap().metadata.description, "v1");
    assert_eq!(
        diagnostic_kinds(&stale),
        [("source_stale", Severity::Warning, Some("/base"))]
    );

    tree.backend
        .put(
            &VPath::new("/base/a/SKILL.md").unwrap(),
            skill_md("a", "v2").into(),
            PutMode::Overwrite,
        )
        .await
        .unwrap();
    watched.fail_lists.store(false, Ordering::SeqCst);
    let fresh = stale.refresh().await;
    assert!(!fresh.is_stale());
    assert_eq!(fresh.get("a").unwrap().metadata.description, "v2");
}

async fn a_source_that_fails_at_first_load_is_an_error_not_a_panic(f: Fixture) {
    let tree = fill(f, &[("/base/a/SKILL.md", &skill_md("a", "a"))]).await;
    let watched = Watched::new(tree.backend.clone());
    watched.fail_lists.store(true, Ordering::SeqCst);
    let catalog = Catalog::load(watched, sources(&["/base"]), LoadOptions::default()).await;
    assert!(catalog.skills().is_empty());
    assert_eq!(
        diagnostic_kinds(&catalog),
        [("source_unavailable", Severity::Error, Some("/base"))]
    );
}

async fn filters_enable_disable_include_and_exclude(f: Fixture) {
    let files: Vec<(String, Vec<u8>)> = ["pdf-a", "pdf-b", "docx", "legacy"]
        .iter()
        .map(|n| (format!("/base/{n}/SKILL.md"), skill_md(n, n)))
        .collect();
    let files: Vec<(&str, &[u8])> = files.iter().map(|(p, d)| (p.as_str(), d.as_slice())).collect();
    let tree = fill(f, &files).await;
    let source = Source::parse("/base")
        .unwrap()
        .with_exclude(Patterns::new(["legacy"]).unwrap());
    let options = LoadOptions {
        filter: SkillFilter::new(None, Patterns::new(["pdf-*"]).unwrap()),
        ..LoadOptions::default()
    };
    let catalog = Catalog::load(
        tree.backend.clone(),
        SourceList::from_sources([source]).unwrap(),
        options,
    )
    .await;
    let enabled: Vec<(&str, bool)> = catalog.skills().iter().map(|s| (s.name(), s.enabled)).collect();
    assert_eq!(enabled, [("docx", true), ("pdf-a", false), ("pdf-b", false)]);
    let prompt = render(&catalog, &PromptOptions::default());
    assert!(prompt.text.contains("**docx**"));
    assert!(!prompt.text.contains("pdf-a"));
}

async fn prompts_render_in_both_styles(f: Fixture) {
    let pdf = b"---\nname: pdf\ndescription: Fill <forms> & \"more\"\nlicense: MIT\ncompatibility: Python 3\nallowed-tools: Read Bash\n---\n";
    let files: [(&str, &[u8]); 1] = [("/base/pdf/SKILL.md", pdf)];
    let (catalog, _tree) = load(f, &files, &["/base", "/team"]).await;
    let markdown = render(&catalog, &PromptOptions::default()).text;
    assert!(markdown.contains("- **pdf**: Fill \\<forms\\> & \"more\" (license: MIT; compatibility: Python 3)"));
    assert!(markdown.contains("  - allowed tools: Read, Bash"));
    assert!(markdown.contains("  - instructions: `/base/pdf/SKILL.md`"));
    assert!(markdown.contains("- **Team**: `/team/` (highest priority)"));
    assert!(markdown.contains("source `team` (/team): source_not_found"));
    let xml = render(
        &catalog,
        &PromptOptions {
            style: PromptStyle::Xml,
            ..PromptOptions::default()
        },
    )
    .text;
    assert!(xml.contains(
        "<skill>\n<name>pdf</name>\n<description>Fill &lt;forms&gt; &amp; &quot;more&quot;</description>\n<location>/base/pdf/SKILL.md</location>\n</skill>"
    ));
}

async fn a_budget_shortens_descriptions_then_drops_skills(f: Fixture) {
    let files: Vec<(String, Vec<u8>)> = (0..30)
        .map(|i| {
            (
                format!("/base/s{i:02}/SKILL.md"),
                skill_md(&format!("s{i:02}"), &"d".repeat(300)),
            )
        })
        .collect();
    let files: Vec<(&str, &[u8])> = files.iter().map(|(p, d)| (p.as_str(), d.as_slice())).collect();
    let (catalog, _tree) = load(f, &files, &["/base"]).await;
    let full = render(&catalog, &PromptOptions::default());
    let full_len = full.text.chars().count();

    let shortened = render(
        &catalog,
        &PromptOptions {
            max_chars: Some(full_len - 2000),
            ..PromptOptions::default()
        },
    );
    assert!(shortened.text.chars().count() <= full_len - 2000);
    assert_eq!(shortened.omitted, 0);
    assert_eq!(shortened.shortened, 30);

    let dropped = render(
        &catalog,
        &PromptOptions {
            max_chars: Some(2500),
            ..PromptOptions::default()
        },
    );
    assert!(dropped.text.chars().count() <= 2500, "{}", dropped.text.len());
    assert!(dropped.omitted > 0);
    assert!(
        dropped
            .text
            .contains(&format!("{} more skills left out", dropped.omitted))
    );
}

/// The budget is a hard cap: below the fixed text, nothing is rendered and
/// the prompt says how long that text is; at every budget the text fits.
async fn prompt_max_chars_is_a_hard_cap(f: Fixture) {
    let files: Vec<(String, Vec<u8>)> = (0..8)
        .map(|i| {
            (
                format!("/base/s{i}/SKILL.md"),
                skill_md(&format!("s{i}"), &"d".repeat(120)),
            )
        })
        .collect();
    let files: Vec<(&str, &[u8])> = files.iter().map(|(p, d)| (p.as_str(), d.as_slice())).collect();
    let (catalog, _tree) = load(f, &files, &["/base"]).await;
    let at = |budget: usize| {
        render(
            &catalog,
            &PromptOptions {
                max_chars: Some(budget),
                ..PromptOptions::default()
            },
        )
    };
    let nothing = at(500);
    assert_eq!(nothing.text, "");
    assert_eq!(nothing.omitted, 8);
    let frame = nothing.frame_chars.expect("the fixed text is over 500 characters");
    assert!(frame > 500);
    assert_eq!(at(frame).frame_chars, None);
    assert!(!at(frame).text.is_empty());
    let full = render(&catalog, &PromptOptions::default()).text.chars().count();
    for budget in (0..full + 10).step_by(13) {
        let prompt = at(budget);
        assert!(
            prompt.text.chars().count() <= budget,
            "{budget}: {}",
            prompt.text.chars().count()
        );
        assert_eq!(prompt.frame_chars.is_some(), prompt.text.is_empty(), "{budget}");
    }
}

skillstore::backends::backend_matrix!(
    prompt_max_chars_is_a_hard_cap,
    merge_order_matches_deepagents,
    the_frontmatter_name_is_the_override_key,
    one_bad_skill_never_hides_the_others,
    directories_without_skill_md_and_loose_files_are_not_skills,
    an_oversized_skill_md_is_refused_from_its_size,
    a_frontmatter_longer_than_the_first_read_is_read_whole,
    line_endings_bom_and_eof_fences_all_load,
    unicode_names_load,
    long_descriptions_are_cut_with_a_warning,
    reads_go_through_the_winning_source_and_stay_inside,
    refresh_reads_only_what_changed,
    refresh_during_an_outage_keeps_the_last_good_catalog,
    a_source_that_fails_at_first_load_is_an_error_not_a_panic,
    filters_enable_disable_include_and_exclude,
    prompts_render_in_both_styles,
    a_budget_shortens_descriptions_then_drops_skills,
    a_lowercase_skill_md_loads_with_a_warning,
    source_unavailable_messages_name_the_path_and_kind_only,
    a_report_walks_the_skill_once,
);

/// `Catalog::report` walks a skill's directory once for its files and its
/// digest, and lists what a listing within `REPORT_LIMITS` lists; a skill
/// past those bounds is walked again, and reported as before.
async fn a_report_walks_the_skill_once(f: Fixture) {
    let deep = "/base/deep/a/b/c/d/e/f/g/far.md";
    let tree = fill(
        f,
        &[
            ("/base/pdf/SKILL.md", &skill_md("pdf", "p")),
            ("/base/pdf/references/forms.md", b"forms"),
            ("/base/pdf/scripts/fill.py", b"print()"),
            ("/base/deep/SKILL.md", &skill_md("deep", "d")),
            (deep, b"far"),
        ],
    )
    .await;
    let watched = Watched::new(tree.backend.clone());
    let catalog = Catalog::load(watched.clone(), sources(&["/base"]), LoadOptions::default()).await;
    for (name, walks, dirs) in [("pdf", 1, 3), ("deep", 2, 8)] {
        watched.reset();
        let report = catalog.report(name).await.unwrap();
        let lists = watched.lists.load(Ordering::SeqCst);
        let narrow = catalog
            .skill_files(name, skillstore::catalog::REPORT_LIMITS)
            .await
            .unwrap();
        assert_eq!(report.files, narrow.relatives(), "{name}");
        assert_eq!(report.truncated, narrow.truncated, "{name}");
        assert!(report.skill.digest.is_some(), "{name}");
        let whole = catalog.skill_digest(name).await.unwrap();
        assert_eq!(report.skill.digest.as_deref(), Some(whole.digest.as_str()), "{name}");
        // The catalog lists each directory of the skill once per walk (the
        // deep one's second walk stops at the report's depth).
        let once = if walks == 1 { dirs } else { dirs + 7 };
        assert!(
            lists > 0 && lists <= once,
            "{name}: {lists} listings, expected at most {once}"
        );
        if walks == 1 {
            assert_eq!(lists, dirs, "{name}: one walk lists each of its directories once");
        }
    }
}

async fn a_lowercase_skill_md_loads_with_a_warning(f: Fixture) {
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("/base/lower/skill.md", skill_md("lower", "read from skill.md")),
        ("/base/both/SKILL.md", skill_md("both", "upper wins")),
        ("/base/both/skill.md", skill_md("both", "lower loses")),
    ];
    let files: Vec<(&str, &[u8])> = files.iter().map(|(p, d)| (*p, d.as_slice())).collect();
    let tree = fill(f, &files).await;
    let watched = Watched::new(tree.backend.clone());
    let catalog = Catalog::load(watched.clone(), sources(&["/base"]), LoadOptions::default()).await;
    let lower = catalog.get("lower").unwrap();
    assert_eq!(lower.path.as_str(), "/base/lower/skill.md");
    assert_eq!(lower.metadata.description, "read from skill.md");
    assert!(
        catalog
            .read_skill("lower")
            .await
            .unwrap()
            .starts_with(b"---\nname: lower")
    );
    assert_eq!(catalog.get("both").unwrap().metadata.description, "upper wins");
    assert_eq!(
        diagnostic_kinds(&catalog),
        [("lowercase_skill_md", Severity::Warning, Some("/base/lower/skill.md"))]
    );

    watched.reset();
    let again = catalog.refresh().await;
    assert_eq!(watched.reads(), 0, "an unchanged skill.md is not read again");
    assert_eq!(again.get("lower").unwrap().path.as_str(), "/base/lower/skill.md");
    assert_eq!(diagnostic_kinds(&again), diagnostic_kinds(&catalog));

    let reloaded = catalog.reload_skill("base", "lower").await.unwrap();
    assert_eq!(reloaded.get("lower").unwrap().path.as_str(), "/base/lower/skill.md");
}

/// Finding 7: what a backend says about a failure (here a detail standing
/// for an endpoint and bucket) stays out of diagnostics; they name the
/// virtual path and the kind.
async fn source_unavailable_messages_name_the_path_and_kind_only(f: Fixture) {
    let tree = fill(f, &[("/base/a/SKILL.md", &skill_md("a", "a"))]).await;
    let watched = Watched::new(tree.backend.clone());
    watched.fail_lists.store(true, Ordering::SeqCst);
    let failed = Catalog::load(watched.clone(), sources(&["/base"]), LoadOptions::default()).await;
    watched.fail_lists.store(false, Ordering::SeqCst);
    let loaded = failed.refresh().await;
    watched.fail_lists.store(true, Ordering::SeqCst);
    let stale = loaded.refresh().await;
    for catalog in [&failed, &stale] {
        let d = &catalog.diagnostics()[0];
        assert!(!d.message.contains("injected outage"), "{}", d.message);
        assert!(d.message.contains("unavailable"), "{}", d.message);
    }
    assert_eq!(
        failed.diagnostics()[0].message,
        "cannot list the source /base: backend unavailable"
    );
}
