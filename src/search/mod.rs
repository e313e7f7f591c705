//! Full-text search over a catalog's winners (BM25, with tantivy).
//!
//! A [`SearchIndex`] holds one document per winning skill: its name,
//! description, the headings of its SKILL.md body, and all of these with
//! the rest of the body as one text, each field weighted
//! ([`schema::Fields::weighted`]). [`SearchIndex::refresh`]
//! brings it level with a catalog, reading only the SKILL.md files whose
//! version the index does not hold; [`SearchIndex::search`] answers a query
//! with the catalog's own records, best first.
//!
//! Guarantees:
//! - a hit is always the catalog's winner for its name at the version
//!   indexed: a shadowed skill, a removed one, or one changed since the
//!   last refresh is never a result;
//! - a disabled skill is a result only when [`SearchOptions::include_disabled`]
//!   asks for it;
//! - a query is words, never syntax: any text is accepted.
//!
//! The index lives in memory, or in the local cache directory
//! ([`SearchIndex::open_cached`]), where a later process reuses it and
//! reads only the SKILL.md files that changed since.

mod analysis;
mod schema;
mod store;
pub mod text;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use serde::Serialize;
use skillstore_backends::{ErrorKind, VPath, Version};
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, Value};
use tantivy::tokenizer::TokenStream;
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::cache::CacheSettings;
use crate::catalog::{Catalog, Skill};
use crate::error::{Error, Result};

pub use schema::Fields;
pub use store::MAX_CACHED_INDEXES;

/// The most results one query returns.
pub const MAX_LIMIT: usize = 1000;

/// How many SKILL.md files a refresh reads at once.
const READ_CONCURRENCY: usize = 32;

/// Each indexing thread's memory budget: past it, the thread writes out
/// a segment. Large enough that a build of 10,000 typical skills writes one
/// segment per thread and so merges none (tantivy's minimum, 15 MB, wrote
/// several and merged them, about 15% more work); memory is taken as the
/// text needs it, not up front.
const WRITER_BUDGET_PER_THREAD: usize = 100_000_000;

/// The version recorded for a skill whose SKILL.md could not be read: it
/// equals no backend's version, so the next refresh reads it again.
const UNREAD: &str = "\u{0}unread";

/// What a query asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SearchOptions {
    /// The most results (at most [`MAX_LIMIT`]).
    pub limit: usize,
    /// Whether disabled skills may be results.
    pub include_disabled: bool,
}

impl Default for SearchOptions {
    fn default() -> Self {
        SearchOptions {
            limit: 10,
            include_disabled: false,
        }
    }
}

/// One result: the catalog's record of a skill and its score.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SearchHit {
    /// The skill's name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// The source it comes from.
    pub source: String,
    /// Its SKILL.md in the namespace.
    pub path: VPath,
    /// The BM25 score (higher is better; comparable within one query only).
    pub score: f32,
    /// Whether it is enabled (always true unless disabled skills were asked for).
    #[serde(skip)]
    pub enabled: bool,
}

/// What a refresh did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RefreshStats {
    /// Skills (re)indexed: their SKILL.md was read.
    pub indexed: usize,
    /// Documents removed (skills gone, or no longer winners).
    pub removed: usize,
    /// Skills whose document was kept as it was.
    pub kept: usize,
}

/// A full-text index over one catalog's winners. Searches run concurrently
/// with each other and with a refresh; refreshes take turns.
pub struct SearchIndex {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    /// What the index holds: SKILL.md path -> version indexed.
    known: tokio::sync::Mutex<HashMap<String, Version>>,
    /// Where it lives, for diagnostics.
    cached: bool,
}

impl std::fmt::Debug for SearchIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchIndex")
            .field("documents", &self.len())
            .field("cached", &self.cached)
            .finish_non_exhaustive()
    }
}

impl SearchIndex {
    /// An empty index held in memory.
    pub fn in_memory() -> SearchIndex {
        let (schema, fields) = Fields::schema();
        let index = Index::create_in_ram(schema);
        Self::from_index(index, fields, HashMap::new(), false).expect("an index in memory opens")
    }

