//! `Namespace.grep`: a literal search of files, read in bounded batches,
//! with its matches, bytes and line lengths capped.

use memchr::memmem;
use pyo3::prelude::*;

/// The most matches one search returns unless told otherwise.
pub const DEFAULT_MAX_MATCHES: usize = 1000;

/// The most bytes one search reads unless told otherwise (256 MiB): the
/// batch that crosses it is the last.
pub const DEFAULT_MAX_BYTES: u64 = 256 * 1024 * 1024;

/// The most characters of a matching line returned unless told otherwise;
/// a longer line is cut there.
pub const DEFAULT_MAX_LINE_CHARS: usize = 2000;

/// The bytes of read limit a batch may hold unless told otherwise
/// (16 MiB): files are read `max(1, batch_bytes // read_limit)` at a time,
/// so under the default 10 MiB read limit one at a time.
pub const DEFAULT_BATCH_BYTES: u64 = 16 * 1024 * 1024;

/// The most files one batch reads, whatever the read limit.
const MAX_BATCH_FILES: usize = 64;

/// What a search found: the matches, whether it stopped early and why,
/// and what it read.
#[pyclass(name = "GrepReport", module = "skillstore", frozen, get_all)]
pub struct PyGrepReport {
    /// `(path, line, text)` of each matching line, in the order of the files
    /// given and of their lines; `line` counts from 1 and `text` is the
    /// line without its `\n`, cut to `max_line_chars` characters.
    pub matches: Vec<(String, u64, String)>,
    /// True when the search stopped before it had looked at every file and
    /// line: more matches exist than `max_matches`, or `max_bytes` was
    /// reached with files left.
    pub truncated: bool,
    /// Which bound stopped it: `max_matches` or `max_bytes`; None when it
    /// was not stopped.
    pub reason: Option<&'static str>,
    /// How many files were read and searched.
    pub files_searched: usize,
    /// How many files were left out: not found, withheld, refused, over the
    /// read limit, or not UTF-8 text.
    pub files_skipped: usize,
    /// The bytes read in all.
    pub bytes_read: u64,
    /// The most files read at once (the batch size).
    pub max_batch: usize,
    /// The most bytes of files held at once.
    pub peak_bytes: u64,
}

#[pymethods]
impl PyGrepReport {
    fn __repr__(&self) -> String {
        format!(
            "GrepReport(matches={}, truncated={}, reason={:?}, files_searched={})",
            self.matches.len(),
            if self.truncated { "True" } else { "False" },
            self.reason,
            self.files_searched
        )
    }
}

/// The bounds of one search.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    /// The most matches returned.
    pub max_matches: usize,
    /// The most bytes read: no batch starts once as many were read.
    pub max_bytes: u64,
    /// The most characters of a line returned.
    pub max_line_chars: usize,
    /// How many files one batch reads.
    pub batch: usize,
}

impl Bounds {
    /// The batch size for `batch_bytes` under the read limit `read_limit`.
    pub fn batch_for(batch_bytes: u64, read_limit: u64) -> usize {
        let files = batch_bytes / read_limit.max(1);
        usize::try_from(files).unwrap_or(usize::MAX).clamp(1, MAX_BATCH_FILES)
    }
}

/// A search in progress: the matches so far and the counters.
pub struct Search<'a> {
    pattern: &'a [u8],
    bounds: Bounds,
    report: PyGrepReport,
}

impl<'a> Search<'a> {
    /// A search of `pattern` within `bounds`.
    pub fn new(pattern: &'a str, bounds: Bounds) -> Self {
        Search {
            pattern: pattern.as_bytes(),
            bounds,
            report: PyGrepReport {
                matches: Vec::new(),
                truncated: false,
                reason: None,
                files_searched: 0,
                files_skipped: 0,
                bytes_read: 0,
                max_batch: 0,
                peak_bytes: 0,
            },
        }
    }

    /// Whether the next batch may be read; stops the search at `max_bytes`
    /// when files are left.
    pub fn may_read_more(&mut self) -> bool {
        if self.report.truncated {
            return false;
        }
        if self.report.bytes_read >= self.bounds.max_bytes {
            self.stop("max_bytes");
            return false;
        }
        true
    }

    /// Counts files left out without being read.
    pub fn skip(&mut self, count: usize) {
        self.report.files_skipped += count;
    }

    /// Searches one batch read at once: `(path, bytes)` per file read, and
    /// how many of the batch could not be read.
    pub fn batch(&mut self, files: Vec<(String, bytes::Bytes)>, unread: usize) {
        self.report.max_batch = self.report.max_batch.max(files.len() + unread);
        let held: u64 = files.iter().map(|(_, data)| data.len() as u64).sum();
        self.report.peak_bytes = self.report.peak_bytes.max(held);
        self.report.bytes_read += held;
        self.report.files_skipped += unread;
        for (path, data) in files {
            if self.report.truncated {
                return;
            }
            if std::str::from_utf8(&data).is_err() {
                self.report.files_skipped += 1;
                continue;
            }
            self.report.files_searched += 1;
            self.file(&path, &data);
        }
    }

    fn stop(&mut self, reason: &'static str) {
        self.report.truncated = true;
        self.report.reason = Some(reason);
    }

    /// Adds the matching line `line` (1-based) of `path`; false once a
    /// match past `max_matches` stopped the search.
    fn found(&mut self, path: &str, line: u64, text: &[u8]) -> bool {
        if self.report.matches.len() == self.bounds.max_matches {
            self.stop("max_matches");
            return false;
        }
        // The file is UTF-8 and a line ends at `\n`, so the line is too.
        let text = std::str::from_utf8(text).unwrap_or_default();
        let end = text
            .char_indices()
            .nth(self.bounds.max_line_chars)
            .map_or(text.len(), |(i, _)| i);
        self.report
            .matches
            .push((path.to_owned(), line, text[..end].to_owned()));
        true
    }

    /// The lines of `data` (split at `\n`, as `str.split("\n")` splits)
    /// holding the pattern.
    fn file(&mut self, path: &str, data: &[u8]) {
        if self.pattern.contains(&b'\n') {
            return;
        }
        if self.pattern.is_empty() {
            for (i, line) in data.split(|b| *b == b'\n').enumerate() {
                if !self.found(path, i as u64 + 1, line) {
                    return;
                }
            }
            return;
        }
        let finder = memmem::Finder::new(self.pattern);
        let mut line_no: u64 = 1;
        let mut counted_to = 0;
        let mut at = 0;
        while let Some(hit) = finder.find(&data[at..]).map(|i| at + i) {
            line_no += memchr::memchr_iter(b'\n', &data[counted_to..hit]).count() as u64;
            let start = memchr::memrchr(b'\n', &data[..hit]).map_or(0, |i| i + 1);
            let end = memchr::memchr(b'\n', &data[hit..]).map_or(data.len(), |i| hit + i);
            if !self.found(path, line_no, &data[start..end]) {
                return;
            }
            counted_to = hit;
            // The next line, if any.
            at = end + 1;
            if at > data.len() {
                return;
            }
        }
    }

    /// The report.
    pub fn finish(self) -> PyGrepReport {
        self.report
    }
}
