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
