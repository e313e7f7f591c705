//! The key a skill is signed with: an unencrypted Ed25519 or ECDSA P-256
//! private key signs in this process; any other key (a passphrase-protected
//! one, RSA, a public key whose private half an ssh-agent holds, the
//! agent's first key when none is named) signs through OpenSSH's own
//! `ssh-keygen -Y sign`, which asks for a passphrase on the terminal and
//! talks to the agent as OpenSSH does.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use ssh_key::{Algorithm, PrivateKey, PublicKey, SshSig};

use crate::display::acts_on_display;
use crate::error::{Error, Result};
use crate::integrity::signature::{NAMESPACE, sign};

/// The largest key file read, in bytes.
const MAX_KEY_BYTES: u64 = 64 * 1024;

/// The largest signature `ssh-keygen` may print, in bytes.
const MAX_SIGNATURE_BYTES: usize = 64 * 1024;

/// How a skill's digest gets signed.
#[derive(Debug)]
pub enum SigningKey {
    /// An unencrypted Ed25519 or ECDSA P-256 private key, signing here.
    InProcess(String),
    /// A key file `ssh-keygen -Y sign -f` signs with: a private key this
    /// process does not sign with, or a public key whose private half the
    /// ssh-agent holds.
    Keygen {
        /// The file given to `ssh-keygen`.
        file: PathBuf,
        /// Its public key, when known before signing (a public key file,
        /// an unencrypted private key, the agent's key): the signature is
        /// checked against it.
        public: Option<PublicKey>,
        /// A temporary file holding an agent's public key, removed on drop.
        _temporary: Option<tempfile::NamedTempFile>,
    },
}

impl SigningKey {
    /// The key in the file `path` (an OpenSSH private key, or a public key
    /// whose private half the ssh-agent holds).
    pub fn from_file(path: &Path) -> Result<SigningKey> {
        let text = crate::location::read_local_text(path, MAX_KEY_BYTES, "key")?;
        if let Some(public) = public_key_line(&text) {
            return Ok(SigningKey::Keygen {
                file: path.to_path_buf(),
                public: Some(public),
                _temporary: None,
            });
        }
        let key = PrivateKey::from_openssh(&text).map_err(|_| {
            Error::Usage(format!(
                "`{}` is not an OpenSSH private or public key (`ssh-keygen -t ed25519` makes one)",
                shown(path)
            ))
        })?;
        let here = !key.is_encrypted() && matches!(key.algorithm(), Algorithm::Ed25519 | Algorithm::Ecdsa { .. });
        if here {
            return Ok(SigningKey::InProcess(text));
        }
        let public = (!key.is_encrypted()).then(|| key.public_key().clone());
        Ok(SigningKey::Keygen {
            file: path.to_path_buf(),
            public,
            _temporary: None,
        })
    }

    /// The first key the ssh-agent at `SSH_AUTH_SOCK` holds (`ssh-add -L`).
    pub fn from_agent() -> Result<SigningKey> {
        if std::env::var_os("SSH_AUTH_SOCK").is_none_or(|s| s.is_empty()) {
            return Err(Error::Usage(
                "no key to sign with: give --key PRIVATE_KEY, or start an ssh-agent holding one (SSH_AUTH_SOCK is not set)"
                    .into(),
            ));
        }
        let out = Command::new("ssh-add")
            .arg("-L")
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::Usage(format!("cannot ask the ssh-agent for its keys: `ssh-add -L`: {e}")))?;
        let listed = String::from_utf8_lossy(&out.stdout);
        let Some(public) = listed.lines().find_map(public_key_line) else {
            return Err(Error::Usage(
                "the ssh-agent holds no key: add one (`ssh-add KEY`), or give --key PRIVATE_KEY".into(),
            ));
        };
        let line = public
            .to_openssh()
            .map_err(|e| Error::Usage(format!("cannot write the agent's key: {e}")))?;
        let mut file = tempfile::Builder::new()
            .prefix("skillstore-agent-key")
            .suffix(".pub")
            .tempfile()
            .map_err(|e| Error::Usage(format!("cannot write the agent's public key to a temporary file: {e}")))?;
        writeln!(file, "{line}").map_err(|e| Error::Usage(format!("cannot write the agent's public key: {e}")))?;
        Ok(SigningKey::Keygen {
            file: file.path().to_path_buf(),
            public: Some(public),
            _temporary: Some(file),
        })
    }

    /// Signs `digest` in the namespace [`NAMESPACE`]; returns the armored
    /// signature, checked to be a signature of `digest` in that namespace
    /// (and by the expected key, when it is known).
    pub async fn sign(&self, digest: &str) -> Result<String> {
        match self {
            SigningKey::InProcess(text) => sign(text, digest),
            SigningKey::Keygen { file, public, .. } => {
                let (file, digest_owned) = (file.clone(), digest.to_owned());
                let text = tokio::task::spawn_blocking(move || keygen_sign(&file, &digest_owned))
                    .await
                    .map_err(|e| Error::Usage(format!("ssh-keygen did not finish: {e}")))??;
                check(&text, digest, public.as_ref())?;
                Ok(text)
            }
        }
    }
}

