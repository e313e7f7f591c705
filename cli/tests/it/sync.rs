//! `sync`: the tree matches `read` and `prompt`, an unreachable source leaves
//! it as it was, and `--watch` follows changes until SIGTERM.

use assert_cmd::Command;
use skillstore::backends::testkit::s3_server::S3TestServer;

use crate::support::{Running, eventually, files_under, run, s3_env, skillstore};

/// `sync DIR` writes every winner's files as `read` serves them, a second
/// sync changes nothing, and every location a prompt names under
/// `--location-root DIR` is a file of the synced tree.
#[test]
fn sync_matches_read_and_prompt_locations_exist() {
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("skills");
    let first = run(skillstore().args(["sync", dir.to_str().unwrap(), "--json"]));
    assert_eq!(first.code, 0, "{}", first.stderr);
    let report = first.json();
    assert_eq!(report["switched"], true);

    let listed = run(skillstore().args(["list", "--json"])).json();
    let expected: Vec<String> = listed["skills"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|s| s["enabled"] != false)
        .map(|s| s["name"].as_str().unwrap().to_owned())
        .collect();
    let synced = files_under(&dir);
    let mut synced_skills: Vec<&str> = synced.keys().filter_map(|k| k.strip_suffix("/SKILL.md")).collect();
    synced_skills.sort_unstable();
    let mut expected_sorted = expected.clone();
    expected_sorted.sort_unstable();
    assert_eq!(synced_skills, expected_sorted);
    for (relative, bytes) in &synced {
        let (name, inside) = relative.split_once('/').unwrap();
        let mut read = skillstore();
        read.arg("read").arg(name);
        if inside != "SKILL.md" {
            read.arg(inside);
        }
        let served = run(&mut read);
        assert_eq!(served.code, 0, "{relative}: {}", served.stderr);
        assert_eq!(&served.stdout, bytes, "{relative} differs from `read`");
    }

    let again = run(skillstore().args(["sync", dir.to_str().unwrap(), "--json"]));
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.json()["switched"], false);
    assert_eq!(again.json()["files_copied"], 0);

    let prompt = run(skillstore().args(["prompt", "--style", "xml", "--location-root", dir.to_str().unwrap()]));
    assert_eq!(prompt.code, 0, "{}", prompt.stderr);
    let text = prompt.text();
    let locations: Vec<&str> = text
        .split("<location>")
        .skip(1)
        .map(|rest| rest.split("</location>").next().unwrap())
        .collect();
    assert_eq!(locations.len(), expected.len(), "{text}");
    for location in locations {
        assert!(
            std::path::Path::new(location).is_file(),
            "{location} is not in the synced tree"
        );
    }
}

