//! What every command shares: usage errors, logging, escaped output,
//! `--version`, completions and man pages, and which commands take the
//! catalog options.

use crate::support::{NOTES, in_tree, repo, run, skillstore};

#[test]
fn cli_bad_usage_exits_two_with_one_line() {
    let cases: [&[&str]; 6] = [
        &[],
        &["list", "--bogus"],
        &["--mount", "no-equals", "list"],
        &["--source", "relative/path", "list"],
        &["--source", "/a/../b", "list"],
        &["--config", "does-not-exist.yaml", "list"],
    ];
    for args in cases {
        let out = run(skillstore().args(args));
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("panicked"), "{args:?}");
    }
    let missing = run(skillstore().args(["--config", "does-not-exist.yaml", "list"]));
    assert!(
        missing.stderr.starts_with("error: cannot read the configuration"),
        "{}",
        missing.stderr
    );
}

#[test]
fn cli_rust_log_turns_on_tracing() {
    let out = run(skillstore().env("RUST_LOG", "debug").args(["list", "--json"]));
    assert_eq!(out.code, 0);
    assert!(out.stderr.contains("DEBUG"), "{}", out.stderr);
    // Standard error is a pipe here, so the log carries no colour codes.
    assert!(!out.stderr.contains('\u{1b}'), "{}", out.stderr);
}

/// Finding: a description holding ESC or BEL sequences reached the terminal
/// raw in `list`, `show`, diagnostics, errors and `history`.
#[test]
fn terminal_escapes_are_shown_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let esc = "Title\u{1b}]0;pwned\u{7} and \u{1b}[2J cleared, \u{9b}31m red";
    std::fs::create_dir_all(dir.path().join("base/esc")).unwrap();
    std::fs::write(
        dir.path().join("base/esc/SKILL.md"),
        format!(
            "---\nname: esc\ndescription: \"{}\"\nlicense: \"MIT\\e[8m\"\n---\nBody \u{1b}[5m\n",
            esc.replace('\u{1b}', "\\e")
                .replace('\u{7}', "\\a")
                .replace('\u{9b}', "\\x9b")
        ),
    )
    .unwrap();
    std::fs::create_dir_all(dir.path().join("team/bad")).unwrap();
    std::fs::write(
        dir.path().join("team/bad/SKILL.md"),
        "---\nname: \"bad\\e[31m\"\ndescription: Misnamed.\n---\n",
    )
    .unwrap();
    let raw = |bytes: &[u8]| {
        bytes.iter().any(|b| *b == 0x1b || *b == 0x07) || String::from_utf8_lossy(bytes).contains('\u{9b}')
    };

    let list = run(&mut in_tree(dir.path(), &["list"]));
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        !raw(&list.stdout) && !raw(list.stderr.as_bytes()),
        "{:?} {:?}",
        list.text(),
        list.stderr
    );
    assert!(list.text().contains("\\u{1b}]0;pwned\\u{7}"), "{}", list.text());
    assert!(list.stderr.contains("\\u{1b}[31m"), "{}", list.stderr);

    let show = run(&mut in_tree(dir.path(), &["show", "esc"]));
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(!raw(&show.stdout), "{:?}", show.text());
    assert!(show.text().contains("MIT\\u{1b}[8m"), "{}", show.text());

    // JSON escapes what JSON escapes: every C0 control (C1 stays text).
    let json = run(&mut in_tree(dir.path(), &["list", "--json"]));
    assert!(!json.stdout.iter().any(|b| *b < 0x20 && *b != b'\n'), "{}", json.text());
    assert!(json.text().contains("\\u001b]0;pwned\\u0007"), "{}", json.text());
    assert_eq!(json.json()["skills"][0]["description"], esc);

    let read = run(&mut in_tree(dir.path(), &["read", "esc"]));
    assert!(read.text().contains("Body \u{1b}[5m"), "read stays byte-exact");

    let error = run(&mut in_tree(dir.path(), &["read", "no\u{1b}]0;x\u{7}such"]));
    assert_eq!(error.code, 1);
    assert!(!raw(error.stderr.as_bytes()), "{:?}", error.stderr);

    let notes = dir.path().join("notes.md");
    std::fs::write(&notes, NOTES).unwrap();
    let created = run(&mut in_tree(
        dir.path(),
        &[
            "skill",
            "create",
            "notes",
            "--from",
            notes.to_str().unwrap(),
            "--author",
            "mallory\u{1b}[2J",
        ],
    ));
    assert_eq!(created.code, 0, "{}", created.stderr);
    let history = run(&mut in_tree(dir.path(), &["skill", "history", "notes"]));
    assert!(!raw(&history.stdout), "{:?}", history.text());
    assert!(history.text().contains("mallory\\u{1b}[2J"), "{}", history.text());
}

