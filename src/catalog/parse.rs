//! Reading and parsing candidates: batches of SKILL.md heads, the local
//! cache and index entries taken when they hold, and what each candidate
//! turned out to be.

use std::sync::Arc;

use skillstore_backends::{ErrorKind, ReadOptions, SkillBackend, VPath};

use super::state::{Candidate, Done, Job, Listing, Outcome, SourceState};
use super::types::LoadOptions;
use crate::diagnostic::{Diagnostic, DiagnosticKind};
use crate::frontmatter::MAX_FRONTMATTER_BYTES;
use crate::index::HeadEntry;
use crate::integrity::FileDigests;
use crate::skill::{
    LOWERCASE_SKILL_FILE, Parsed, Problem, ProblemKind, SKILL_FILE, Scan, Severity, Strictness, parse_frontmatter, scan,
};
use crate::source::{Source, SourceList};

/// What a diagnostic says of a backend error: its kind, and the reason a
/// backend wrote for callers to see
/// ([`public_detail`](skillstore_backends::Error::public_detail)), such as
/// why a discovery entry was refused; any other detail only in the log.
pub(super) fn shown_cause(err: &skillstore_backends::Error) -> String {
    match err.public_detail() {
        Some(detail) => format!("{} ({detail})", err.kind().describe()),
        None => err.kind().describe().to_owned(),
    }
}

/// The diagnostic of a source that cannot be listed. Its message is made
/// of the error's kind and the source's virtual path only: a backend's own
/// message may name an endpoint, a bucket or a host path, so it goes to
/// the debug log alone.
pub(super) fn source_failure(source: &Source, err: &skillstore_backends::Error) -> Diagnostic {
    let (severity, kind) = match err.kind() {
        ErrorKind::NotFound => (Severity::Warning, DiagnosticKind::SourceNotFound),
        ErrorKind::Unavailable => (Severity::Error, DiagnosticKind::SourceUnavailable),
        other => (Severity::Error, DiagnosticKind::Storage(other)),
    };
    Diagnostic::new(
        severity,
        kind,
        Some(source.name()),
        Some(source.path()),
        format!("cannot list the source {}: {}", source.path(), shown_cause(err)),
    )
}

/// Stats the candidates loaded before (reusing those unchanged), then reads
/// and parses the rest, each step as one batched backend call.
pub(super) async fn run_batch(
    backend: &dyn SkillBackend,
    sources: &SourceList,
    options: &LoadOptions,
    jobs: Vec<Job>,
) -> Vec<Done> {
    let mut done = Vec::with_capacity(jobs.len());
    let (checks, mut reads): (Vec<Job>, Vec<Job>) = jobs.into_iter().partition(|j| j.previous.is_some());
    if !checks.is_empty() {
        let paths: Vec<VPath> = checks.iter().map(|j| j.skill_md.clone()).collect();
        let stats = backend.stat_many(&paths).await;
        for (mut job, stat) in checks.into_iter().zip(stats) {
            let old = job.previous.take().expect("partitioned on previous");
            match stat {
                Ok(meta) if meta.version.is_some() && meta.version == old.version && !old.refuted(&options.digests) => {
                    done.push(Done {
                        candidate: job.candidate,
                        version: old.version,
                        size: old.size,
                        path: job.skill_md,
                        outcome: old.outcome,
                        yaml: old.yaml,
                        sha256: old.sha256,
                        from_entry: old.from_entry,
                    });
                }
                Err(err) if matches!(err.kind(), ErrorKind::NotFound | ErrorKind::NotADirectory) => {
                    // Gone, or renamed between `SKILL.md` and `skill.md`:
                    // read again from the usual name.
                    job.skill_md = with_file(&job.skill_md, SKILL_FILE);
                    reads.push(job);
                }
                _ => reads.push(job),
            }
        }
    }
    if reads.is_empty() {
        return done;
    }
    let head = ReadOptions {
        limit: options.read_limit,
        prefix: Some(options.prefix_bytes),
        ..ReadOptions::default()
    };
    // Each SKILL.md is read confined to its skill's directory: one batch
    // per depth, since a confinement counts segments from the root.
    let mut blobs: Vec<Option<skillstore_backends::Result<skillstore_backends::Blob>>> =
        (0..reads.len()).map(|_| None).collect();
    let mut depths: Vec<usize> = reads.iter().map(|j| j.skill_md.segments().count()).collect();
    depths.sort_unstable();
    depths.dedup();
    for depth in depths {
        let (indexes, paths): (Vec<usize>, Vec<VPath>) = reads
            .iter()
            .enumerate()
            .filter(|(_, j)| j.skill_md.segments().count() == depth)
            .map(|(i, j)| (i, j.skill_md.clone()))
            .unzip();
        let read = backend.read_many(&paths, head.confined(depth - 1)).await;
        for (i, blob) in indexes.into_iter().zip(read) {
            blobs[i] = Some(blob);
        }
    }
    let blobs = blobs.into_iter().map(|b| b.expect("every read was made"));
    for (job, blob) in reads.into_iter().zip(blobs) {
        let source = sources.iter().nth(job.source).expect("index from the same list");
        done.push(finish(backend, source, &job, blob, options).await);
    }
    done
}

