//! What a new user meets on the first day, through the command: the
//! output the README and the book promise, and messages that say why.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::support::{repo, run, skillstore_in as skillstore, write};

/// A source `skills/` holding `pdf` and `forms`, each with a script.
fn two_skills() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["forms", "pdf"] {
        write(
            dir.path(),
            &format!("skills/{name}/SKILL.md"),
            &format!("---\nname: {name}\ndescription: The {name} skill.\n---\nSteps.\n"),
        );
        write(dir.path(), &format!("skills/{name}/scripts/run.sh"), "echo run\n");
    }
    dir
}

/// `publish` on a terminal: the bar's bytes are bytes and its files are
/// files (it showed `9.04 KiB/9.04 KiB 9260 files`, the byte count as
/// files).
#[test]
fn publish_progress_counts_files_as_files() {
    if std::process::Command::new("script").arg("--version").output().is_err() {
        panic!("this test needs script(1) (util-linux) for a terminal");
    }
    let dir = tempfile::tempdir().unwrap();
    let mut files = 0;
    for layer in ["base", "team"] {
        for name in ["one", "two", "three"] {
            write(
                dir.path(),
                &format!("tree/{layer}/{name}/SKILL.md"),
                &format!(
                    "---\nname: {name}\ndescription: The {name} skill.\n---\n{}\n",
                    "Step. ".repeat(400)
                ),
            );
            write(
                dir.path(),
                &format!("tree/{layer}/{name}/references/notes.md"),
                &"notes\n".repeat(300),
            );
            files += 2;
        }
    }
    let binary = assert_cmd::cargo::cargo_bin("skillstore");
    let line = format!("'{}' publish tree published", binary.display());
    let out = std::process::Command::new("script")
        .args(["-qefc", &line, "/dev/null"])
        .current_dir(dir.path())
        .env("XDG_CACHE_HOME", dir.path().join(".test-cache"))
        .env("TERM", "xterm")
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("published {files} file(s),")), "{text}");
    let mut counts = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find(" files") {
        counts.push(rest[..at].rsplit(' ').next().unwrap_or("").to_owned());
        rest = &rest[at + " files".len()..];
    }
    assert!(!counts.is_empty(), "no progress bar drawn: {text:?}");
    for count in &counts {
        let (done, total) = count
            .split_once('/')
            .unwrap_or_else(|| panic!("the bar counts `{count} files`, not DONE/TOTAL files: {text:?}"));
        assert_eq!(total, files.to_string(), "{text:?}");
        assert!(done.parse::<usize>().unwrap() <= files, "{text:?}");
    }
}

/// The sandboxes page's `mount` at a directory that does not exist: the
/// error names the path and says what to do.
#[test]
fn mount_at_a_missing_directory_names_it() {
    let dir = two_skills();
    let missing = dir.path().join("srv/skills-live");
    let out = run(skillstore(dir.path())
        .args(["--source", "/skills/", "mount"])
        .arg(&missing));
    let shown = missing.display();
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (
            1,
            format!("error: cannot mount at {shown}: no such directory (create it first: mkdir -p {shown})\n").as_str()
        ),
        "{}",
        out.text()
    );
    std::fs::write(dir.path().join("file"), "").unwrap();
    let out = run(skillstore(dir.path()).args(["--source", "/skills/", "mount", "file"]));
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (
            1,
            "error: cannot mount at file: not a directory (the mount point must be an existing, empty directory)\n"
        )
    );
}

