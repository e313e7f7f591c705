//! Signed skills against the real OpenSSH: a signature `ssh-keygen -Y sign`
//! made verifies in skillstore, one `skillstore sign` made verifies with
//! `ssh-keygen -Y verify`, and a source requiring signatures withholds a
//! skill that is tampered with, carries another skill's signature, is
//! signed by a key it does not allow or one whose validity has ended, or
//! is unsigned; `install` refuses the same.

use std::path::{Path, PathBuf};
use std::process::Command as Std;

use assert_cmd::Command;
use serde_json::Value;

/// The real `ssh-keygen`, or `None` outside CI when it is not installed.
/// In CI (`CI=true`) a missing `ssh-keygen` fails the test.
fn ssh_keygen() -> Option<PathBuf> {
    let found = Std::new("ssh-keygen").arg("-?").output().is_ok();
    if found {
        return Some(PathBuf::from("ssh-keygen"));
    }
    assert!(
        std::env::var("CI").as_deref() != Ok("true"),
        "ssh-keygen is not installed: the signature interop tests need OpenSSH's ssh-keygen (apt-get install openssh-client)"
    );
    eprintln!("SKIPPED: ssh-keygen is not installed; the signature interop tests did not run");
    None
}

fn keygen(dir: &Path, name: &str) -> PathBuf {
    let key = dir.join(name);
    let out = Std::new("ssh-keygen")
        .args(["-q", "-t", "ed25519", "-N", "", "-C", name, "-f"])
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    key
}

fn public(key: &Path) -> String {
    let text = std::fs::read_to_string(key.with_extension("pub")).unwrap();
    let mut words = text.split_whitespace();
    format!("{} {}", words.next().unwrap(), words.next().unwrap())
}

fn write_skill(root: &Path, name: &str, body: &str) -> PathBuf {
    let dir = root.join("skills").join(name);
    std::fs::create_dir_all(dir.join("scripts")).unwrap();
    std::fs::write(
        dir.join("SKILL.md"),
        format!("---\nname: {name}\ndescription: The {name} skill.\n---\n{body}\n"),
    )
    .unwrap();
    std::fs::write(dir.join("scripts/run.sh"), format!("echo {name}\n")).unwrap();
    dir
}

fn config(root: &Path, allowed: &str, required: bool) {
    std::fs::write(root.join("allowed_signers"), allowed).unwrap();
    std::fs::write(
        root.join("skillstore.yaml"),
        format!(
            "sources:\n  - path: /skills/\n    signatures:\n      allowed_signers: allowed_signers\n      required: {required}\n"
        ),
    )
    .unwrap();
}

fn skillstore(root: &Path) -> Command {
    let mut cmd = Command::cargo_bin("skillstore").unwrap();
    cmd.current_dir(root).env("XDG_CACHE_HOME", root.join("cache"));
    cmd
}

/// Served skills and signers, withheld kinds, exit code.
type Listed = (Vec<(String, Option<String>)>, Vec<String>, Option<i32>);

/// `list --json`: the served skills by name with their signers, the
/// withheld ones' kinds, and the exit code.
fn listed(root: &Path) -> Listed {
    let out = skillstore(root).args(["list", "--json"]).output().unwrap();
    let json: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let skills = json["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap().to_owned(),
                s["signer"].as_str().map(str::to_owned),
            )
        })
        .collect();
    let kinds = json["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["kind"].as_str().unwrap().to_owned())
        .collect();
    (skills, kinds, out.status.code())
}