/// The file `name` in the directory of `skill_md`.
pub(super) fn with_file(skill_md: &VPath, name: &str) -> VPath {
    skill_md
        .parent()
        .and_then(|dir| dir.join(name).ok())
        .expect("a SKILL.md has a parent, where a file of a shorter name fits")
}

/// Parses the head of a SKILL.md, reading a longer prefix when the
/// frontmatter does not close inside the first one. A directory without
/// `SKILL.md` but with `skill.md` is read from that, with a warning. The
/// path returned is the file's that was read.
pub(super) async fn finish(
    backend: &dyn SkillBackend,
    source: &Source,
    job: &Job,
    first: skillstore_backends::Result<skillstore_backends::Blob>,
    options: &LoadOptions,
) -> Done {
    let failed = |path: &VPath, outcome: Outcome| Done {
        candidate: job.candidate,
        version: None,
        size: None,
        path: path.clone(),
        outcome,
        yaml: None,
        sha256: None,
        from_entry: false,
    };
    let mut skill_md = job.skill_md.clone();
    let first = match first {
        Ok(blob) => blob,
        Err(err) if err.kind() == ErrorKind::NotFound && skill_md.as_str().ends_with(SKILL_FILE) => {
            skill_md = with_file(&skill_md, LOWERCASE_SKILL_FILE);
            let head = ReadOptions {
                limit: options.read_limit,
                prefix: Some(options.prefix_bytes),
                ..ReadOptions::default()
            }
            .confined(skill_md.segments().count() - 1);
            match backend.read(&skill_md, head).await {
                Ok(blob) => blob,
                Err(err) => return failed(&job.skill_md, outcome_of_error(source, &skill_md, &err)),
            }
        }
        Err(err) => return failed(&skill_md, outcome_of_error(source, &skill_md, &err)),
    };
    let keep = |yaml: &str| job.keep_yaml.then(|| Arc::from(yaml));
    let parsed = match scan(&first.data, first.is_complete()) {
        Scan::Yaml(yaml) => Some((
            parse_frontmatter(yaml, Some(job.dir_name()), Strictness::Lenient),
            keep(yaml),
        )),
        Scan::Failed(parsed) => Some((parsed, None)),
        Scan::NeedMore => None,
    };
    let ((parsed, yaml), blob) = match parsed {
        Some(parsed) => (parsed, first),
        None => {
            let longer = ReadOptions {
                limit: options.read_limit,
                prefix: Some(MAX_FRONTMATTER_BYTES as u64 + 16),
                ..ReadOptions::default()
            }
            .confined(skill_md.segments().count() - 1);
            let second = match backend.read(&skill_md, longer).await {
                Ok(blob) => blob,
                Err(err) => return failed(&skill_md, outcome_of_error(source, &skill_md, &err)),
            };
            let parsed = match scan(&second.data, second.is_complete()) {
                Scan::Yaml(yaml) => (
                    parse_frontmatter(yaml, Some(job.dir_name()), Strictness::Lenient),
                    keep(yaml),
                ),
                Scan::Failed(parsed) => (parsed, None),
                Scan::NeedMore => unreachable!("a prefix past the frontmatter limit never needs more"),
            };
            (parsed, second)
        }
    };
    // A whole file's hash costs little next to its read, and lets the
    // local cache say which bytes its entry describes.
    let sha256 = (yaml.is_some() && blob.is_complete()).then(|| crate::integrity::sha256_hex(&blob.data));
    Done {
        candidate: job.candidate,
        version: Some(blob.version),
        size: Some(blob.size),
        outcome: outcome_of_parse(source, &skill_md, with_name_warning(parsed, &skill_md)),
        path: skill_md,
        yaml,
        sha256,
        from_entry: false,
    }
}

