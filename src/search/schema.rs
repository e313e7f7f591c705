//! The index's fields and analyzers.
//!
//! Every text field is cut at anything that is not a letter or a digit (so
//! a name's hyphens and underscores split it into words), lowercased, rid
//! of English stop words and stemmed with the English stemmer. A document
//! stores only what a hit is checked against the catalog with: the
//! SKILL.md path, its version and the skill's name.

use tantivy::Index;

use super::analysis::CachedWords;
use tantivy::schema::{Field, IndexRecordOption, STORED, STRING, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::{
    Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
};

/// The analyzer every text field uses.
pub const ANALYZER: &str = "skill_en";

/// The fields of a skill's document.
#[derive(Debug, Clone, Copy)]
pub struct Fields {
    /// The SKILL.md's virtual path: the document's key.
    pub path: Field,
    /// The SKILL.md's version when indexed.
    pub version: Field,
    /// The name, stored and indexed.
    pub name: Field,
    /// The description.
    pub description: Field,
    /// The body's headings.
    pub headings: Field,
    /// The name, description and whole body as one text.
    pub all: Field,
}

impl Fields {
    /// The schema and its fields.
    pub fn schema() -> (Schema, Fields) {
        let mut builder = Schema::builder();
        let indexing = TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqs);
        let text = TextOptions::default().set_indexing_options(indexing);
        let fields = Fields {
            path: builder.add_text_field("path", STRING | STORED),
            version: builder.add_text_field("version", STORED),
            name: builder.add_text_field("name", text.clone().set_stored()),
            description: builder.add_text_field("description", text.clone()),
            headings: builder.add_text_field("headings", text.clone()),
            all: builder.add_text_field("all", text),
        };
        (builder.build(), fields)
    }

    /// The searched fields with their boosts. The whole text, scored as
    /// one field, carries the ranking; a word also in the name, the
    /// description or a heading adds to it (weights chosen on the search
    /// evaluation, see the book's search page).
    pub fn weighted(&self) -> [(Field, f32); 4] {
        [
            (self.all, 1.0),
            (self.name, 0.3),
            (self.description, 0.3),
            (self.headings, 0.3),
        ]
    }
}

/// Registers [`ANALYZER`] on `index` (the pipeline above, each distinct
/// word analyzed once per indexing thread and field).
pub fn register(index: &Index) {
    let mut builder = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .dynamic();
    if let Some(stop) = StopWordFilter::new(Language::English) {
        builder = builder.filter_dynamic(stop);
    }
    let pipeline = builder.filter_dynamic(Stemmer::new(Language::English)).build();
    index
        .tokenizers()
        .register(ANALYZER, TextAnalyzer::from(CachedWords::new(pipeline)));
}
