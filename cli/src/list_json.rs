//! `list --json` output, serialized on every core and streamed in order.

use std::io::{self, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};

use skillstore::{Diagnostic, Skill};

/// Skills per chunk: about 80 KiB of JSON, so a few chunks in flight is
/// all the memory the output takes, whatever the catalog's size.
pub const CHUNK: usize = 128;

/// Writes `{"skills":[...],"diagnostics":[...]}` and a newline to `out`,
/// byte for byte what serializing one object with those two fields gives.
///
/// Workers (one per core) take chunks of `chunk` skills in turn, serialize
/// each into a buffer they reuse, and write it when every earlier chunk is
/// written, so the output is in catalog order and no more than one chunk
/// per worker is held at a time.
pub fn write<W: Write + Send>(skills: &[Skill], diagnostics: &[Diagnostic], out: W, chunk: usize) -> io::Result<()> {
    let chunks: Vec<&[Skill]> = skills.chunks(chunk.max(1)).collect();
    let workers = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(chunks.len())
        .max(1);
    let turn = Turn {
        state: Mutex::new(Writer {
            out,
            next: 0,
            failed: None,
        }),
        advanced: Condvar::new(),
        claimed: AtomicUsize::new(0),
    };
    turn.write_first(b"{\"skills\":[")?;
    std::thread::scope(|scope| {
        for _ in 1..workers {
            scope.spawn(|| turn.work(&chunks));
        }
        turn.work(&chunks);
    });
    let mut state = turn.state.into_inner().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(err) = state.failed.take() {
        return Err(err);
    }
    let mut tail = Vec::with_capacity(256);
    tail.extend_from_slice(b"],\"diagnostics\":");
    serde_json::to_writer(&mut tail, diagnostics).map_err(io::Error::other)?;
    tail.extend_from_slice(b"}\n");
    state.out.write_all(&tail)?;
    state.out.flush()
}

/// The output and whose turn it is to write.
struct Writer<W> {
    out: W,
    /// The chunk to be written next.
    next: usize,
    /// The first failure; every worker stops once it is set.
    failed: Option<io::Error>,
}

struct Turn<W> {
    state: Mutex<Writer<W>>,
    advanced: Condvar,
    /// The next chunk no worker has taken yet.
    claimed: AtomicUsize,
}

impl<W: Write> Turn<W> {
    fn write_first(&self, bytes: &[u8]) -> io::Result<()> {
        let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        state.out.write_all(bytes)
    }

    /// Takes chunks until none is left or the output failed.
    fn work(&self, chunks: &[&[Skill]]) {
        let _stop_others = StopOnPanic(self);
        let mut buffer = Vec::new();
        loop {
            let n = self.claimed.fetch_add(1, Ordering::Relaxed);
            let Some(chunk) = chunks.get(n) else { return };
            buffer.clear();
            serialize(chunk, n > 0, &mut buffer);
            let mut state = self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            while state.next != n && state.failed.is_none() {
                state = self
                    .advanced
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
            }
            if state.failed.is_some() {
                return;
            }
            match state.out.write_all(&buffer) {
                Ok(()) => state.next += 1,
                Err(err) => state.failed = Some(err),
            }
            let stop = state.failed.is_some();
            drop(state);
            self.advanced.notify_all();
            if stop {
                return;
            }
        }
    }
}

/// Ends every worker's wait when its own thread unwinds: the chunk it held
/// will never be written, and nobody may wait for it.
struct StopOnPanic<'a, W>(&'a Turn<W>);

impl<W> Drop for StopOnPanic<'_, W> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let mut state = self.0.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
            state
                .failed
                .get_or_insert_with(|| io::Error::other("a serializer thread panicked"));
            drop(state);
            self.0.advanced.notify_all();
        }
    }
}