/// `list --digests` prints each skill's digest in a DIGEST column, the
/// same digest `--json` gives.
#[test]
fn list_digests_prints_a_digest_column() {
    let dir = two_skills();
    let json = run(skillstore(dir.path()).args(["--source", "/skills/", "list", "--json", "--digests"]));
    let json: Value = serde_json::from_str(&json.text()).unwrap();
    let digests: BTreeMap<String, String> = json["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["digest"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let out = run(skillstore(dir.path()).args(["--source", "/skills/", "list", "--digests"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let pad = " ".repeat("sha256:".len() + 64 - "DIGEST".len());
    let expected = format!(
        "NAME   SOURCE  SHADOWS  ENABLED  DIGEST{pad}  DESCRIPTION\n\
         forms  skills        0  yes      {}  The forms skill.\n\
         pdf    skills        0  yes      {}  The pdf skill.\n",
        digests["forms"], digests["pdf"]
    );
    assert_eq!(out.text(), expected);
    // Without --digests, no column.
    let out = run(skillstore(dir.path()).args(["--source", "/skills/", "list"]));
    assert_eq!(
        out.text(),
        "NAME   SOURCE  SHADOWS  ENABLED  DESCRIPTION\n\
         forms  skills        0  yes      The forms skill.\n\
         pdf    skills        0  yes      The pdf skill.\n"
    );
}

/// `verify` speaks the book's words (`matches`, `mismatch`, `not_locked`,
/// `no_lock`) as text and JSON, and `lock` is a string in every report.
#[test]
fn verify_statuses_are_the_books_words_with_one_json_type() {
    let dir = two_skills();
    let root = dir.path();
    let digest = |name: &str| -> String {
        let out = run(skillstore(root).args(["--source", "/skills/", "show", name, "--json"]));
        let json: Value = serde_json::from_str(&out.text()).unwrap();
        json["digest"].as_str().unwrap().to_owned()
    };
    let out = run(skillstore(root).args(["--source", "/skills/", "verify", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let json: Value = serde_json::from_str(&out.text()).unwrap();
    for skill in json["skills"].as_array().unwrap() {
        assert_eq!(skill["lock"], "no_lock", "{json}");
    }
    let out = run(skillstore(root).args(["--source", "/skills/", "verify"]));
    assert_eq!(
        out.text(),
        format!(
            "forms  {}  no_lock  not_checked\npdf  {}  no_lock  not_checked\n",
            digest("forms"),
            digest("pdf")
        )
    );

    assert_eq!(run(skillstore(root).args(["--source", "/skills/", "lock"])).code, 0);
    let before = digest("pdf");
    write(root, "skills/pdf/scripts/run.sh", "echo rum\n");
    let after = digest("pdf");
    let out = run(skillstore(root).args(["--source", "/skills/", "--locked", "verify"]));
    assert_eq!(out.code, 3);
    assert_eq!(
        out.text(),
        format!(
            "forms  {}  matches  not_checked\npdf  {after}  mismatch  not_checked  (the lock says {before})\n",
            digest("forms")
        )
    );
    let out = run(skillstore(root).args(["--source", "/skills/", "--locked", "verify", "--json"]));
    assert_eq!(out.code, 3);
    let json: Value = serde_json::from_str(&out.text()).unwrap();
    assert_eq!(json["skills"][0]["lock"], "matches", "{json}");
    assert_eq!(json["skills"][0].get("locked_digest"), None, "{json}");
    assert_eq!(json["skills"][1]["lock"], "mismatch", "{json}");
    assert_eq!(json["skills"][1]["locked_digest"], before.as_str(), "{json}");
    assert_eq!(json["skills"][1]["locked_source"], "skills", "{json}");

    // A skill the lock does not hold.
    write(
        root,
        "skills/new/SKILL.md",
        "---\nname: new\ndescription: New.\n---\nBody.\n",
    );
    let out = run(skillstore(root).args(["--source", "/skills/", "--locked", "verify", "--json"]));
    let json: Value = serde_json::from_str(&out.text()).unwrap();
    assert_eq!(json["skills"][1]["name"], "new");
    assert_eq!(json["skills"][1]["lock"], "not_locked", "{json}");
}

/// The options `--help` lists for each command, without the global ones,
/// as `--long`, or `-s|--long` when it has a short form too.
fn help_options(args: &[&str]) -> (BTreeSet<String>, Vec<String>) {
    let out = run(skillstore(&repo()).args(args).arg("--help"));
    assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    let mut options = BTreeSet::new();
    let mut commands = Vec::new();
    let mut section = "";
    for line in out.text().lines() {
        if !line.starts_with(' ') {
            section = line;
            continue;
        }
        if section == "Commands:" && line.starts_with("  ") && !line.starts_with("   ") {
            let name = line.split_whitespace().next().unwrap().to_owned();
            if name != "help" {
                commands.push(name);
            }
        }
        if section == "Options:" || section == "Global options:" {
            let trimmed = line.trim_start();
            let indent = line.len() - trimmed.len();
            if (indent == 2 || indent == 6) && trimmed.starts_with('-') {
                let flags = trimmed.split("  ").next().unwrap();
                let names: Vec<String> = flags
                    .split(", ")
                    .map(|flag| {
                        flag.chars()
                            .take_while(|c| *c == '-' || c.is_ascii_alphanumeric())
                            .collect()
                    })
                    .collect();
                // `-o|--output`: either form stands for the option.
                options.insert(names.join("|"));
            }
        }
    }
    (options, commands)
}

/// The README's synopsis of each command (`config check`, `config schema`
/// apart): its line up to its description (after two spaces or more);
/// `skillstore` for the global options' lines.
fn readme_synopsis() -> BTreeMap<String, String> {
    let readme = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let start = readme
        .find("## The command\n\n```text\n")
        .expect("the README's synopsis");
    let block = &readme[start..];
    let block = &block[block.find("```text\n").unwrap() + 8..];
    let block = &block[..block.find("```").unwrap()];
    let mut synopsis: BTreeMap<String, String> = BTreeMap::new();
    for line in block.lines() {
        if line.starts_with("skillstore ") || line.starts_with("           [") {
            synopsis.entry("skillstore".into()).or_default().push_str(line);
            continue;
        }
        let Some(rest) = line.strip_prefix("  ") else { continue };
        if rest.starts_with(' ') || rest.is_empty() {
            continue;
        }
        let usage = rest.split("  ").next().unwrap();
        let mut words = usage.split_whitespace();
        let mut name = words.next().unwrap().to_owned();
        if name.ends_with(':') {
            continue;
        }
        if name == "config" {
            name = format!("config {}", words.next().unwrap());
        }
        synopsis.insert(name, usage.to_owned());
    }
    synopsis
}

/// The flags (`--long`, `-s`) a synopsis line names.
fn flags_in(text: &str) -> BTreeSet<String> {
    let mut flags = BTreeSet::new();
    let bytes: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < bytes.len() {
        let starts = bytes[i] == '-' && (i == 0 || matches!(bytes[i - 1], '[' | ' ' | '|' | '('));
        if starts {
            let flag: String = bytes[i..]
                .iter()
                .take_while(|c| **c == '-' || c.is_ascii_alphanumeric())
                .collect();
            if flag.len() > 1 && flag != "-" {
                i += flag.len();
                flags.insert(flag);
                continue;
            }
        }
        i += 1;
    }
    flags
}

/// Every option `--help` shows is in the README's synopsis, and every flag
/// the synopsis names is one `--help` shows: the two cannot drift apart.
#[test]
fn the_readme_synopsis_matches_the_help() {
    let synopsis = readme_synopsis();
    let (global, commands) = help_options(&[]);
    let mut global: BTreeSet<String> = global
        .into_iter()
        .map(|f| f.rsplit('|').next().unwrap().to_owned())
        .collect();
    global.insert("--version".into());
    let mut problems = Vec::new();
    let top = flags_in(&synopsis["skillstore"]);
    if top != global {
        problems.push(format!("skillstore: README {top:?}, --help {global:?}"));
    }
    for command in &commands {
        let (options, subcommands) = help_options(&[command.as_str()]);
        let own: BTreeSet<String> = options
            .iter()
            .filter(|f| !global.contains(f.rsplit('|').next().unwrap()))
            .cloned()
            .collect();
        if command == "skill" {
            let listed = synopsis.get("skill").cloned().unwrap_or_default();
            let listed: BTreeSet<&str> = listed.split_whitespace().nth(1).unwrap_or("").split('|').collect();
            let shown: BTreeSet<&str> = subcommands.iter().map(String::as_str).collect();
            if listed != shown {
                problems.push(format!("skill: README {listed:?}, --help {shown:?}"));
            }
            continue;
        }
        let names: Vec<String> = if subcommands.is_empty() {
            vec![command.clone()]
        } else {
            subcommands.iter().map(|s| format!("{command} {s}")).collect()
        };
        for name in names {
            let Some(line) = synopsis.get(&name) else {
                problems.push(format!("{name}: not in the README's synopsis"));
                continue;
            };
            let own = if name.contains(' ') {
                let args: Vec<&str> = name.split(' ').collect();
                let (options, _) = help_options(&args);
                options
                    .iter()
                    .filter(|f| !global.contains(f.rsplit('|').next().unwrap()))
                    .cloned()
                    .collect()
            } else {
                own.clone()
            };
            let listed = flags_in(line);
            let shown: BTreeSet<String> = own;
            let missing: Vec<&String> = shown
                .iter()
                .filter(|f| !f.split('|').any(|form| listed.contains(form)))
                .collect();
            let extra: Vec<&String> = listed
                .iter()
                .filter(|l| !shown.iter().any(|f| f.split('|').any(|form| form == l.as_str())))
                .collect();
            if !missing.is_empty() || !extra.is_empty() {
                problems.push(format!(
                    "{name}: missing from the README {missing:?}, not in --help {extra:?}"
                ));
            }
        }
    }
    for name in synopsis.keys() {
        let command = name.split(' ').next().unwrap();
        if name != "skillstore" && !commands.iter().any(|c| c == command) {
            problems.push(format!("{name}: in the README, not a command"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// `--locked` is refused, as `--config` is, by every command that reads no
/// catalog, and their help leaves it out.
#[test]
fn locked_is_refused_where_no_catalog_is_read() {
    let dir = two_skills();
    let root = dir.path();
    for (args, shown) in [
        (vec!["validate", "skills/pdf"], "validate"),
        (vec!["pack", "skills/pdf"], "pack"),
        (vec!["sign", "skills/pdf", "--key", "key"], "sign"),
        (vec!["publish", "skills", "out"], "publish"),
        (vec!["token-hash"], "token-hash"),
        (vec!["completions", "bash"], "completions"),
        (vec!["man"], "man"),
        (vec!["config", "schema", "config"], "config schema"),
        (vec!["config", "check"], "config check"),
    ] {
        let out = run(skillstore(root).arg("--locked").args(&args));
        assert_eq!(
            (out.code, out.stderr.as_str(), out.text().as_str()),
            (
                2,
                format!("error: `{shown}` reads no catalog and takes no --locked\n").as_str(),
                ""
            ),
            "{args:?}"
        );
        let help = run(skillstore(root).args(&args[..1]).arg("--help"));
        assert!(!help.text().contains("--locked"), "{args:?}: {}", help.text());
    }
    // A command that reads a catalog still takes it.
    assert_eq!(run(skillstore(root).args(["--source", "/skills/", "lock"])).code, 0);
    let out = run(skillstore(root).args(["--source", "/skills/", "--locked", "list"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
}

/// `sign --key KEY.pub` with no private half beside it and no agent
/// holding it says what OpenSSH said and how to give the agent the key.
#[test]
fn sign_with_a_public_key_alone_names_the_agent() {
    let dir = two_skills();
    write(
        dir.path(),
        "key.pub",
        "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHc2H5xZ2v2ZbqzYH3w8u3l7l2M5n6b7n0p8o9q1r2s3 alice@example.org\n",
    );
    let out = run(skillstore(dir.path())
        .env_remove("SSH_AUTH_SOCK")
        .args(["sign", "skills/pdf", "--key", "key.pub"]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr
            .starts_with("error: `ssh-keygen -Y sign` could not sign with `key.pub`: ")
            && out
                .stderr
                .ends_with(" (a public key signs only through an ssh-agent holding its private half: `ssh-add KEY`)\n"),
        "{}",
        out.stderr
    );
    assert!(!dir.path().join("skills/pdf/.skillstore/signature").exists());
}

/// `show` and `read` of a skill the lock withholds say it exists and why,
/// not "no skill named".
#[test]
fn a_withheld_skill_is_said_to_exist_and_why() {
    let dir = two_skills();
    let root = dir.path();
    assert_eq!(run(skillstore(root).args(["--source", "/skills/", "lock"])).code, 0);
    let before = {
        let out = run(skillstore(root).args(["--source", "/skills/", "show", "pdf", "--json"]));
        let json: Value = serde_json::from_str(&out.text()).unwrap();
        json["digest"].as_str().unwrap().to_owned()
    };
    write(root, "skills/pdf/scripts/run.sh", "echo rum\n");
    let after = {
        let out = run(skillstore(root).args(["--source", "/skills/", "show", "pdf", "--json"]));
        let json: Value = serde_json::from_str(&out.text()).unwrap();
        json["digest"].as_str().unwrap().to_owned()
    };
    let expected = format!(
        "error: the skill `pdf` exists (/skills/pdf/SKILL.md) but is withheld: [lock_mismatch] its digest is {after}, \
         the lock says {before}; it is not served; `skillstore lock` accepts it, once reviewed\n"
    );
    for args in [
        vec!["show", "pdf"],
        vec!["read", "pdf"],
        vec!["read", "pdf", "scripts/run.sh"],
    ] {
        let out = run(skillstore(root).args(["--source", "/skills/", "--locked"]).args(&args));
        assert_eq!(
            (out.code, out.stderr.as_str(), out.text().as_str()),
            (3, expected.as_str(), ""),
            "{args:?}"
        );
    }
}

/// `--source` at one skill's directory warns to point at its parent.
#[test]
fn a_source_that_is_a_skill_says_to_point_at_its_parent() {
    let dir = two_skills();
    let out = run(skillstore(dir.path()).args(["--source", "/skills/pdf", "list"]));
    assert_eq!(
        (out.code, out.stderr.as_str(), out.text().as_str()),
        (
            0,
            "warning: [source_is_a_skill] /skills/pdf: the source is one skill's directory (it holds SKILL.md); \
             a source holds skill directories: point it at its parent (/skills)\n",
            "no skills found\n"
        )
    );
    let out = run(skillstore(dir.path()).args(["--source", "/skills/pdf", "list", "--json"]));
    let json: Value = serde_json::from_str(&out.text()).unwrap();
    assert_eq!(json["diagnostics"][0]["kind"], "source_is_a_skill", "{json}");
    let out = run(skillstore(dir.path()).args(["--source", "/skills/", "list"]));
    assert_eq!(out.stderr, "");
}

/// A skill laid out as a bare Git repository (`HEAD`, `objects/`, `refs/`,
/// a `config`) syncs without its `HEAD`, so the real `git` takes the synced
/// directory for no repository and never reads that `config`.
#[test]
fn a_bare_repository_layout_never_syncs_as_a_repository() {
    let dir = two_skills();
    let root = dir.path();
    write(root, "skills/pdf/HEAD", "ref: refs/heads/main\n");
    write(root, "skills/pdf/objects/info/packs", "x\n");
    write(root, "skills/pdf/refs/heads/keep", "x\n");
    write(root, "skills/pdf/config", "[core]\n\tpager = touch PWNED; cat\n");
    let out = run(skillstore(root).args(["--source", "/skills/", "sync", "out"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stderr.contains("/skills/pdf/HEAD") && out.stderr.contains("would make a directory a Git repository"),
        "{}",
        out.stderr
    );
    assert!(!root.join("out/pdf/HEAD").exists());
    assert!(root.join("out/pdf/config").exists());
    let git = std::process::Command::new("git")
        .args(["rev-parse", "--git-dir"])
        .current_dir(root.join("out/pdf"))
        .env("GIT_CEILING_DIRECTORIES", root)
        .output()
        .expect("git runs");
    assert!(!git.status.success(), "git found a repository in the synced skill");
}

/// A hidden directory of a source is never a skill, whatever it holds:
/// not the history (which keeps removed files' bytes), the audit log, a
/// `.git`, or any other.
#[test]
fn hidden_directories_of_a_source_are_never_skills() {
    let dir = two_skills();
    for hidden in [".history", ".audit", ".git", ".releases", ".secret"] {
        write(
            dir.path(),
            &format!("skills/{hidden}/SKILL.md"),
            "---\nname: hidden\ndescription: Hidden.\n---\nx\n",
        );
        write(
            dir.path(),
            &format!("skills/{hidden}/kept.jsonl"),
            "AWS_SECRET=hunter2\n",
        );
    }
    let out = run(skillstore(dir.path()).args(["--source", "/skills/", "list", "--json"]));
    let json: Value = serde_json::from_str(&out.text()).unwrap();
    let names: Vec<&str> = json["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["forms", "pdf"]);
    assert_eq!(json["diagnostics"], serde_json::json!([]), "{json}");
    let out = run(skillstore(dir.path()).args(["--source", "/skills/", "read", "hidden", "kept.jsonl"]));
    assert_eq!(out.code, 1, "{}", out.text());
    assert!(!out.text().contains("hunter2"));
}

/// `read NAME DIR/` (a trailing slash, as completion types it) lists the
/// files under that directory.
#[test]
fn read_of_a_directory_lists_its_files() {
    let dir = two_skills();
    write(dir.path(), "skills/pdf/references/forms.md", "forms\n");
    write(dir.path(), "skills/pdf/references/deep/fields.md", "fields\n");
    let out = run(skillstore(dir.path()).args(["--source", "/skills/", "read", "pdf", "references/"]));
    assert_eq!(
        (out.code, out.text().as_str(), out.stderr.as_str()),
        (0, "references/deep/fields.md\nreferences/forms.md\n", "")
    );
    let out = run(skillstore(dir.path()).args(["--source", "/skills/", "read", "pdf", "assets/"]));
    assert_eq!(
        (out.code, out.text().as_str(), out.stderr.as_str()),
        (1, "", "error: no files under `assets/` in the skill `pdf`\n")
    );
}

/// `search` exits 1 when nothing matches, as grep and rg do.
#[test]
fn search_exits_1_when_nothing_matches() {
    let dir = two_skills();
    let root = dir.path();
    let out = run(skillstore(root).args(["--source", "/skills/", "search", "zebra"]));
    assert_eq!(
        (out.code, out.text().as_str(), out.stderr.as_str()),
        (1, "", "no skill matches\n")
    );
    let out = run(skillstore(root).args(["--source", "/skills/", "search", "zebra", "--json"]));
    assert_eq!(
        (out.code, out.text().as_str(), out.stderr.as_str()),
        (1, "{\"results\":[]}\n", "")
    );
    let out = run(skillstore(root).args(["--source", "/skills/", "search", "forms"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.text().starts_with("forms  (skills, "), "{}", out.text());
}

/// A base layer `base/csv-report` and an empty writable layer `team`.
fn layered() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write(
        dir.path(),
        "base/csv-report/SKILL.md",
        "---\nname: csv-report\ndescription: Summarise a CSV.\n---\n# CSV report\n\nSteps.\n",
    );
    write(dir.path(), "base/csv-report/references/format.md", "# Format\n");
    std::fs::create_dir_all(dir.path().join("team")).unwrap();
    dir
}

const LAYERS: [&str; 6] = ["--source", "/base/", "--source", "/team/", "--writable", "team"];

/// `skill new NAME --to SOURCE --description TEXT` writes a valid
/// skeleton through the editor, recorded as `create`.
#[test]
fn skill_new_writes_a_valid_skeleton_recorded_in_history() {
    let dir = layered();
    let root = dir.path();
    let out = run(skillstore(root).args(LAYERS).args([
        "skill",
        "new",
        "pdf-forms",
        "--to",
        "team",
        "--description",
        "Fill in PDF forms. Use when given a form.",
        "--json",
    ]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let change: Value = serde_json::from_str(&out.text()).unwrap();
    assert_eq!(change["action"], "create");
    assert_eq!(change["files"][0]["path"], "SKILL.md");
    let text = std::fs::read_to_string(root.join("team/pdf-forms/SKILL.md")).unwrap();
    assert_eq!(
        text,
        "---\nname: pdf-forms\ndescription: \"Fill in PDF forms. Use when given a form.\"\n---\n\n# Pdf Forms\n\n\
         ## When to use\n\nFill in PDF forms. Use when given a form.\n\n## Steps\n\n1. The first step.\n\n## Files\n\n\
         Put scripts in `scripts/`, longer documents in `references/` and templates in `assets/`\n\
         (`skillstore skill write-file pdf-forms references/NAME.md`), and name them here.\n"
    );
    let out = run(skillstore(root).args(["validate", "team/pdf-forms"]));
    assert_eq!(
        (out.code, out.text().as_str()),
        (0, "ok       team/pdf-forms\n"),
        "{}",
        out.stderr
    );
    let out = run(skillstore(root)
        .args(LAYERS)
        .args(["skill", "history", "pdf-forms", "--to", "team", "--json"]));
    let history: Value = serde_json::from_str(&out.text()).unwrap();
    assert_eq!(history.as_array().unwrap().len(), 1);
    assert_eq!(history[0]["action"], "create");
    // Without a description, the skeleton is valid still, and every check
    // warns that its description is the placeholder.
    let out = run(skillstore(root)
        .args(LAYERS)
        .args(["skill", "new", "notes", "--to", "team"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = run(skillstore(root).args(["validate", "team/notes"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(out.text().contains("description_placeholder"), "{}", out.text());
    let out = run(skillstore(root).args(LAYERS).args(["list", "--json"]));
    assert!(out.text().contains("description_placeholder"), "{}", out.text());
    // Twice is refused.
    let out = run(skillstore(root)
        .args(LAYERS)
        .args(["skill", "new", "notes", "--to", "team"]));
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (1, "error: already exists: /team/notes/SKILL.md\n")
    );
}

/// `patch` on a skill the source does not hold names `override`;
/// `skill override` copies the winner in, recorded; then the patch works.
#[test]
fn skill_override_copies_the_winner_into_the_writable_source() {
    let dir = layered();
    let root = dir.path();
    let patch = [
        "skill",
        "patch",
        "csv-report",
        "--find",
        "# CSV report",
        "--replace",
        "# CSV report (team)",
        "--to",
        "team",
    ];
    let refused = "error: no skill `csv-report` in the source `team`: it comes from the source `base`; \
                   `skillstore skill override csv-report --to team` copies it into `team` to change it there\n";
    let out = run(skillstore(root).args(LAYERS).args(patch));
    assert_eq!((out.code, out.stderr.as_str()), (1, refused));
    for args in [
        vec![
            "skill",
            "edit",
            "csv-report",
            "--to",
            "team",
            "--from",
            "base/csv-report/SKILL.md",
        ],
        vec![
            "skill",
            "write-file",
            "csv-report",
            "references/more.md",
            "--to",
            "team",
            "--from",
            "base/csv-report/SKILL.md",
        ],
        vec![
            "skill",
            "remove-file",
            "csv-report",
            "references/format.md",
            "--to",
            "team",
        ],
    ] {
        let out = run(skillstore(root).args(LAYERS).args(&args));
        assert_eq!((out.code, out.stderr.as_str()), (1, refused), "{args:?}");
    }

    let out = run(skillstore(root)
        .args(LAYERS)
        .args(["skill", "override", "csv-report", "--to", "team", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let change: Value = serde_json::from_str(&out.text()).unwrap();
    assert_eq!(change["action"], "override");
    let paths: Vec<&str> = change["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["references/format.md", "SKILL.md"]);
    for file in ["SKILL.md", "references/format.md"] {
        assert_eq!(
            std::fs::read(root.join("team/csv-report").join(file)).unwrap(),
            std::fs::read(root.join("base/csv-report").join(file)).unwrap()
        );
    }
    let out = run(skillstore(root).args(LAYERS).args(patch));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let out = run(skillstore(root).args(LAYERS).args(["show", "csv-report", "--json"]));
    let show: Value = serde_json::from_str(&out.text()).unwrap();
    assert_eq!(show["source"], "team");
    assert_eq!(show["shadowed"][0]["source"], "base");
    let out = run(skillstore(root)
        .args(LAYERS)
        .args(["skill", "history", "csv-report", "--to", "team", "--json"]));
    let history: Value = serde_json::from_str(&out.text()).unwrap();
    let actions: Vec<&str> = history
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["override", "patch"]);

    // Again: the source holds it now.
    let out = run(skillstore(root)
        .args(LAYERS)
        .args(["skill", "override", "csv-report", "--to", "team"]));
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (
            1,
            "error: the source `team` already holds `csv-report`: change it there\n"
        )
    );
    let out = run(skillstore(root)
        .args(LAYERS)
        .args(["skill", "override", "csv-reprot", "--to", "team"]));
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .starts_with("error: no skill named `csv-reprot` in the catalog to override"),
        "{}",
        out.stderr
    );
}

/// A signed skill edited after signing says its content changed since it
/// was signed and that `sign` signs it again.
#[test]
fn a_skill_edited_after_signing_says_so() {
    let dir = two_skills();
    let root = dir.path();
    let keygen = std::process::Command::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", "alice", "-f"])
        .arg(root.join("key"))
        .output()
        .expect("ssh-keygen (OpenSSH) makes the test's key");
    assert!(keygen.status.success());
    let public = std::fs::read_to_string(root.join("key.pub")).unwrap();
    let public: Vec<&str> = public.split_whitespace().take(2).collect();
    write(
        root,
        "allowed_signers",
        &format!("alice@example.org {}\n", public.join(" ")),
    );
    write(
        root,
        "skillstore.yaml",
        "sources:\n  - path: /skills/\n    signatures: {allowed_signers: allowed_signers, required: true}\n",
    );
    let out = run(skillstore(root).args(["sign", "skills/pdf", "skills/forms", "--key", "key"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    write(root, "skills/pdf/scripts/run.sh", "echo changed\n");
    let message = "its content changed since it was signed (its signature, by an allowed key, is over other content: \
                   an edit, or another skill's signature); `skillstore sign` signs it again; it is not served";
    let out = run(skillstore(root).args(["list", "--json"]));
    assert_eq!(out.code, 3);
    let json: Value = serde_json::from_str(&out.text()).unwrap();
    assert_eq!(json["diagnostics"][0]["kind"], "signature_invalid", "{json}");
    assert_eq!(json["diagnostics"][0]["message"], message, "{json}");
    let path = json["diagnostics"][0]["path"].as_str().unwrap().to_owned();
    let out = run(skillstore(root).args(["show", "pdf"]));
    assert_eq!(
        (out.code, out.stderr),
        (
            3,
            format!("error: the skill `pdf` exists ({path}) but is withheld: [signature_invalid] {message}\n")
        )
    );
    // Signed again, it is served.
    assert_eq!(
        run(skillstore(root).args(["sign", "skills/pdf", "--key", "key"])).code,
        0
    );
    assert_eq!(run(skillstore(root).args(["show", "pdf"])).code, 0);
}

/// A `--mount` given on the command line that cannot be opened is named
/// as such, not put on the configuration file; one from the file still is.
#[test]
fn a_mount_flag_is_not_blamed_on_the_configuration_file() {
    let dir = two_skills();
    let root = dir.path();
    write(root, "skillstore.yaml", "sources:\n  - path: /skills/\n");
    let out = run(skillstore(root).args(["--mount", "/=missing", "list"]));
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (
            2,
            "error: the mount given at / (`missing`): cannot open the directory `./missing`: not found \
             (cannot open the backend's root directory)\n"
        )
    );
    write(
        root,
        "skillstore.yaml",
        "mounts: [{at: /, location: missing}]\nsources:\n  - path: /skills/\n",
    );
    let out = run(skillstore(root).args(["list"]));
    assert_eq!(
        (out.code, out.stderr.as_str()),
        (
            2,
            "error: skillstore.yaml: cannot open the directory `./missing`: not found \
             (cannot open the backend's root directory)\n"
        )
    );
}