/// A source that cannot be listed contributes no skills; a sync then would
/// delete that source's skills from the tree. It exits 3 and the tree keeps
/// its generation.
#[test]
fn sync_keeps_the_tree_when_a_source_is_unreachable() {
    let server = S3TestServer::shared();
    let bucket = server.create_bucket();
    server.put_raw(
        &bucket,
        "team/remote/SKILL.md",
        b"---\nname: remote\ndescription: From S3.\n---\nBody.\n",
    );
    let local = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(local.path().join("base/local")).unwrap();
    std::fs::write(
        local.path().join("base/local/SKILL.md"),
        "---\nname: local\ndescription: On disk.\n---\nBody.\n",
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("skills");
    let root = format!("/={}", local.path().display());
    let team = format!("/team=s3://{bucket}/team");
    let sync = |cmd: &mut Command| {
        cmd.args([
            "--mount",
            &root,
            "--mount",
            &team,
            "--source",
            "/base/",
            "--source",
            "/team/",
            "sync",
            dir.to_str().unwrap(),
        ]);
        run(cmd)
    };
    let mut reachable = skillstore();
    s3_env(&mut reachable, server);
    let first = sync(&mut reachable);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert!(dir.join("remote/SKILL.md").is_file());

    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut unreachable = skillstore();
    s3_env(&mut unreachable, server);
    unreachable.env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"));
    let second = sync(&mut unreachable);
    assert_eq!(second.code, 3, "{}", second.stderr);
    assert!(second.stderr.contains("`team`"), "{}", second.stderr);
    assert!(
        !second.stderr.contains("127.0.0.1") && !second.stderr.contains(&bucket),
        "{}",
        second.stderr
    );
    assert!(
        dir.join("remote/SKILL.md").is_file(),
        "the unreachable source's skill was removed"
    );
    assert!(dir.join("local/SKILL.md").is_file());
}

fn skill(root: &std::path::Path, layer: &str, name: &str, description: &str) {
    std::fs::create_dir_all(root.join(layer).join(name)).unwrap();
    std::fs::write(
        root.join(layer).join(name).join("SKILL.md"),
        format!("---\nname: {name}\ndescription: {description}\n---\nBody.\n"),
    )
    .unwrap();
}

/// `sync --watch` follows a change in its sources and ends with exit 0 on
/// SIGTERM.
#[test]
fn sync_watch_follows_changes_and_exits_0_on_sigterm() {
    let tree = tempfile::tempdir().unwrap();
    skill(tree.path(), "base", "alpha", "First.");
    std::fs::create_dir_all(tree.path().join("team")).unwrap();
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("skills");
    let root = format!("/={}", tree.path().display());
    let watching = Running::start(
        &[
            "--mount",
            &root,
            "--source",
            "/base/",
            "--source",
            "/team/",
            "sync",
            dir.to_str().unwrap(),
            "--watch",
            "100ms",
        ],
        out.path(),
    );
    eventually("the first sync", || dir.join("alpha/SKILL.md").is_file());
    skill(tree.path(), "team", "alpha", "Second.");
    skill(tree.path(), "team", "beta", "Added.");
    eventually("the change in the tree", || {
        std::fs::read_to_string(dir.join("alpha/SKILL.md")).is_ok_and(|s| s.contains("Second."))
            && dir.join("beta/SKILL.md").is_file()
    });
    std::fs::remove_dir_all(tree.path().join("team/beta")).unwrap();
    eventually("the removal", || !dir.join("beta").exists());
    let (code, stderr) = watching.stop();
    assert_eq!(code, Some(0), "{stderr}");
}

/// Sync reports what it did, by content: a file touched without a change
/// is neither an update nor copied again (its live copy stays, same inode);
/// a file changed in the tree is counted as repaired, and the tree keeping
/// the changed copy is reported when it is kept, then as kept before.
#[test]
fn sync_reports_by_content_and_counts_repairs_and_kept_trees() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    crate::support::write(
        root,
        "skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Read PDFs.\n---\nSteps.\n",
    );
    crate::support::write(root, "skills/pdf/run.sh", "echo run\n");
    let sync = |extra: &[&str]| {
        let mut cmd = crate::support::skillstore_in(root);
        cmd.args(["--source", "/skills/", "sync", "out"]).args(extra);
        run(&mut cmd)
    };
    let touch = |relative: &str| {
        let file = std::fs::File::options().write(true).open(root.join(relative)).unwrap();
        let later = file.metadata().unwrap().modified().unwrap() + std::time::Duration::from_secs(10);
        file.set_modified(later).unwrap();
    };
    let inode = |relative: &str| std::fs::metadata(root.join(relative)).unwrap().ino();

    let first = sync(&[]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    assert_eq!(
        first.text(),
        "synced 1 skill into out: 1 added, 0 updated, 0 removed, 0 repaired (2 files copied, 0 unchanged)\n"
    );
    let before = inode("out/pdf/SKILL.md");

    touch("skills/pdf/SKILL.md");
    let touched = sync(&[]);
    assert_eq!(touched.text(), "out is up to date (1 skill)\n", "{}", touched.stderr);
    assert_eq!(inode("out/pdf/SKILL.md"), before, "a touched file is not copied again");
    assert_eq!(sync(&[]).text(), "out is up to date (1 skill)\n");

    touch("skills/pdf/SKILL.md");
    crate::support::write(root, "skills/pdf/run.sh", "echo ran\n");
    let changed = sync(&["--json"]).json();
    assert_eq!(changed["switched"], true);
    assert_eq!(changed["updated"], serde_json::json!(["pdf"]));
    assert_eq!(changed["files_updated"], serde_json::json!(["pdf/run.sh"]));
    assert_eq!(changed["files_copied"], 1);
    assert_eq!(changed["files_linked"], 1);
    assert_eq!(inode("out/pdf/SKILL.md"), before);
    assert_eq!(
        std::fs::read_to_string(root.join("out/pdf/run.sh")).unwrap(),
        "echo ran\n"
    );

    std::fs::write(root.join("out/pdf/run.sh"), "echo mine\n").unwrap();
    let repaired = sync(&["--json"]);
    let report = repaired.json();
    assert_eq!(report["repaired"], serde_json::json!(["pdf/run.sh"]));
    assert_eq!(report["updated"], serde_json::json!([]));
    assert_eq!(report["kept_now"], serde_json::json!([]));
    let copies = report["repaired_copies"].as_str().unwrap().to_owned();
    assert!(copies.starts_with(".out.skillstore/retired-"), "{copies}");
    assert_eq!(
        repaired.stderr,
        format!(
            "warning: pdf/run.sh was changed in the tree since sync wrote it; written again from the source \
             (the changed copy is {copies}/pdf/run.sh; the next sync that changes the tree keeps it)\n"
        )
    );
    assert_eq!(
        std::fs::read_to_string(root.join("out/pdf/run.sh")).unwrap(),
        "echo ran\n"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("out").join(format!("../{copies}/pdf/run.sh"))).unwrap(),
        "echo mine\n"
    );

    std::fs::write(root.join("out/pdf/run.sh"), "echo mine again\n").unwrap();
    let text = sync(&[]);
    assert_eq!(
        text.text(),
        "synced 1 skill into out: 0 added, 0 updated, 0 removed, 1 repaired (1 file copied, 1 unchanged); 1 tree kept\n"
    );
    let kept = sync(&["--json"]).json()["kept"][0].as_str().unwrap().to_owned();
    assert!(
        text.stderr.contains(&format!(
            "warning: {kept} holds files sync did not write or that were changed; it is kept: look through it and remove it\n"
        )),
        "{}",
        text.stderr
    );
    assert_eq!(
        std::fs::read_to_string(root.join(format!("{kept}/pdf/run.sh"))).unwrap(),
        "echo mine\n"
    );
    let after = sync(&[]);
    assert_eq!(after.text(), "out is up to date (1 skill)\n");
    assert_eq!(
        after.stderr,
        format!("note: {kept}, kept by an earlier sync, is still there: look through it and remove it\n")
    );
}