/// Appends the skills of one chunk, comma-separated, with a leading comma
/// unless it is the first chunk.
fn serialize(chunk: &[Skill], leading_comma: bool, buffer: &mut Vec<u8>) {
    for (i, skill) in chunk.iter().enumerate() {
        if i > 0 || leading_comma {
            buffer.push(b',');
        }
        skill_json(skill, buffer);
    }
}

/// One skill as JSON, byte for byte what `serde_json` makes of [`Skill`]
/// (fields in declaration order, the metadata flattened, the version
/// left out), with strings escaped a block at a time.
fn skill_json(skill: &Skill, out: &mut Vec<u8>) {
    let meta = &skill.metadata;
    out.extend_from_slice(b"{\"name\":");
    string(&meta.name, out);
    out.extend_from_slice(b",\"description\":");
    string(&meta.description, out);
    out.extend_from_slice(b",\"license\":");
    optional(meta.license.as_deref(), out);
    out.extend_from_slice(b",\"compatibility\":");
    optional(meta.compatibility.as_deref(), out);
    out.extend_from_slice(b",\"metadata\":{");
    for (i, (key, value)) in meta.metadata.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(key, out);
        out.push(b':');
        string(value, out);
    }
    out.extend_from_slice(b"},\"allowed_tools\":[");
    for (i, tool) in meta.allowed_tools.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(tool, out);
    }
    out.extend_from_slice(b"],\"path\":");
    string(skill.path.as_str(), out);
    out.extend_from_slice(b",\"source\":");
    string(&skill.source, out);
    out.extend_from_slice(if skill.enabled {
        b",\"enabled\":true,\"shadowed\":["
    } else {
        b",\"enabled\":false,\"shadowed\":["
    });
    for (i, shadowed) in skill.shadowed.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        out.extend_from_slice(b"{\"source\":");
        string(&shadowed.source, out);
        out.extend_from_slice(b",\"path\":");
        string(shadowed.path.as_str(), out);
        out.push(b'}');
    }
    out.extend_from_slice(b"]}");
}

fn optional(text: Option<&str>, out: &mut Vec<u8>) {
    match text {
        Some(text) => string(text, out),
        None => out.extend_from_slice(b"null"),
    }
}

/// A JSON string as `serde_json` writes it: `"` and `\\` escaped, the
/// control characters below U+0020 as `\b \t \n \f \r` or `\u00XX`, and
/// everything else (non-ASCII included) as it is.
fn string(text: &str, out: &mut Vec<u8>) {
    const BLOCK: usize = 16;
    let needs_escape = |b: u8| b < 0x20 || b == b'"' || b == b'\\';
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + 2);
    out.push(b'"');
    let mut clean = 0;
    let mut at = 0;
    while at < bytes.len() {
        // Whole blocks without anything to escape are copied at once; the
        // check has no early exit, so it compiles to vector compares.
        if at + BLOCK <= bytes.len()
            && !bytes[at..at + BLOCK]
                .iter()
                .fold(false, |seen, &b| seen | needs_escape(b))
        {
            at += BLOCK;
            continue;
        }
        let b = bytes[at];
        if needs_escape(b) {
            out.extend_from_slice(&bytes[clean..at]);
            escape(b, out);
            clean = at + 1;
        }
        at += 1;
    }
    out.extend_from_slice(&bytes[clean..]);
    out.push(b'"');
}

fn escape(b: u8, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    match b {
        b'"' => out.extend_from_slice(b"\\\""),
        b'\\' => out.extend_from_slice(b"\\\\"),
        0x08 => out.extend_from_slice(b"\\b"),
        0x09 => out.extend_from_slice(b"\\t"),
        0x0a => out.extend_from_slice(b"\\n"),
        0x0c => out.extend_from_slice(b"\\f"),
        0x0d => out.extend_from_slice(b"\\r"),
        _ => out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 0xf)],
        ]),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde::Serialize;
    use skillstore::backends::{MemoryBackend, PutMode, SkillBackend, VPath, Version};
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
        Skill {
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
        }
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
                skill_json(&skill, &mut ours);
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
