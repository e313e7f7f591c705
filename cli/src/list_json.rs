//! `list --json` output, serialized with `serde_json` on every core and
//! written in catalog order.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;

use skillstore::{Diagnostic, Skill};

/// Skills per chunk: about 80 KiB of JSON.
pub const CHUNK: usize = 128;

/// [`write_with_releases`] with no skill served from a release.
#[cfg(test)]
pub fn write<W: Write + Send>(skills: &[Skill], diagnostics: &[Diagnostic], out: W, chunk: usize) -> io::Result<()> {
    write_with_releases(skills, diagnostics, out, chunk, &|_| None)
}

/// Writes `{"skills":[...],"diagnostics":[...]}` and a newline to `out`,
/// byte for byte what serializing one object with those two fields gives,
/// with `"release": VERSION` last in the object of each skill `release`
/// gives a version for (one served from a release).
///
/// Workers (one per core) claim chunks of `chunk` skills in turn and
/// serialize each into a buffer of its own; this thread writes the buffers
/// in chunk order as they arrive. A bounded channel keeps a few chunks per
/// worker in flight at most. A failed write drops the receiving end, which
/// stops every worker; a worker's panic reaches the caller.
pub fn write_with_releases<W: Write + Send>(
    skills: &[Skill],
    diagnostics: &[Diagnostic],
    mut out: W,
    chunk: usize,
    release: &(dyn Fn(&Skill) -> Option<String> + Sync),
) -> io::Result<()> {
    let chunks: Vec<&[Skill]> = skills.chunks(chunk.max(1)).collect();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(chunks.len())
        .max(1);
    out.write_all(b"{\"skills\":[")?;
    let claimed = AtomicUsize::new(0);
    let written = std::thread::scope(|scope| -> io::Result<()> {
        let (send, receive) = mpsc::sync_channel::<(usize, Vec<u8>)>(workers * 2);
        for _ in 0..workers {
            let send = send.clone();
            let (chunks, claimed) = (&chunks, &claimed);
            scope.spawn(move || {
                loop {
                    let index = claimed.fetch_add(1, Ordering::Relaxed);
                    let Some(part) = chunks.get(index) else { break };
                    let mut buffer = Vec::with_capacity(part.len() * 640);
                    for (i, skill) in part.iter().enumerate() {
                        if index > 0 || i > 0 {
                            buffer.push(b',');
                        }
                        serde_json::to_writer(&mut buffer, skill).expect("a skill serializes");
                        if let Some(version) = release(skill)
                            && buffer.last() == Some(&b'}')
                        {
                            buffer.pop();
                            buffer.extend_from_slice(b",\"release\":");
                            serde_json::to_writer(&mut buffer, &version).expect("a string serializes");
                            buffer.push(b'}');
                        }
                    }
                    if send.send((index, buffer)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(send);
        let mut pending = BTreeMap::new();
        let mut next = 0;
        for (index, buffer) in receive.iter() {
            pending.insert(index, buffer);
            while let Some(buffer) = pending.remove(&next) {
                out.write_all(&buffer)?;
                next += 1;
            }
        }
        if next != chunks.len() {
            return Err(io::Error::other("a serializing worker stopped early"));
        }
        Ok(())
    });
    written?;
    let mut tail = Vec::with_capacity(256);
    tail.extend_from_slice(b"],\"diagnostics\":");
    serde_json::to_writer(&mut tail, diagnostics).map_err(io::Error::other)?;
    tail.extend_from_slice(b"}\n");
    out.write_all(&tail)?;
    out.flush()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde::Serialize;
    use skillstore::backends::{MemoryBackend, PutMode, SkillBackend, VPath, Version};
    use skillstore::catalog::SkillRecord;
    use skillstore::{Catalog, LoadOptions, Shadowed, SkillMetadata, Source, SourceList};

    use super::*;

    #[derive(Serialize)]
    struct Whole<'a> {
        skills: &'a [Skill],
        diagnostics: &'a [Diagnostic],
    }

    async fn catalog(skills: usize) -> Catalog {
        let backend = MemoryBackend::new();
        for i in 0..skills {
            let text = format!(
                "---\nname: skill-{i}\ndescription: \"Does thing {i}; quotes \\\" and tabs \\t survive\"\n---\nBody\n"
            );
            let path = VPath::new(format!("/skills/skill-{i}/SKILL.md")).unwrap();
            backend.put(&path, text.into(), PutMode::Overwrite).await.unwrap();
        }
        let broken = VPath::new("/skills/broken/SKILL.md").unwrap();
        backend
            .put(&broken, "no frontmatter".into(), PutMode::Overwrite)
            .await
            .unwrap();
        let sources = SourceList::from_sources([Source::parse("/skills/").unwrap()]).unwrap();
        let backend: Arc<dyn SkillBackend> = Arc::new(backend);
        Catalog::load(backend, sources, LoadOptions::default()).await
    }

    fn expected(catalog: &Catalog) -> Vec<u8> {
        let mut bytes = serde_json::to_vec(&Whole {
            skills: catalog.skills(),
            diagnostics: catalog.diagnostics(),
        })
        .unwrap();
        bytes.push(b'\n');
        bytes
    }

    #[tokio::test]
    async fn chunks_come_out_in_order_as_one_object() {
        let catalog = catalog(301).await;
        assert_eq!(catalog.skills().len(), 301);
        assert!(!catalog.diagnostics().is_empty());
        for chunk in [1, 7, 128, 301, 1000] {
            let mut out = Vec::new();
            write(catalog.skills(), catalog.diagnostics(), &mut out, chunk).unwrap();
            assert_eq!(out, expected(&catalog), "chunk of {chunk}");
        }
    }

    fn every_field(text: &str, enabled: bool) -> Skill {
        let metadata = SkillMetadata {
            name: format!("n{text}"),
            description: format!("{text} and a longer tail of plain words to pass one block {text}"),
            license: Some(text.to_owned()),
            compatibility: enabled.then(|| text.to_owned()),
            metadata: [(text.to_owned(), text.to_owned()), ("k".to_owned(), String::new())]
                .into_iter()
                .collect(),
            allowed_tools: vec![text.to_owned(), "Read".to_owned()],
        };
        Skill::from(SkillRecord {
            metadata: Arc::new(metadata),
            path: VPath::new("/team/a b/SKILL.md").unwrap(),
            source: text.to_owned(),
            enabled,
            shadowed: vec![
                Shadowed {
                    source: "base".into(),
                    path: VPath::new("/base/x/SKILL.md").unwrap(),
                },
                Shadowed {
                    source: text.to_owned(),
                    path: VPath::new("/user/é/SKILL.md").unwrap(),
                },
            ],
            version: Version::new("v1"),
            commit: enabled.then(|| Arc::from("0123456789abcdef0123456789abcdef01234567")),
            digest: enabled
                .then(|| Arc::from("sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef")),
            signer: enabled.then(|| Arc::from(text)),
        })
    }

    #[test]
    fn a_skill_is_written_as_serde_json_writes_it() {
        let controls: String = (0u8..0x20).map(char::from).collect();
        let texts = [
            String::new(),
            "plain".to_owned(),
            controls,
            "quote \" backslash \\ slash / del \u{7f}".to_owned(),
            "unicode é → 日本語 \u{2028} \u{feff} 🙂".to_owned(),
            "x".repeat(15) + "\n" + &"y".repeat(33) + "\"",
        ];
        for text in &texts {
            for enabled in [true, false] {
                let skill = every_field(text, enabled);
                let mut ours = Vec::new();
                write(std::slice::from_ref(&skill), &[], &mut ours, CHUNK).unwrap();
                let ours = ours[b"{\"skills\":[".len()..ours.len() - b"],\"diagnostics\":[]}\n".len()].to_vec();
                assert_eq!(
                    String::from_utf8(ours).unwrap(),
                    serde_json::to_string(&skill).unwrap(),
                    "{text:?}"
                );
            }
        }
    }

    #[tokio::test]
    async fn an_empty_catalog_is_an_empty_list() {
        let catalog = catalog(0).await;
        let mut out = Vec::new();
        write(catalog.skills(), catalog.diagnostics(), &mut out, CHUNK).unwrap();
        assert_eq!(out, expected(&catalog));
        assert!(out.starts_with(b"{\"skills\":[],\"diagnostics\":["));
    }

    /// Accepts `room` bytes, then fails every write.
    struct FailsAfter {
        room: usize,
        written: Vec<u8>,
    }

    impl Write for FailsAfter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.written.len() + buf.len() > self.room {
                return Err(io::Error::new(io::ErrorKind::BrokenPipe, "closed"));
            }
            self.written.extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// Panics on its second write.
    struct PanicsOnSecondWrite(usize);

    impl Write for PanicsOnSecondWrite {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0 += 1;
            assert!(self.0 < 2, "the output broke");
            Ok(buf.len())
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test]
    async fn a_panicking_worker_ends_the_others_waits() {
        let catalog = catalog(301).await;
        let skills = catalog.skills().to_vec();
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let outcome = std::panic::catch_unwind(|| write(&skills, &[], PanicsOnSecondWrite(0), 1));
            let _ = sender.send(outcome.is_err());
        });
        let panicked = receiver
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("every worker returns");
        assert!(panicked, "the panic reaches the caller");
    }

    #[tokio::test]
    async fn a_failed_write_stops_every_worker_and_is_returned() {
        let catalog = catalog(301).await;
        let whole = expected(&catalog);
        let mut out = FailsAfter {
            room: whole.len() / 2,
            written: Vec::new(),
        };
        let err = write(catalog.skills(), catalog.diagnostics(), &mut out, 7).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::BrokenPipe);
        assert!(
            whole.starts_with(&out.written),
            "what was written is a prefix of the output"
        );
        assert!(out.written.len() < whole.len());
    }
}
