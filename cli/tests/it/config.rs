//! The configuration file: unknown keys, filters and symlink policies,
//! `config check` and `config schema`.

use serde_json::Value;

use crate::support::{names, repo, run, skillstore};

#[test]
fn cli_config_with_an_unknown_key_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("skillstore.yaml");
    std::fs::write(&config, "sources:\n  - path: /base\n    lable: Base\n").unwrap();
    let out = run(skillstore().arg("--config").arg(&config).arg("list"));
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("lable"), "{}", out.stderr);
}

#[test]
fn cli_config_sets_filters_and_per_source_symlink_policy() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    for (layer, name) in [("base", "keep"), ("base", "legacy-tool"), ("team", "linked-target")] {
        let skill = root.join(layer).join(name);
        std::fs::create_dir_all(&skill).unwrap();
        std::fs::write(
            skill.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: d\n---\n"),
        )
        .unwrap();
    }
    std::os::unix::fs::symlink("../team/linked-target", root.join("base/linked")).unwrap();
    std::fs::write(
        root.join("skillstore.yaml"),
        "sources:\n  - path: /base\n    symlinks: deny\nskills:\n  disabled: [\"legacy-*\"]\n",
    )
    .unwrap();
    let out = run(skillstore()
        .arg("--config")
        .arg(root.join("skillstore.yaml"))
        .args(["list", "--json"]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    let list = out.json();
    assert_eq!(names(&list), ["keep", "legacy-tool"]);
    assert_eq!(list["skills"][1]["enabled"], false);
    assert_eq!(list["diagnostics"][0]["kind"], "symlink_refused");
    assert_eq!(list["diagnostics"][0]["path"], "/base/linked/SKILL.md");
}

/// `config check` reads a configuration or a server file as the commands
/// would and says what it would open; a refused file names itself, there
/// and in every other command.
#[test]
fn cli_config_check_names_the_file_and_says_what_it_would_open() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.yaml");
    std::fs::write(
        &bad,
        "mounts: [{at: /, location: \"s3://b\"}]\nsources: [{path: /base}, {path: /team, symlinks: deny}]\n",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    for args in [&["config", "check", bad][..], &["--config", bad, "list"]] {
        let out = run(skillstore().args(args));
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(
            out.stderr.starts_with(&format!(
                "error: {bad}: a symlink policy applies to local directories only"
            )),
            "{args:?}: {}",
            out.stderr
        );
    }

    let good = run(skillstore().args(["config", "check"]));
    assert_eq!(good.code, 0, "{}", good.stderr);
    assert_eq!(
        good.text(),
        "skillstore.yaml: a skillstore configuration\nmount / = .\nsource base (/examples/skills/base)\n\
         source user (/examples/skills/user)\nsource project (/examples/skills/project)\n\
         source team (/examples/skills/team)\n"
    );

    // Credentials in a location never show, whatever the shape.
    for location in [
        "git+https://alice:SEKRIT-pw@127.0.0.1:1/r.git@main",
        "git+https://127.0.0.1:1/r.git?private_token=SEKRIT-tok",
        "git+ssh://deploy:SEKRIT-ssh@127.0.0.1:1/r.git",
    ] {
        let file = dir.path().join("secret.yaml");
        std::fs::write(
            &file,
            format!("mounts: [{{at: /, location: \"{location}\"}}]\nsources: [{{path: /base}}]\n"),
        )
        .unwrap();
        let out = run(skillstore()
            .env("SKILLSTORE_GIT_CACHE", dir.path().join("git-cache"))
            .args(["config", "check"])
            .arg(&file));
        let shown = format!("{}{}", out.text(), out.stderr);
        assert!(shown.contains("127.0.0.1:1/r.git"), "{shown}");
        assert!(
            !shown.contains("SEKRIT") && !shown.contains("alice") && !shown.contains("deploy"),
            "{shown}"
        );
    }

    let server = dir.path().join("server.yaml");
    std::fs::write(
        &server,
        "tenants:\n  - name: acme\n    tokens: [{env: CHECK_ACME_TOKEN, scope: write}]\n    \
         config: {mounts: [{at: /, location: \"s3://acme\"}], sources: [{path: /base}, {path: /team, writable: true}]}\n",
    )
    .unwrap();
    let server = server.to_str().unwrap();
    let out = run(skillstore()
        .env("CHECK_ACME_TOKEN", "t0ken")
        .args(["config", "check", server]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.text(),
        format!(
            "{server}: a server file with 1 tenant(s)\ntenant acme: 1 token(s)\n  mount / = s3://acme\n  \
             source base (/base)\n  source team (/team, writable)\n"
        )
    );
    let unset = run(skillstore()
        .env_remove("CHECK_ACME_TOKEN")
        .args(["config", "check", server]));
    assert_eq!(unset.code, 2, "{}", unset.stderr);
    assert!(unset.stderr.contains(server), "{}", unset.stderr);

    // JWTs: what the file takes is said; a block that does not validate is refused.
    let jwt = "auth:\n  jwt:\n    jwks_url: https://idp.example.com/jwks.json\n    issuer: https://idp.example.com/\n    \
               audience: skillstore\n";
    let text = std::fs::read_to_string(server).unwrap();
    std::fs::write(server, format!("{text}{jwt}")).unwrap();
    let out = run(skillstore()
        .env("CHECK_ACME_TOKEN", "t0ken")
        .args(["config", "check", server]));
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.text().contains(
            "auth: bearer JWTs (RS256, ES256, EdDSA) signed by a key of the JWKS at https://idp.example.com/jwks.json, \
             issuer https://idp.example.com/, audience skillstore; tenant from `tenant`, scope from `scope`\n"
        ),
        "{}",
        out.text()
    );
    std::fs::write(server, format!("{text}{jwt}    algorithms: [HS256]\n")).unwrap();
    let out = run(skillstore()
        .env("CHECK_ACME_TOKEN", "t0ken")
        .args(["config", "check", server]));
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.contains("HS256"), "{}", out.stderr);
}