    /// The index kept in the local cache for the namespace `identity`
    /// (which must name the namespace's storage, so two namespaces never
    /// share one), with what it already holds; in memory when the cache
    /// cannot be opened or its index is unusable (that only costs reads).
    pub fn open_cached(settings: &CacheSettings, identity: &str) -> SearchIndex {
        match store::open(settings, identity) {
            Some((index, fields)) => match store::documents(&index, fields) {
                Ok(known) => match Self::from_index(index, fields, known, true) {
                    Ok(search) => return search,
                    Err(e) => tracing::debug!(error = %e, "cannot read the cached search index"),
                },
                Err(e) => tracing::debug!(error = %e, "cannot read the cached search index"),
            },
            None => tracing::debug!("no cached search index; building one in memory"),
        }
        Self::in_memory()
    }

    fn from_index(index: Index, fields: Fields, known: HashMap<String, Version>, cached: bool) -> Result<SearchIndex> {
        schema::register(&index);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(search_error)?;
        Ok(SearchIndex {
            index,
            reader,
            fields,
            known: tokio::sync::Mutex::new(known),
            cached,
        })
    }

    /// Whether the index lives in the local cache directory.
    pub fn is_cached(&self) -> bool {
        self.cached
    }

    /// How many documents the index holds.
    pub fn len(&self) -> usize {
        self.reader.searcher().num_docs() as usize
    }