#[test]
fn cli_version_names_the_commit_it_was_built_from() {
    let out = run(skillstore().arg("--version"));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let line = out.text();
    let expected = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(repo())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or_else(
            || "unknown".to_owned(),
            |o| String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        );
    assert_eq!(
        line,
        format!("skillstore {} (commit {expected})\n", env!("CARGO_PKG_VERSION"))
    );
}

#[test]
fn cli_bash_completion_completes_commands_and_options() {
    let script = run(skillstore().args(["completions", "bash"]));
    assert_eq!(script.code, 0, "{}", script.stderr);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("skillstore.bash");
    std::fs::write(&path, &script.stdout).unwrap();
    // The real bash loads the script and asks it what `skillstore sy<TAB>`
    // and `skillstore sync --wa<TAB>` complete to.
    let complete = |words: &str, cword: usize| {
        let probe = format!(
            "source {}; COMP_WORDS=({words}); COMP_CWORD={cword}; COMP_LINE='{words}'; COMP_POINT=${{#COMP_LINE}}; \
             _skillstore skillstore \"${{COMP_WORDS[$COMP_CWORD]}}\" \"${{COMP_WORDS[$COMP_CWORD-1]}}\"; \
             printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            path.display()
        );
        let out = std::process::Command::new("bash")
            .args(["-c", &probe])
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    assert_eq!(complete("skillstore sy", 1).trim(), "sync");
    assert!(complete("skillstore sync --wa", 2).lines().any(|l| l == "--watch"));
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = run(skillstore().args(["completions", shell]));
        assert_eq!(out.code, 0, "{shell}: {}", out.stderr);
        assert!(out.text().contains("sync"), "{shell}");
    }
    assert_eq!(run(skillstore().args(["completions", "tcsh"])).code, 2);
}

