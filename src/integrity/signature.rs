//! SSH signatures over skill digests, and the `allowed_signers` files that
//! say whose signatures a source accepts.
//!
//! A skill's signature is an SSH signature (the armored `SSHSIG` format of
//! `ssh-keygen -Y sign`) in the namespace [`NAMESPACE`] over the skill's
//! digest as text (`sha256:` and 64 lowercase hex digits, no line break),
//! kept in the skill at [`SIGNATURE_FILE`]. The reserved directory is not
//! part of the digest, so the signature travels with the skill (sources,
//! archives, sync, HTTP and MCP reads) without changing what it signs.
//!
//! An `allowed_signers` file has Git's format (`ssh-keygen(1)`, ALLOWED
//! SIGNERS): one `PRINCIPALS [OPTIONS] KEYTYPE BASE64 [COMMENT]` a line.
//! The options read are `namespaces="..."`, `valid-after="..."` and
//! `valid-before="..."` (times `YYYYMMDD[HHMM[SS]][Z]`, read as UTC);
//! `cert-authority` is refused as unsupported, and so is a line giving
//! one option twice (as OpenSSH refuses it).

use std::time::{SystemTime, UNIX_EPOCH};

use ssh_key::{HashAlg, LineEnding, PrivateKey, PublicKey, SshSig};

use crate::error::{Error, Result};

/// The SSH signature namespace of skill signatures.
pub const NAMESPACE: &str = "skillstore";

/// Where a skill keeps its signature, relative to its directory.
pub const SIGNATURE_FILE: &str = ".skillstore/signature";

/// Signs `digest` (a skill digest's text) with `key`, an OpenSSH private
/// key (unencrypted; Ed25519 or ECDSA P-256), and returns the armored
/// signature text.
pub fn sign(key_text: &str, digest: &str) -> Result<String> {
    let key =
        PrivateKey::from_openssh(key_text).map_err(|e| Error::Usage(format!("not an OpenSSH private key: {e}")))?;
    if key.is_encrypted() {
        return Err(Error::Usage(
            "the private key is encrypted; sign with an unencrypted key (or `ssh-keygen -Y sign -n skillstore`)".into(),
        ));
    }
    let sig = key
        .sign(NAMESPACE, HashAlg::Sha512, digest.as_bytes())
        .map_err(|e| Error::Usage(format!("cannot sign with this key: {e}")))?;
    let mut text = sig
        .to_pem(LineEnding::LF)
        .map_err(|e| Error::Usage(format!("cannot encode the signature: {e}")))?;
    if !text.ends_with('\n') {
        text.push('\n');
    }
    Ok(text)
}

/// One line of an `allowed_signers` file.
#[derive(Debug, Clone)]
pub struct AllowedSigner {
    /// The principals, as written (comma-separated patterns with `*` and `?`).
    pub principals: Vec<String>,
    /// The namespaces the key may sign in, when restricted.
    pub namespaces: Option<Vec<String>>,
    /// Seconds since the epoch before which the key is not valid.
    pub valid_after: Option<u64>,
    /// Seconds since the epoch from which the key is no longer valid.
    pub valid_before: Option<u64>,
    /// The key.
    pub key: PublicKey,
}

/// An `allowed_signers` file, parsed.
#[derive(Debug, Clone, Default)]
pub struct AllowedSigners {
    /// Its lines, in order.
    pub signers: Vec<AllowedSigner>,
}

/// Why a signature was not accepted. [`Refused::as_str`] is the stable
/// diagnostic kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Refused {
    /// No signature where one is required (`signature_missing`).
    Missing,
    /// Not an SSH signature, another namespace, or not over this digest
    /// (`signature_invalid`).
    Invalid,
    /// Made by an allowed key, but over another digest: the skill's
    /// content changed since it was signed (`signature_invalid`, the kind
    /// of [`Refused::Invalid`]; its message says so).
    Changed,
    /// Made by a key the source does not allow for this namespace
    /// (`signer_not_allowed`).
    NotAllowed,
    /// Made by an allowed key outside its validity (`valid-before` passed,
    /// `valid-after` not reached) (`signer_expired`).
    Expired,
}

impl Refused {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Refused::Missing => "signature_missing",
            Refused::Invalid | Refused::Changed => "signature_invalid",
            Refused::NotAllowed => "signer_not_allowed",
            Refused::Expired => "signer_expired",
        }
    }
}