#[test]
fn cli_config_schemas_match_the_committed_copies_and_the_types() {
    for (kind, file) in [("config", "skillstore.schema.json"), ("server", "server.schema.json")] {
        let out = run(skillstore().args(["config", "schema", kind]));
        assert_eq!(out.code, 0, "{}", out.stderr);
        let committed = std::fs::read_to_string(repo().join("docs/schema").join(file)).unwrap_or_default();
        assert!(
            out.text() == committed,
            "docs/schema/{file} is not what `skillstore config schema {kind}` prints; regenerate it with that command"
        );
        let schema = out.json();
        // deny_unknown_fields: an unknown key is refused by editors too.
        assert_eq!(schema["additionalProperties"], false, "{kind}");
    }
    // Every top-level key the repository's own configuration uses is in the schema.
    let schema = run(skillstore().args(["config", "schema", "config"])).json();
    let config: serde_json::Value = serde_yaml_keys(&std::fs::read_to_string(repo().join("skillstore.yaml")).unwrap());
    for key in config.as_object().unwrap().keys() {
        assert!(schema["properties"].get(key).is_some(), "{key} is not in the schema");
    }
    let server = run(skillstore().args(["config", "schema", "server"])).json();
    for key in [
        "listen",
        "limits",
        "template",
        "tenants",
        "allowed_origins",
        "metrics_tokens",
    ] {
        assert!(
            server["properties"].get(key).is_some(),
            "{key} is not in the server schema"
        );
    }
}

/// The top-level keys of a YAML mapping, as a JSON object of nulls (the
/// tests have no YAML parser of their own; top-level keys start a line).
fn serde_yaml_keys(text: &str) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    for line in text.lines() {
        if let Some((key, _)) = line.split_once(':')
            && !key.is_empty()
            && !key.starts_with([' ', '#', '-'])
        {
            map.insert(key.to_owned(), Value::Null);
        }
    }
    Value::Object(map)
}
