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