#[test]
fn cli_man_pages_cover_every_command() {
    let page = run(skillstore().arg("man"));
    assert_eq!(page.code, 0, "{}", page.stderr);
    let text = page.text();
    assert!(text.starts_with(".ie"), "roff: {}", &text[..80.min(text.len())]);
    assert!(text.contains(".TH skillstore 1"), "{text}");
    let dir = tempfile::tempdir().unwrap();
    let out = run(skillstore().arg("man").arg("--dir").arg(dir.path()));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let mut pages: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pages.sort();
    for command in ["list", "show", "sync", "serve", "config", "token-hash", "man"] {
        assert!(pages.contains(&format!("skillstore-{command}.1")), "{pages:?}");
    }
    assert!(pages.contains(&"skillstore.1".to_owned()));
    let sync = std::fs::read_to_string(dir.path().join("skillstore-sync.1")).unwrap();
    assert!(
        sync.contains(".TH skillstore-sync 1") && sync.contains("watch"),
        "{sync}"
    );
    assert_eq!(run(skillstore().args(["man", "--dir", "/nonexistent/dir"])).code, 2);

    // A link or a FIFO planted under a page's name is replaced, never
    // written through or waited on.
    let planted = tempfile::tempdir().unwrap();
    let precious = planted.path().join("precious.txt");
    std::fs::write(&precious, "keep me\n").unwrap();
    let pages = planted.path().join("man");
    std::fs::create_dir(&pages).unwrap();
    std::os::unix::fs::symlink(&precious, pages.join("skillstore.1")).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        pages.join("skillstore-list.1").as_path(),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let out = run(skillstore().arg("man").arg("--dir").arg(&pages));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(std::fs::read_to_string(&precious).unwrap(), "keep me\n");
    for page in ["skillstore.1", "skillstore-list.1"] {
        let meta = std::fs::symlink_metadata(pages.join(page)).unwrap();
        assert!(meta.is_file(), "{page} is a regular file now");
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o777,
            0o644
        );
    }
    let leftovers: Vec<_> = std::fs::read_dir(&pages)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn cli_commands_without_a_catalog_neither_list_nor_take_global_options() {
    for (command, help) in [
        (&["validate"][..], true),
        (&["pack"][..], true),
        (&["publish"][..], true),
        (&["token-hash"][..], true),
        (&["config", "check"][..], false),
    ] {
        let out = run(skillstore().args(command).arg("--help"));
        assert_eq!(out.code, 0, "{}", out.stderr);
        let text = out.text();
        let lists = |flag: &str| text.lines().any(|l| l.trim_start().starts_with(flag));
        for flag in ["--mount", "--source", "--writable", "--no-cache"] {
            assert!(!lists(flag), "{command:?} --help lists {flag}:\n{text}");
        }
        assert_eq!(lists("--config"), !help, "{command:?}:\n{text}");
    }
    // The commands that read a catalog still list them.
    let list = run(skillstore().args(["list", "--help"])).text();
    assert!(list.contains("--mount") && list.contains("--source"), "{list}");
    // Given anyway, they are a usage error rather than silently ignored.
    let out = run(skillstore().args(["--mount", "/=.", "validate", "examples/skills/base"]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(
        out.stderr.contains("`validate` reads no catalog and takes no --mount"),
        "{}",
        out.stderr
    );
    let out = run(skillstore().args(["pack", "examples/skills/base/csv-report", "--source", "/base"]));
    assert_eq!(out.code, 2, "{}", out.stderr);
}

/// The sections of one `--help` page: heading (`Arguments:`, `Options:`,
/// `Global options:`, `Commands:`) to its lines.
fn help_sections(args: &[&str]) -> std::collections::BTreeMap<String, Vec<String>> {
    let mut cmd = crate::support::skillstore();
    cmd.args(args).arg("--help");
    let help = crate::support::run(&mut cmd);
    assert_eq!(help.code, 0, "{args:?}: {}", help.stderr);
    let mut sections = std::collections::BTreeMap::new();
    let mut current = String::new();
    for line in help.text().lines() {
        if !line.starts_with(' ') && line.ends_with(':') {
            current = line.trim_end_matches(':').to_owned();
            continue;
        }
        sections
            .entry(current.clone())
            .or_insert_with(Vec::new)
            .push(line.to_owned());
    }
    sections
}

/// Every subcommand's `--help`, walked from the top: each positional
/// argument has a description, the global options sit under their own
/// heading on every page that takes them, and `--no-cache` says what it
/// turns off.
#[test]
fn every_help_page_describes_its_arguments_and_heads_the_global_options() {
    let mut pending: Vec<Vec<String>> = vec![Vec::new()];
    let mut pages = 0;
    let mut undescribed = Vec::new();
    while let Some(path) = pending.pop() {
        let args: Vec<&str> = path.iter().map(String::as_str).collect();
        let sections = help_sections(&args);
        pages += 1;
        for line in sections.get("Commands").into_iter().flatten() {
            let name = line.split_whitespace().next().unwrap_or("");
            if !name.is_empty() && name != "help" && line.starts_with("  ") && !line.starts_with("   ") {
                let mut next = path.clone();
                next.push(name.to_owned());
                pending.push(next);
            }
        }
        let arguments = sections.get("Arguments").cloned().unwrap_or_default();
        for (at, line) in arguments.iter().enumerate() {
            let trimmed = line.trim_start();
            let is_argument = line.starts_with("  ") && !line.starts_with("   ") && trimmed.starts_with(['<', '[']);
            if !is_argument {
                continue;
            }
            // Short help puts the description on the argument's line, long
            // help on the next one.
            let same_line = trimmed
                .split_once(char::is_whitespace)
                .is_some_and(|(_, rest)| !rest.trim().is_empty());
            let described = same_line
                || arguments
                    .get(at + 1)
                    .is_some_and(|next| next.starts_with("          ") && !next.trim().is_empty());
            if !described {
                undescribed.push(format!("skillstore {} {trimmed}", path.join(" ")));
            }
        }
        let options = sections.get("Options").cloned().unwrap_or_default().join("\n");
        for global in ["--config", "--mount", "--no-cache", "--locked", "--log-format"] {
            assert!(
                !options.contains(&format!("      {global}")),
                "skillstore {}: {global} is under Options, not Global options",
                path.join(" ")
            );
        }
    }
    assert!(pages > 30, "only {pages} help pages walked");
    assert!(
        undescribed.is_empty(),
        "positionals without a description: {undescribed:#?}"
    );
    let list = help_sections(&["list"]);
    let global = list["Global options"].join("\n");
    for flag in ["--config", "--source", "--no-cache", "--locked", "--log-format"] {
        assert!(global.contains(flag), "{flag} not under Global options:\n{global}");
    }
    let no_cache = global.split("--no-cache").nth(1).unwrap();
    for turned_off in [
        "frontmatters",
        "search index",
        "discovery downloads",
        "Git repositories",
    ] {
        assert!(
            no_cache.contains(turned_off),
            "--no-cache does not mention {turned_off}: {no_cache}"
        );
    }
}

/// Dynamic completion (`COMPLETE=SHELL`, clap_complete's engine): skill
/// names with their descriptions, and source labels for `--writable` and
/// `--to`, from the working directory's skillstore.yaml.
#[test]
fn completion_offers_skill_names_and_source_labels() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    crate::support::write(
        root,
        "skillstore.yaml",
        "sources:\n  - path: /base\n    label: base\n  - path: /team\n    label: team\n",
    );
    crate::support::write(
        root,
        "base/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Read PDFs.\n---\nSteps.\n",
    );
    crate::support::write(
        root,
        "team/pptx/SKILL.md",
        "---\nname: pptx\ndescription: Make slides.\n---\nSteps.\n",
    );
    crate::support::write(
        root,
        "team/csv/SKILL.md",
        "---\nname: csv\ndescription: Read CSV.\n---\nSteps.\n",
    );
    let complete = |words: &[&str]| {
        let mut cmd = crate::support::skillstore_in(root);
        cmd.env("COMPLETE", "fish").args(["--", "skillstore"]).args(words);
        let out = run(&mut cmd);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.text()
    };
    assert_eq!(complete(&["show", "p"]), "pdf\tRead PDFs.\npptx\tMake slides.\n");
    // An empty word is completed with the names, then the options.
    let all = complete(&["read", ""]);
    assert!(
        all.starts_with("pdf\tRead PDFs.\ncsv\tRead CSV.\npptx\tMake slides.\n--"),
        "{all}"
    );
    assert_eq!(complete(&["--writable", "t"]), "team\n");
    assert_eq!(complete(&["skill", "create", "new-one", "--to", ""]), "base\nteam\n");
    let registration = run(crate::support::skillstore_in(root).env("COMPLETE", "bash"));
    assert!(
        registration.text().contains("_clap_complete_skillstore"),
        "{}",
        registration.text()
    );
}

/// Completion reads local files only: a `skillstore.yaml` that mounts a
/// Git remote, a discovery endpoint or an S3 bucket (one that came with a
/// cloned repository, say) completes no skill name, and the key press
/// reaches none of them.
#[test]
fn completion_never_reaches_a_remote_location() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    for location in [
        format!("git+http://127.0.0.1:{port}/r.git"),
        format!("http://127.0.0.1:{port}/disc"),
        "s3://completion-bucket/x".to_owned(),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        crate::support::write(
            root,
            "skillstore.yaml",
            &format!(
                "mounts:\n  - at: /remote\n    location: \"{location}\"\n  - at: /local\n    location: local\nsources:\n  - path: /remote\n  - path: /local\n"
            ),
        );
        crate::support::write(
            root,
            "local/pdf/SKILL.md",
            "---\nname: pdf\ndescription: Read PDFs.\n---\nSteps.\n",
        );
        let mut cmd = crate::support::skillstore_in(root);
        cmd.env("COMPLETE", "fish")
            .env("AWS_ENDPOINT_URL", format!("http://127.0.0.1:{port}"))
            .args(["--", "skillstore", "show", "p"]);
        let out = run(&mut cmd);
        assert_eq!(out.code, 0, "{location}: {}", out.stderr);
        assert_eq!(out.text(), "", "{location}: completed from a remote mount");
        assert!(
            matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "{location}: a key press connected to the remote"
        );
    }
}