/// A signature that verified: who made it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signer {
    /// The principals of the `allowed_signers` line that accepted it.
    pub principal: String,
    /// The key's SHA-256 fingerprint (`SHA256:...`).
    pub fingerprint: String,
}

impl AllowedSigners {
    /// Parses the text of an `allowed_signers` file; a line it cannot read
    /// (or one with `cert-authority`) is an error naming its number.
    pub fn parse(text: &str) -> Result<AllowedSigners> {
        let mut signers = Vec::new();
        for (number, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let signer =
                parse_line(line).map_err(|why| Error::Config(format!("allowed_signers line {}: {why}", number + 1)))?;
            signers.push(signer);
        }
        Ok(AllowedSigners { signers })
    }

    /// Checks `signature` (the armored text) over `digest` at `now`
    /// (seconds since the epoch): the signer it verified for, or why not.
    pub fn verify(&self, signature: &[u8], digest: &str, now: u64) -> std::result::Result<Signer, Refused> {
        let sig = SshSig::from_pem(signature).map_err(|_| Refused::Invalid)?;
        if sig.namespace() != NAMESPACE {
            return Err(Refused::Invalid);
        }
        let mut expired = false;
        let mut allowed = None;
        for signer in &self.signers {
            if signer.key.key_data() != sig.public_key() {
                continue;
            }
            if let Some(namespaces) = &signer.namespaces
                && !namespaces.iter().any(|n| glob(n, NAMESPACE))
            {
                continue;
            }
            if signer.valid_after.is_some_and(|t| now < t) || signer.valid_before.is_some_and(|t| now >= t) {
                expired = true;
                continue;
            }
            allowed = Some(signer);
            break;
        }
        let Some(signer) = allowed else {
            return Err(if expired { Refused::Expired } else { Refused::NotAllowed });
        };
        signer
            .key
            .verify(NAMESPACE, digest.as_bytes(), &sig)
            .map_err(|_| Refused::Changed)?;
        Ok(Signer {
            principal: signer.principals.join(","),
            fingerprint: signer.key.fingerprint(HashAlg::Sha256).to_string(),
        })
    }
}

/// Seconds since the epoch, now.
pub fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The next whitespace-separated token of `line`, where double quotes
/// group (and are kept), and the rest.
fn token(line: &str) -> Option<(&str, &str)> {
    let line = line.trim_start();
    if line.is_empty() {
        return None;
    }
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => return Some((&line[..i], &line[i..])),
            _ => {}
        }
    }
    Some((line, ""))
}

fn is_key_type(word: &str) -> bool {
    word.starts_with("ssh-") || word.starts_with("ecdsa-") || word.starts_with("sk-")
}

fn parse_line(line: &str) -> std::result::Result<AllowedSigner, String> {
    let (principals, rest) = token(line).ok_or("no principals")?;
    let principals: Vec<String> = principals.trim_matches('"').split(',').map(str::to_owned).collect();
    let (next, mut rest) = token(rest).ok_or("no key")?;
    let mut signer_options = (None, None, None);
    let key_type = if is_key_type(next) {
        next
    } else {
        signer_options = parse_options(next)?;
        let (key_type, after) = token(rest).ok_or("no key")?;
        rest = after;
        key_type
    };
    let (blob, comment) = token(rest).ok_or("no key")?;
    let key = PublicKey::from_openssh(&format!("{key_type} {blob}")).map_err(|e| format!("not a public key: {e}"))?;
    let _ = comment;
    let (namespaces, valid_after, valid_before) = signer_options;
    Ok(AllowedSigner {
        principals,
        namespaces,
        valid_after,
        valid_before,
        key,
    })
}

type Options = (Option<Vec<String>>, Option<u64>, Option<u64>);