/// The parse with a warning first when the file is `skill.md`.
pub(super) fn with_name_warning(mut parsed: Parsed, skill_md: &VPath) -> Parsed {
    if !skill_md.as_str().ends_with(SKILL_FILE) {
        parsed.problems.insert(
            0,
            Problem {
                kind: ProblemKind::LowercaseSkillMd,
                severity: Severity::Warning,
                message: format!(
                    "the file is named `{LOWERCASE_SKILL_FILE}`; the specification names it `{SKILL_FILE}`"
                ),
            },
        );
    }
    parsed
}

/// Gives `candidate` the outcome of a frontmatter taken from the local
/// cache or the index, exactly as a read of the file would give it. With
/// `any_name` false (the index), only an entry describing a valid skill
/// named after its directory is taken. An entry that the bytes of its
/// version, as hashed before ([`FileDigests::head`]), do not match is never
/// taken. `false` is returned when the entry is not taken.
pub(super) fn take_entry(
    source: &Source,
    candidate: &mut Candidate,
    entry: &HeadEntry,
    any_name: bool,
    digests: &FileDigests,
) -> bool {
    if entry_refuted(&candidate.skill_md, entry, digests) {
        return false;
    }
    let parsed = parse_frontmatter(&entry.yaml, Some(&candidate.dir_name), Strictness::Lenient);
    let named_after_dir = parsed
        .skill
        .as_ref()
        .is_some_and(|skill| skill.name == candidate.dir_name);
    if !(any_name || named_after_dir) {
        return false;
    }
    candidate.version = Some(entry.version.clone());
    candidate.size = Some(entry.size);
    candidate.yaml = Some(Arc::from(entry.yaml.as_str()));
    candidate.sha256 = entry.sha256.clone();
    candidate.from_entry = true;
    candidate.outcome = outcome_of_parse(
        source,
        &candidate.skill_md,
        with_name_warning(parsed, &candidate.skill_md),
    );
    true
}

/// True when the bytes of `skill_md` at the entry's version, as hashed
/// before, are known not to be what the entry describes.
pub(super) fn entry_refuted(skill_md: &VPath, entry: &HeadEntry, digests: &FileDigests) -> bool {
    digests.head(skill_md.as_str(), &entry.version).is_some_and(|head| {
        head.yaml.as_deref() != Some(entry.yaml.as_str()) || entry.sha256.as_deref().is_some_and(|h| h != head.sha256)
    })
}

/// The state of a source that cannot be listed now: its last good skills
/// with a `source_stale` warning, or none with the failure.
pub(super) fn failed_state(
    source: &Source,
    before: Option<&SourceState>,
    err: &skillstore_backends::Error,
) -> SourceState {
    match before {
        Some(old) if matches!(old.listing, Listing::Loaded(_)) || !old.candidates.is_empty() => SourceState {
            listing: Listing::Failed(Diagnostic::new(
                Severity::Warning,
                DiagnosticKind::SourceStale,
                Some(source.name()),
                Some(source.path()),
                format!(
                    "cannot list the source now ({}); keeping the skills it had at the last load",
                    shown_cause(err)
                ),
            )),
            candidates: old.candidates.clone(),
        },
        _ => SourceState {
            listing: Listing::Failed(source_failure(source, err)),
            candidates: Vec::new(),
        },
    }
}

/// The outcome of a SKILL.md that cannot be read. As with a source, the
/// message is made of the kind and the virtual path; the backend's own
/// message goes to the debug log.
pub(super) fn outcome_of_error(source: &Source, skill_md: &VPath, err: &skillstore_backends::Error) -> Outcome {
    let kind = match err.kind() {
        ErrorKind::NotFound | ErrorKind::NotADirectory => return Outcome::NotASkill,
        ErrorKind::TooLarge => DiagnosticKind::Problem(ProblemKind::FileTooLarge),
        other => DiagnosticKind::Storage(other),
    };
    tracing::debug!(source = source.name(), path = %skill_md, error = %err, "cannot read a skill");
    Outcome::Rejected {
        diagnostics: vec![
            Diagnostic::new(
                Severity::Error,
                kind,
                Some(source.name()),
                Some(skill_md),
                format!("cannot read {skill_md}: {}", shown_cause(err)),
            )
            .with_public_detail(err.public_detail()),
        ],
    }
}

pub(super) fn outcome_of_parse(source: &Source, skill_md: &VPath, parsed: Parsed) -> Outcome {
    let diagnostics = parsed
        .problems
        .iter()
        .map(|p: &Problem| Diagnostic::new(p.severity, p.kind, Some(source.name()), Some(skill_md), &p.message))
        .collect();
    match parsed.skill {
        Some(metadata) => Outcome::Loaded {
            metadata: Arc::new(metadata),
            diagnostics,
        },
        None => Outcome::Rejected { diagnostics },
    }
}
