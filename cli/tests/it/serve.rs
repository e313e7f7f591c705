//! `serve`, `mcp` and `token-hash`.

use crate::support::{run, skillstore};

/// `mcp` and `serve` without a tenants file fail as any command does when
/// there is nothing to open: a usage error that names no tenant.
#[test]
fn cli_mcp_without_sources_is_a_usage_error_naming_no_tenant() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = skillstore();
    mcp.current_dir(dir.path()).arg("mcp").write_stdin("");
    let out = run(&mut mcp);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.stderr.starts_with("error: no sources:"), "{}", out.stderr);
    assert!(!out.stderr.contains("tenant"), "{}", out.stderr);
}

/// `token-hash` prints the line a server file takes, and the server file
/// accepts it for that token.
#[test]
fn cli_token_hash_prints_what_the_server_file_takes() {
    let mut cmd = skillstore();
    cmd.arg("token-hash").write_stdin("test\n");
    let out = run(&mut cmd);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.text(),
        "sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n"
    );
    let mut empty = skillstore();
    empty.arg("token-hash").write_stdin("");
    assert_eq!(run(&mut empty).code, 2);
}

/// One GET on `port` with an optional bearer token: the status code and the
/// body.
fn http_get(port: u16, path: &str, token: Option<&str>) -> Option<(u16, String)> {
    use std::io::{Read as _, Write as _};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{auth}Connection: close\r\n\r\n"
    )
    .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_owned();
    Some((status, body))
}

/// `serve --token-env VAR`: one tenant, its token from the environment, no
/// server file; a request with the token is answered, one without gets
/// 401; an unset or empty variable is refused naming it, and the token is
/// never printed.
#[test]
fn cli_serve_takes_its_token_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    crate::support::write(
        root,
        "skills/pdf/SKILL.md",
        "---\nname: pdf\ndescription: Read PDFs.\n---\nSteps.\n",
    );
    let serve = |env: Option<&str>| {
        let mut cmd = crate::support::skillstore_in(root);
        cmd.args([
            "--source",
            "/skills/",
            "serve",
            "--listen",
            "127.0.0.1:1",
            "--token-env",
            "SKILLSTORE_TEST_TOKEN",
        ]);
        cmd.env_remove("SKILLSTORE_TEST_TOKEN");
        if let Some(value) = env {
            cmd.env("SKILLSTORE_TEST_TOKEN", value);
        }
        crate::support::run(&mut cmd)
    };
    let unset = serve(None);
    assert_eq!(unset.code, 2);
    assert_eq!(
        unset.stderr,
        "error: --token-env: the environment variable SKILLSTORE_TEST_TOKEN is not set; set it to the token clients send\n"
    );
    let empty = serve(Some("  "));
    assert_eq!(empty.code, 2);
    assert_eq!(
        empty.stderr,
        "error: --token-env: the environment variable SKILLSTORE_TEST_TOKEN is empty; set it to the token clients send\n"
    );
    // A token no header can carry would lock every client out.
    for unsendable in ["  first\nsecond  ", "two words", "caf\u{e9}"] {
        let refused = serve(Some(unsendable));
        assert_eq!(refused.code, 2, "{unsendable:?}");
        assert!(
            refused.stderr.contains("which no Authorization header can carry"),
            "{unsendable:?}: {}",
            refused.stderr
        );
        assert!(!refused.stderr.contains("first"), "the token is never printed");
    }

    let token = "s3cret-token-for-the-test";
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let child = std::process::Command::new(assert_cmd::cargo::cargo_bin("skillstore"))
        .current_dir(root)
        .env("XDG_CACHE_HOME", root.join(".test-cache"))
        .env("SKILLSTORE_TEST_TOKEN", token)
        .args([
            "--source",
            "/skills/",
            "serve",
            "--listen",
            &listen,
            "--token-env",
            "SKILLSTORE_TEST_TOKEN",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let running = crate::support::Running(child);
    let mut answered = None;
    crate::support::eventually("serve answers", || {
        answered = http_get(port, "/v1/skills", Some(token));
        answered.is_some()
    });
    let (status, body) = answered.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("\"pdf\""), "{body}");
    let (status, _) = http_get(port, "/v1/skills", None).unwrap();
    assert_eq!(status, 401);
    let (status, _) = http_get(port, "/v1/skills", Some("another-token")).unwrap();
    assert_eq!(status, 401);
    // No server file names a metrics token: the one token reads them.
    let (status, body) = http_get(port, "/metrics", Some(token)).unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("skillstore_tenants_loaded"), "{body}");
    assert_eq!(http_get(port, "/metrics", None).unwrap().0, 401);
    let (code, stderr) = running.stop();
    assert_eq!(code, Some(0), "{stderr}");
    assert!(!stderr.contains(token), "the token was printed: {stderr}");
}