fn parse_options(text: &str) -> std::result::Result<Options, String> {
    let mut out: Options = (None, None, None);
    let mut rest = text;
    while !rest.is_empty() {
        // One option: up to the next comma outside quotes.
        let mut quoted = false;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '"' => quoted = !quoted,
                ',' if !quoted => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let option = &rest[..end];
        rest = rest.get(end + 1..).unwrap_or("");
        let (name, value) = match option.split_once('=') {
            Some((name, value)) => (name.to_ascii_lowercase(), Some(value.trim_matches('"'))),
            None => (option.to_ascii_lowercase(), None),
        };
        let repeated = match name.as_str() {
            "namespaces" => out.0.is_some(),
            "valid-after" => out.1.is_some(),
            "valid-before" => out.2.is_some(),
            _ => false,
        };
        if repeated {
            // OpenSSH refuses such a line ("multiple ... clauses").
            return Err(format!("the option `{name}` is given more than once"));
        }
        match (name.as_str(), value) {
            ("namespaces", Some(v)) => out.0 = Some(v.split(',').map(str::to_owned).collect()),
            ("valid-after", Some(v)) => out.1 = Some(parse_time(v)?),
            ("valid-before", Some(v)) => out.2 = Some(parse_time(v)?),
            ("cert-authority", _) => return Err("cert-authority is not supported".into()),
            (other, _) => return Err(format!("unknown option `{other}`")),
        }
    }
    Ok(out)
}

/// `YYYYMMDD`, `YYYYMMDDHHMM` or `YYYYMMDDHHMMSS`, with an optional `Z`,
/// as seconds since the epoch (read as UTC).
fn parse_time(text: &str) -> std::result::Result<u64, String> {
    let digits = text.strip_suffix(['Z', 'z']).unwrap_or(text);
    let bad = || format!("`{text}` is not a time (YYYYMMDD[HHMM[SS]][Z])");
    if !digits.bytes().all(|b| b.is_ascii_digit()) || ![8, 12, 14].contains(&digits.len()) {
        return Err(bad());
    }
    let field = |from: usize, to: usize| digits.get(from..to).map_or(0, |s| s.parse::<i64>().unwrap_or(0));
    let (year, month, day) = (field(0, 4), field(4, 6), field(6, 8));
    let (hour, minute, second) = (field(8, 10), field(10, 12), field(12, 14));
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || hour > 23 || minute > 59 || second > 60 {
        return Err(bad());
    }
    let days = days_from_civil(year, month, day);
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second;
    u64::try_from(seconds).map_err(|_| bad())
}

/// Days since 1970-01-01 of a proleptic Gregorian date.
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (month + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `*` and `?` patterns, as OpenSSH matches principals and namespaces.
fn glob(pattern: &str, text: &str) -> bool {
    fn go(p: &[u8], t: &[u8]) -> bool {
        match (p.first(), t.first()) {
            (None, None) => true,
            (Some(b'*'), _) => go(&p[1..], t) || (!t.is_empty() && go(p, &t[1..])),
            (Some(b'?'), Some(_)) => go(&p[1..], &t[1..]),
            (Some(a), Some(b)) if a == b => go(&p[1..], &t[1..]),
            _ => false,
        }
    }
    go(pattern.as_bytes(), text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_utc_seconds() {
        assert_eq!(parse_time("19700101").unwrap(), 0);
        assert_eq!(parse_time("20000301Z").unwrap(), 951_868_800);
        assert_eq!(parse_time("202601021504").unwrap(), 1_767_366_240);
        assert!(parse_time("2026").is_err());
        assert!(parse_time("20261301").is_err());
    }

    #[test]
    fn options_and_refusals() {
        let key = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIMLbATsSqcVTVaMqVj8jucPcAAPMpwE7lOeIgKXkCpdA";
        let parsed = AllowedSigners::parse(&format!(
            "# comment\n\nalice@example.org,bob {key} a comment\n\"carol\" namespaces=\"git,skillstore\",valid-before=\"20200101\" {key}\n"
        ))
        .unwrap();
        assert_eq!(parsed.signers.len(), 2);
        assert_eq!(parsed.signers[0].principals, ["alice@example.org", "bob"]);
        assert_eq!(parsed.signers[1].namespaces.as_deref().unwrap(), ["git", "skillstore"]);
        assert_eq!(parsed.signers[1].valid_before, Some(parse_time("20200101").unwrap()));
        let err = AllowedSigners::parse(&format!("ca cert-authority {key}\n")).unwrap_err();
        assert!(err.to_string().contains("line 1: cert-authority"), "{err}");
        assert!(AllowedSigners::parse("dave not-a-key AAAA\n").is_err());
        let twice = AllowedSigners::parse(&format!(
            "\nerin valid-after=\"20000101\",VALID-AFTER=\"20990101\" {key}\n"
        ))
        .unwrap_err();
        assert!(
            twice.to_string().contains("line 2: the option `valid-after`"),
            "{twice}"
        );
        assert!(glob("skill*", "skillstore") && glob("s?illstore", "skillstore") && !glob("git", "skillstore"));
    }
}