/// Runs `ssh-keygen -Y sign -n NAMESPACE -f FILE` over `digest` on
/// standard input. Its prompts go to the terminal, as OpenSSH's do.
fn keygen_sign(file: &Path, digest: &str) -> Result<String> {
    let mut child = Command::new("ssh-keygen")
        .args(["-Y", "sign", "-n", NAMESPACE, "-f"])
        .arg(file)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::Usage(format!("cannot run `ssh-keygen` to sign with `{}`: {e}", shown(file))))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(digest.as_bytes());
    }
    // Both outputs read under a bound (each on its own thread, so neither
    // pipe fills while the other is read): a signature is a few hundred
    // bytes, and whatever prints more is not `ssh-keygen` signing.
    let bounded = |pipe: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut kept = Vec::new();
            if let Some(pipe) = pipe {
                let mut pipe = std::io::Read::take(pipe, MAX_SIGNATURE_BYTES as u64 + 1);
                let _ = std::io::Read::read_to_end(&mut pipe, &mut kept);
                // Drain the rest so the child is never blocked on a full pipe.
                let _ = std::io::copy(pipe.get_mut(), &mut std::io::sink());
            }
            kept
        })
    };
    let stdout = bounded(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let stderr = bounded(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn std::io::Read + Send>),
    );
    let status = child
        .wait()
        .map_err(|e| Error::Usage(format!("`ssh-keygen -Y sign` failed: {e}")))?;
    let out = std::process::Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    };
    if !out.status.success() {
        let said: String = String::from_utf8_lossy(&out.stderr)
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect::<Vec<_>>()
            .join("; ")
            .chars()
            .filter(|c| !acts_on_display(*c))
            .take(500)
            .collect();
        return Err(Error::Usage(format!(
            "`ssh-keygen -Y sign` could not sign with `{}`: {said} (a public key signs only through an ssh-agent holding its private half: `ssh-add KEY`)",
            shown(file)
        )));
    }
    if out.stdout.len() > MAX_SIGNATURE_BYTES {
        return Err(Error::Usage("`ssh-keygen -Y sign` printed no signature".into()));
    }
    String::from_utf8(out.stdout).map_err(|_| Error::Usage("`ssh-keygen -Y sign` printed no signature".into()))
}

/// Holds what `ssh-keygen` printed to be a signature of `digest` in the
/// skillstore namespace, by `public` when known.
fn check(text: &str, digest: &str, public: Option<&PublicKey>) -> Result<()> {
    let sig = SshSig::from_pem(text).map_err(|_| Error::Usage("`ssh-keygen -Y sign` printed no signature".into()))?;
    if sig.namespace() != NAMESPACE {
        return Err(Error::Usage("`ssh-keygen -Y sign` signed in another namespace".into()));
    }
    let key = PublicKey::from(sig.public_key().clone());
    if public.is_some_and(|p| p.key_data() != key.key_data()) {
        return Err(Error::Usage(
            "`ssh-keygen -Y sign` signed with another key than the one named".into(),
        ));
    }
    key.verify(NAMESPACE, digest.as_bytes(), &sig)
        .map_err(|e| Error::Usage(format!("the signature `ssh-keygen -Y sign` made does not verify: {e}")))
}

/// The public key of an OpenSSH public key line (`ssh-ed25519 AAAA...`).
fn public_key_line(text: &str) -> Option<PublicKey> {
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))?;
    PublicKey::from_openssh(line).ok()
}

fn shown(path: &Path) -> String {
    path.display()
        .to_string()
        .chars()
        .filter(|c| !acts_on_display(*c))
        .collect()
}