    /// True when the index holds no document.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Brings the index level with `catalog`'s winners (enabled or not):
    /// reads the SKILL.md of each skill whose path and version the index
    /// does not hold, removes the documents of skills that are no longer
    /// winners, and keeps the rest without reading them. A SKILL.md that
    /// cannot be read is indexed by name and description and read again at
    /// the next refresh.
    pub async fn refresh(&self, catalog: &Catalog) -> Result<RefreshStats> {
        let mut known = self.known.lock().await;
        let winners: HashMap<&str, &Skill> = catalog.skills().iter().map(|s| (s.path.as_str(), s)).collect();
        let stale: Vec<&Skill> = catalog
            .skills()
            .iter()
            .filter(|s| known.get(s.path.as_str()).is_none_or(|v| v != &s.version))
            .collect();
        let gone: Vec<String> = known
            .keys()
            .filter(|path| !winners.contains_key(String::as_str(path)))
            .cloned()
            .collect();
        let mut stats = RefreshStats {
            indexed: stale.len(),
            removed: gone.len(),
            kept: catalog.skills().len() - stale.len(),
        };
        if stale.is_empty() && gone.is_empty() {
            return Ok(stats);
        }
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .clamp(1, 4)
            .min(stale.len().div_ceil(500).max(1));
        let writer: IndexWriter<TantivyDocument> = self
            .index
            .writer_with_num_threads(threads, threads * WRITER_BUDGET_PER_THREAD)
            .map_err(search_error)?;
        for path in &gone {
            writer.delete_term(Term::from_field_text(self.fields.path, path));
            known.remove(path);
        }
        // Owned skills (cheap clones) keep the reads' future `Send` for
        // any caller.
        let jobs: Vec<Skill> = stale.iter().map(|s| (*s).clone()).collect();
        let mut reads = futures::stream::iter(jobs)
            .map(|skill: Skill| async move {
                let file = catalog.read_skill(skill.name()).await;
                (skill, file)
            })
            .buffer_unordered(READ_CONCURRENCY);
        let mut versions = Vec::with_capacity(stale.len());
        while let Some((skill, file)) = reads.next().await {
            let (body, version) = match file {
                Ok(bytes) => (text::body(&bytes), skill.version.clone()),
                Err(e) => {
                    tracing::debug!(skill = skill.name(), error = %e, "cannot read a SKILL.md to index");
                    (String::new(), Version::new(UNREAD))
                }
            };
            // A path the index does not hold has no document to replace
            // (every path of a cold build).
            if known.contains_key(skill.path.as_str()) {
                writer.delete_term(Term::from_field_text(self.fields.path, skill.path.as_str()));
            }
            writer
                .add_document(self.document(&skill, &version, &body))
                .map_err(search_error)?;
            versions.push((skill.path.as_str().to_owned(), version));
        }
        drop(reads);
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || -> Result<()> {
            let mut writer = writer;
            writer.commit().map_err(search_error)?;
            writer.wait_merging_threads().map_err(search_error)?;
            reader.reload().map_err(search_error)
        })
        .await
        .map_err(search_error)??;
        let unread = versions.iter().filter(|(_, v)| v.as_str() == UNREAD).count();
        stats.indexed -= unread.min(stats.indexed);
        known.extend(versions);
        Ok(stats)
    }

    fn document(&self, skill: &Skill, version: &Version, body: &str) -> TantivyDocument {
        let headings = text::headings(body);
        let mut doc = TantivyDocument::default();
        doc.add_text(self.fields.path, skill.path.as_str());
        doc.add_text(self.fields.version, version.as_str());
        doc.add_text(self.fields.name, skill.name());
        doc.add_text(self.fields.description, &skill.metadata.description);
        doc.add_text(self.fields.headings, &headings);
        // The whole text: the body's words are its headings' and the rest's
        // (a heading's `#` marks are no word), and without positions the
        // order of a field's words does not count.
        for part in [skill.name(), &skill.metadata.description, body] {
            doc.add_text(self.fields.all, part);
        }
        doc
    }

    /// The skills of `catalog` that best match `query`, best first, at most
    /// `options.limit`. Each hit is checked against `catalog`: only its
    /// winner for the name, at the version indexed, is returned (refresh
    /// the index with the same catalog first). A query with no word left
    /// after analysis has no results.
    pub fn search(&self, catalog: &Catalog, query: &str, options: SearchOptions) -> Result<Vec<SearchHit>> {
        let limit = options.limit.min(MAX_LIMIT);
        let Some(query) = self.query(query) else {
            return Ok(Vec::new());
        };
        if limit == 0 {
            return Ok(Vec::new());
        }
        // Disabled skills are filtered after ranking: asking for as many
        // more hits as there are disabled skills keeps `limit` exact.
        // So are skills withdrawn since their check (never served).
        let withdrawn = catalog.withdrawn_count();
        let disabled = withdrawn
            + if options.include_disabled {
                0
            } else {
                catalog.skills().iter().filter(|s| !s.enabled).count()
            };
        let searcher = self.reader.searcher();
        let top = searcher
            .search(&query, &TopDocs::with_limit(limit + disabled).order_by_score())
            .map_err(search_error)?;
        let mut hits = Vec::with_capacity(limit);
        for (score, address) in top {
            let doc: TantivyDocument = searcher.doc(address).map_err(search_error)?;
            let stored = |field| doc.get_first(field).and_then(|v| v.as_str()).unwrap_or_default();
            let Some(skill) = catalog.served_skill(stored(self.fields.name), options.include_disabled) else {
                continue;
            };
            if skill.path.as_str() != stored(self.fields.path) || skill.version.as_str() != stored(self.fields.version)
            {
                continue;
            }
            hits.push(SearchHit {
                name: skill.name().to_owned(),
                description: skill.metadata.description.clone(),
                source: skill.source.clone(),
                path: skill.path.clone(),
                score,
                enabled: skill.enabled,
            });
            if hits.len() == limit {
                break;
            }
        }
        Ok(hits)
    }

    /// The query for `text`: each distinct word after analysis, sought in
    /// every field with the field's weight; a document's score is the sum.
    fn query(&self, text: &str) -> Option<Box<dyn Query>> {
        let mut analyzer = self.index.tokenizers().get(schema::ANALYZER)?;
        let mut words = Vec::new();
        let mut seen = HashSet::new();
        let mut stream = analyzer.token_stream(text);
        while let Some(token) = stream.next() {
            if seen.insert(token.text.clone()) {
                words.push(token.text.clone());
            }
        }
        if words.is_empty() {
            return None;
        }
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for word in &words {
            for (field, boost) in self.fields.weighted() {
                let term = TermQuery::new(Term::from_field_text(field, word), IndexRecordOption::WithFreqs);
                clauses.push((Occur::Should, Box::new(BoostQuery::new(Box::new(term), boost))));
            }
        }
        Some(Box::new(BooleanQuery::new(clauses)))
    }
}

/// A failure of the index itself (its storage, a thread), as an `other`
/// storage error whose detail names the cause.
fn search_error(e: impl std::fmt::Display) -> Error {
    Error::Backend(skillstore_backends::Error::new(ErrorKind::Other).with_detail(format!("search index: {e}")))
}

/// Shares an index between tasks.
pub type SharedSearchIndex = Arc<SearchIndex>;