fn digest(root: &Path, name: &str) -> String {
    let out = skillstore(root)
        .args(["--source", "/skills/", "show", name, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    json["digest"].as_str().unwrap().to_owned()
}

#[test]
fn ssh_keygen_signatures_verify_both_ways_and_every_refusal_withholds() {
    if ssh_keygen().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let alice = keygen(root, "alice");
    let mallory = keygen(root, "mallory");
    let pdf = write_skill(root, "pdf", "Steps.");
    let forms = write_skill(root, "forms", "Fill forms.");

    // skillstore signs; ssh-keygen verifies against the same allowed_signers.
    let signed = skillstore(root)
        .args(["sign"])
        .arg(&pdf)
        .arg("--key")
        .arg(&alice)
        .output()
        .unwrap();
    assert!(signed.status.success(), "{}", String::from_utf8_lossy(&signed.stderr));
    let pdf_digest = digest(root, "pdf");
    assert!(String::from_utf8_lossy(&signed.stdout).contains(&pdf_digest));
    let allowed = format!("alice@example.org {}\n", public(&alice));
    std::fs::write(root.join("allowed_signers"), &allowed).unwrap();
    let message = root.join("pdf.digest");
    std::fs::write(&message, &pdf_digest).unwrap();
    let verify = |signature: &Path, message: &Path| {
        Std::new("ssh-keygen")
            .args(["-Y", "verify", "-f"])
            .arg(root.join("allowed_signers"))
            .args(["-I", "alice@example.org", "-n", "skillstore", "-s"])
            .arg(signature)
            .stdin(std::fs::File::open(message).unwrap())
            .output()
            .unwrap()
    };
    let checked = verify(&pdf.join(".skillstore/signature"), &message);
    assert!(
        checked.status.success(),
        "ssh-keygen refused skillstore's signature: {}",
        String::from_utf8_lossy(&checked.stderr)
    );
    // ... and would refuse it over another digest (the test can fail).
    let other = root.join("other.digest");
    std::fs::write(&other, digest(root, "forms")).unwrap();
    assert!(!verify(&pdf.join(".skillstore/signature"), &other).status.success());

    // ssh-keygen signs; skillstore verifies.
    let forms_message = root.join("forms.digest");
    std::fs::write(&forms_message, digest(root, "forms")).unwrap();
    let out = Std::new("ssh-keygen")
        .args(["-Y", "sign", "-n", "skillstore", "-f"])
        .arg(&alice)
        .arg(&forms_message)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::create_dir_all(forms.join(".skillstore")).unwrap();
    std::fs::copy(root.join("forms.digest.sig"), forms.join(".skillstore/signature")).unwrap();

    config(root, &allowed, true);
    let (skills, kinds, code) = listed(root);
    assert_eq!(
        skills,
        [
            ("forms".to_owned(), Some("alice@example.org".to_owned())),
            ("pdf".to_owned(), Some("alice@example.org".to_owned()))
        ],
        "{kinds:?}"
    );
    assert_eq!(code, Some(0));
    let report = skillstore(root).args(["verify", "--json"]).output().unwrap();
    assert!(report.status.success(), "{}", String::from_utf8_lossy(&report.stderr));
    let report: Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(report["skills"][1]["signer"], "alice@example.org");
    assert_eq!(report["skills"][1]["digest"], pdf_digest.as_str());
    assert!(
        report["skills"][1]["fingerprint"]
            .as_str()
            .unwrap()
            .starts_with("SHA256:")
    );

    // One byte changed in a file: the signature no longer verifies.
    let script = pdf.join("scripts/run.sh");
    let original = std::fs::read(&script).unwrap();
    std::fs::write(&script, b"echo pdF\n").unwrap();
    let (skills, kinds, code) = listed(root);
    assert_eq!(skills, [("forms".to_owned(), Some("alice@example.org".to_owned()))]);
    assert_eq!(kinds, ["signature_invalid"]);
    assert_eq!(code, Some(3));
    let read = skillstore(root).args(["read", "pdf"]).output().unwrap();
    assert!(!read.status.success(), "a withheld skill is not read");
    std::fs::write(&script, &original).unwrap();

    // A signature moved from one skill to another.
    let forms_signature = std::fs::read(forms.join(".skillstore/signature")).unwrap();
    std::fs::copy(pdf.join(".skillstore/signature"), forms.join(".skillstore/signature")).unwrap();
    let (skills, kinds, _) = listed(root);
    assert_eq!(skills.len(), 1);
    assert_eq!(skills[0].0, "pdf");
    assert_eq!(kinds, ["signature_invalid"]);
    std::fs::write(forms.join(".skillstore/signature"), forms_signature).unwrap();

    // A key the source does not allow.
    let out = skillstore(root)
        .arg("sign")
        .arg(&forms)
        .arg("--key")
        .arg(&mallory)
        .output()
        .unwrap();
    assert!(out.status.success());
    let (_, kinds, code) = listed(root);
    assert_eq!(kinds, ["signer_not_allowed"]);
    assert_eq!(code, Some(3));
    // No lock refused it, so nothing suggests `lock` as the remedy.
    let out = skillstore(root).args(["list"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("signer_not_allowed"), "{stderr}");
    assert!(!stderr.contains("skillstore lock"), "{stderr}");

    // A key revoked: its validity ended yesterday. Allowed for another
    // namespace only, it is not allowed either.
    skillstore(root)
        .arg("sign")
        .arg(&forms)
        .arg("--key")
        .arg(&alice)
        .assert()
        .success();
    config(
        root,
        &format!("alice@example.org valid-before=\"20200101\" {}\n", public(&alice)),
        true,
    );
    let (skills, kinds, _) = listed(root);
    assert!(skills.is_empty());
    assert_eq!(kinds, ["signer_expired", "signer_expired"]);
    config(
        root,
        &format!("alice@example.org namespaces=\"git\" {}\n", public(&alice)),
        true,
    );
    let (_, kinds, _) = listed(root);
    assert_eq!(kinds, ["signer_not_allowed", "signer_not_allowed"]);

    // Unsigned, where signatures are required; served when they are not.
    config(root, &allowed, true);
    std::fs::remove_file(forms.join(".skillstore/signature")).unwrap();
    let (_, kinds, _) = listed(root);
    assert_eq!(kinds, ["signature_missing"]);
    config(root, &allowed, false);
    let (skills, kinds, code) = listed(root);
    assert_eq!(
        skills,
        [
            ("forms".to_owned(), None),
            ("pdf".to_owned(), Some("alice@example.org".to_owned()))
        ],
        "{kinds:?}"
    );
    assert_eq!(code, Some(0));

    // install: an unsigned archive is refused by a source that requires
    // signatures; a signed one is installed, signature and all.
    config(root, &allowed, true);
    let yaml = std::fs::read_to_string(root.join("skillstore.yaml")).unwrap();
    std::fs::write(root.join("skillstore.yaml"), format!("{yaml}    writable: true\n")).unwrap();
    let fresh = tempfile::tempdir().unwrap();
    let notes = write_skill(fresh.path(), "notes", "Notes.");
    skillstore(fresh.path())
        .arg("pack")
        .arg(&notes)
        .arg("-o")
        .arg(fresh.path().join("unsigned.skill"))
        .assert()
        .success();
    let refused = skillstore(root)
        .arg("install")
        .arg(fresh.path().join("unsigned.skill"))
        .output()
        .unwrap();
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("signature_missing"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
    assert!(!root.join("skills/notes").exists());
    skillstore(fresh.path())
        .arg("sign")
        .arg(&notes)
        .arg("--key")
        .arg(&alice)
        .assert()
        .success();
    skillstore(fresh.path())
        .arg("pack")
        .arg(&notes)
        .arg("-o")
        .arg(fresh.path().join("signed.skill"))
        .assert()
        .success();
    let installed = skillstore(root)
        .arg("install")
        .arg(fresh.path().join("signed.skill"))
        .output()
        .unwrap();
    assert!(
        installed.status.success(),
        "{}",
        String::from_utf8_lossy(&installed.stderr)
    );
    let (skills, _, _) = listed(root);
    assert!(skills.contains(&("notes".to_owned(), Some("alice@example.org".to_owned()))));
}

/// A line of `allowed_signers` that gives one option twice: OpenSSH
/// refuses the line ("multiple ... clauses"), so its key verifies nothing;
/// skillstore refuses it too (as it refuses any line it cannot read),
/// naming the line, rather than take the last value.
#[test]
fn an_allowed_signers_line_repeating_an_option_is_refused_like_openssh_does() {
    if ssh_keygen().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let alice = keygen(root, "alice");
    let pdf = write_skill(root, "pdf", "Steps.");
    skillstore(root)
        .arg("sign")
        .arg(&pdf)
        .arg("--key")
        .arg(&alice)
        .assert()
        .success();
    let message = root.join("pdf.digest");
    std::fs::write(&message, digest(root, "pdf")).unwrap();
    for repeated in [
        "valid-before=\"20200101\",valid-before=\"20990101\"",
        "namespaces=\"git\",namespaces=\"skillstore\"",
    ] {
        let allowed = format!("# signers\nalice@example.org {repeated} {}\n", public(&alice));
        config(root, &allowed, true);
        let openssh = Std::new("ssh-keygen")
            .args(["-Y", "verify", "-f"])
            .arg(root.join("allowed_signers"))
            .args(["-I", "alice@example.org", "-n", "skillstore", "-s"])
            .arg(pdf.join(".skillstore/signature"))
            .stdin(std::fs::File::open(&message).unwrap())
            .output()
            .unwrap();
        assert!(!openssh.status.success(), "{repeated}");
        assert!(
            String::from_utf8_lossy(&openssh.stderr).contains("multiple"),
            "{}",
            String::from_utf8_lossy(&openssh.stderr)
        );
        let out = skillstore(root).args(["list", "--json"]).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{repeated}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            stderr.contains("allowed_signers line 2") && stderr.contains("more than once"),
            "{stderr}"
        );
        // With the option once (the last value), both accept it.
        let once = repeated.split(',').nth(1).unwrap();
        config(root, &format!("alice@example.org {once} {}\n", public(&alice)), true);
        let (skills, kinds, code) = listed(root);
        assert_eq!(
            skills,
            [("pdf".to_owned(), Some("alice@example.org".to_owned()))],
            "{kinds:?}"
        );
        assert_eq!(code, Some(0));
    }
}

/// `publish --allowed-signers FILE` checks every skill as a source that
/// requires signatures checks an install: one unsigned or signed by a key
/// the file does not allow, and nothing is published. Signed, the tree is
/// published with its signatures, and a source requiring them serves it.
#[test]
fn publish_checks_signatures_like_install_and_the_signatures_travel() {
    if ssh_keygen().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let alice = keygen(root, "alice");
    let mallory = keygen(root, "mallory");
    let tree = root.join("tree");
    let pdf = write_skill(&tree, "pdf", "Steps.");
    let forms = write_skill(&tree, "forms", "Fill forms.");
    let allowed = format!("alice@example.org {}\n", public(&alice));
    std::fs::write(root.join("allowed_signers"), &allowed).unwrap();
    let sign = |skill: &Path, key: &Path| {
        skillstore(root)
            .arg("sign")
            .arg(skill)
            .arg("--key")
            .arg(key)
            .assert()
            .success();
    };
    let publish = |target: &str| {
        skillstore(root)
            .arg("publish")
            .arg(&tree)
            .arg(root.join(target))
            .arg("--allowed-signers")
            .arg(root.join("allowed_signers"))
            .output()
            .unwrap()
    };
    sign(&pdf, &alice);

    // forms unsigned: refused, nothing published.
    let out = publish("unsigned-out");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/skills/forms: [signature_missing]"), "{stderr}");
    assert!(!stderr.contains("/skills/pdf:"), "{stderr}");
    assert!(!root.join("unsigned-out/skills/pdf").exists());

    // forms signed by a key the file does not allow: refused too.
    sign(&forms, &mallory);
    let out = publish("mallory-out");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("/skills/forms: [signer_not_allowed]"), "{stderr}");
    assert!(!root.join("mallory-out/skills/forms").exists());

    // A file changed after signing: the signature no longer verifies.
    sign(&forms, &alice);
    std::fs::write(forms.join("scripts/run.sh"), "echo changed\n").unwrap();
    let out = publish("changed-out");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("/skills/forms: [signature_invalid]"));
    sign(&forms, &alice);

    // All signed by alice: published, signatures included, and a source
    // requiring them serves both.
    let out = publish("out");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(root.join("out/skills/pdf/.skillstore/signature").is_file());
    let served = root.join("out");
    std::fs::copy(root.join("allowed_signers"), served.join("allowed_signers")).unwrap();
    std::fs::write(
        served.join("skillstore.yaml"),
        "sources:\n  - path: /skills/\n    signatures:\n      allowed_signers: allowed_signers\n      required: true\n",
    )
    .unwrap();
    let (skills, kinds, code) = listed(&served);
    assert_eq!(
        skills,
        [
            ("forms".to_owned(), Some("alice@example.org".to_owned())),
            ("pdf".to_owned(), Some("alice@example.org".to_owned()))
        ],
        "{kinds:?}"
    );
    assert_eq!(code, Some(0));
}

/// A directory whose SKILL.md is spelt `skill.md` is a skill to a catalog
/// (served with a warning), so `publish --allowed-signers` checks it too:
/// unsigned, nothing is published.
#[test]
fn publish_checks_a_skill_whose_skill_md_is_lowercase() {
    if ssh_keygen().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let alice = keygen(root, "alice");
    let tree = root.join("tree");
    let pdf = write_skill(&tree, "pdf", "Steps.");
    let lower = write_skill(&tree, "lower", "Unsigned.");
    std::fs::rename(lower.join("SKILL.md"), lower.join("skill.md")).unwrap();
    std::fs::write(
        root.join("allowed_signers"),
        format!("alice@example.org {}\n", public(&alice)),
    )
    .unwrap();
    skillstore(root)
        .arg("sign")
        .arg(&pdf)
        .arg("--key")
        .arg(&alice)
        .assert()
        .success();
    let out = skillstore(root)
        .arg("publish")
        .arg(&tree)
        .arg(root.join("out"))
        .arg("--allowed-signers")
        .arg(root.join("allowed_signers"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("/skills/lower: [signature_missing]"), "{stderr}");
    assert!(!root.join("out/skills/lower").exists());
    assert!(!root.join("out/skills/pdf").exists());
}

/// A key made by the real `ssh-keygen` with `args` (type, passphrase).
fn keygen_with(dir: &Path, name: &str, args: &[&str]) -> PathBuf {
    let key = dir.join(name);
    let out = Std::new("ssh-keygen")
        .args(["-q", "-C", name])
        .args(args)
        .arg("-f")
        .arg(&key)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    key
}

/// An `SSH_ASKPASS` program answering `passphrase`, as a terminal user
/// would type it.
fn askpass(dir: &Path, passphrase: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(format!("askpass-{passphrase}"));
    std::fs::write(&path, format!("#!/bin/sh\necho '{passphrase}'\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    path
}

/// `sign` with `extra` arguments, no agent and the passphrase `askpass`
/// answers.
fn sign_with(root: &Path, skill: &Path, extra: &[&str], askpass: &Path, agent: Option<&Path>) -> std::process::Output {
    let mut cmd = skillstore(root);
    cmd.arg("sign")
        .arg(skill)
        .args(extra)
        .env("SSH_ASKPASS", askpass)
        .env("SSH_ASKPASS_REQUIRE", "force")
        .env("DISPLAY", ":0");
    match agent {
        Some(socket) => cmd.env("SSH_AUTH_SOCK", socket),
        None => cmd.env_remove("SSH_AUTH_SOCK"),
    };
    cmd.output().unwrap()
}

/// An RSA key and a passphrase-protected key sign through `ssh-keygen`
/// (the passphrase asked as OpenSSH asks it), and a source requiring their
/// signatures serves what they signed; a wrong passphrase signs nothing.
#[test]
fn rsa_and_passphrase_keys_sign_through_ssh_keygen() {
    if ssh_keygen().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let rsa = keygen_with(root, "rsa", &["-t", "rsa", "-b", "2048", "-N", ""]);
    let locked = keygen_with(root, "locked", &["-t", "ed25519", "-N", "correct horse"]);
    let pdf = write_skill(root, "pdf", "Steps.");
    let forms = write_skill(root, "forms", "Fill forms.");
    config(
        root,
        &format!(
            "rsa@example.org {}\nlocked@example.org {}\n",
            public(&rsa),
            public(&locked)
        ),
        true,
    );
    let right = askpass(root, "correct horse");
    let wrong = askpass(root, "wrong");

    let out = sign_with(root, &pdf, &["--key", "rsa"], &wrong, None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = sign_with(root, &forms, &["--key", "locked"], &wrong, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with("error: `ssh-keygen -Y sign` could not sign with `locked`: "),
        "{stderr}"
    );
    assert!(!forms.join(".skillstore/signature").exists());
    let out = sign_with(root, &forms, &["--key", "locked"], &right, None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let (skills, kinds, code) = listed(root);
    assert_eq!(
        skills,
        [
            ("forms".to_owned(), Some("locked@example.org".to_owned())),
            ("pdf".to_owned(), Some("rsa@example.org".to_owned())),
        ]
    );
    assert!(kinds.is_empty(), "{kinds:?}");
    assert_eq!(code, Some(0));
    let text = std::fs::read_to_string(pdf.join(".skillstore/signature")).unwrap();
    assert!(text.starts_with("-----BEGIN SSH SIGNATURE-----\n"), "{text}");
}

/// An `ssh-agent` on a socket of its own, stopped when dropped.
struct Agent {
    child: std::process::Child,
    socket: PathBuf,
}

impl Agent {
    fn start(dir: &Path) -> Agent {
        let socket = dir.join("agent.sock");
        let child = Std::new("ssh-agent")
            .args(["-D", "-a"])
            .arg(&socket)
            .stdout(std::process::Stdio::null())
            .spawn()
            .expect("ssh-agent (openssh-client) runs");
        for _ in 0..200 {
            if socket.exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert!(socket.exists(), "the ssh-agent made no socket");
        Agent { child, socket }
    }

    fn add(&self, key: &Path, askpass: &Path) {
        let out = Std::new("ssh-add")
            .arg(key)
            .env("SSH_AUTH_SOCK", &self.socket)
            .env("SSH_ASKPASS", askpass)
            .env("SSH_ASKPASS_REQUIRE", "force")
            .env("DISPLAY", ":0")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// With no `--key`, the ssh-agent's key signs; `--key KEY.pub` signs
/// through the agent holding its private half, with the private key file
/// gone; with neither an agent nor a key, `sign` says what to give.
#[test]
fn the_ssh_agent_signs_without_a_key_file() {
    if ssh_keygen().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let locked = keygen_with(root, "locked", &["-t", "ed25519", "-N", "correct horse"]);
    let pdf = write_skill(root, "pdf", "Steps.");
    let forms = write_skill(root, "forms", "Fill forms.");
    config(root, &format!("locked@example.org {}\n", public(&locked)), true);
    let wrong = askpass(root, "wrong");

    let out = sign_with(root, &pdf, &[], &wrong, None);
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stderr).as_ref()),
        (
            Some(2),
            "error: no key to sign with: give --key PRIVATE_KEY, or start an ssh-agent holding one (SSH_AUTH_SOCK is not set)\n"
        )
    );
    let agent = Agent::start(root);
    let out = sign_with(root, &pdf, &[], &wrong, Some(&agent.socket));
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stderr).as_ref()),
        (
            Some(2),
            "error: the ssh-agent holds no key: add one (`ssh-add KEY`), or give --key PRIVATE_KEY\n"
        )
    );
    agent.add(&locked, &askpass(root, "correct horse"));
    std::fs::remove_file(&locked).unwrap();

    let out = sign_with(root, &pdf, &[], &wrong, Some(&agent.socket));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = sign_with(root, &forms, &["--key", "locked.pub"], &wrong, Some(&agent.socket));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (skills, kinds, code) = listed(root);
    assert_eq!(
        skills,
        [
            ("forms".to_owned(), Some("locked@example.org".to_owned())),
            ("pdf".to_owned(), Some("locked@example.org".to_owned())),
        ]
    );
    assert!(kinds.is_empty(), "{kinds:?}");
    assert_eq!(code, Some(0));
}

/// What `ssh-keygen` prints is read under a bound: a program of that name
/// printing without end is refused, and nothing is written.
#[test]
fn an_ssh_keygen_printing_without_end_signs_nothing() {
    use std::os::unix::fs::PermissionsExt as _;
    if ssh_keygen().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    keygen_with(root, "rsa", &["-t", "rsa", "-b", "2048", "-N", ""]);
    let pdf = write_skill(root, "pdf", "Steps.");
    let bin = root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let fake = bin.join("ssh-keygen");
    std::fs::write(&fake, "#!/bin/sh\nhead -c 50000000 /dev/zero\n").unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o700)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = skillstore(root)
        .arg("sign")
        .arg(&pdf)
        .args(["--key", "rsa"])
        .env("PATH", path)
        .env_remove("SSH_AUTH_SOCK")
        .output()
        .unwrap();
    assert_eq!(
        (out.status.code(), String::from_utf8_lossy(&out.stderr).as_ref()),
        (Some(2), "error: `ssh-keygen -Y sign` printed no signature\n")
    );
    assert!(!pdf.join(".skillstore/signature").exists());
}
