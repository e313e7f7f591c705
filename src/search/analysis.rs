//! The analyzer's pipeline with a memory of the words it has seen.
//!
//! Analysis (lowercasing, stop words, the Snowball stemmer) depends on a
//! word alone, and a body repeats its words: [`CachedWords`] cuts the text
//! where tantivy's `SimpleTokenizer` does (at anything that is not a letter
//! or a digit), runs each word it has not seen through the pipeline it
//! wraps, and remembers the outcome (a term, or nothing for a dropped
//! word). Its tokens are therefore exactly the wrapped pipeline's, at the
//! same positions; only the work is not repeated.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use tantivy::tokenizer::{TextAnalyzer, Token, TokenStream, Tokenizer};

/// The most words remembered by one analyzer; past it, the memory starts
/// over (it bounds memory on any text).
const MAX_WORDS: usize = 50_000;

/// A hash for short words, much cheaper than the default's (the map holds
/// words of the indexed text; its worst case only slows indexing).
#[derive(Default, Clone, Copy)]
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            self.add(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        }
        for &b in chunks.remainder() {
            self.add(u64::from(b));
        }
    }

    fn write_u8(&mut self, b: u8) {
        self.add(u64::from(b));
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl WordHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type Words = HashMap<String, Option<String>, BuildHasherDefault<WordHasher>>;

/// A tokenizer giving `pipeline`'s terms for each word of a text. The
/// pipeline must start with a `SimpleTokenizer` and map one word to at most
/// one term.
#[derive(Clone)]
pub struct CachedWords {
    pipeline: TextAnalyzer,
    /// Word as cut from the text -> its term, or `None` when dropped.
    seen: Words,
    token: Token,
}

impl CachedWords {
    /// Wraps `pipeline`, remembering nothing yet.
    pub fn new(pipeline: TextAnalyzer) -> CachedWords {
        CachedWords {
            pipeline,
            seen: Words::default(),
            token: Token::default(),
        }
    }
}

impl Tokenizer for CachedWords {
    type TokenStream<'a> = CachedWordsStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> CachedWordsStream<'a> {
        self.token.reset();
        CachedWordsStream {
            text,
            next: 0,
            pipeline: &mut self.pipeline,
            seen: &mut self.seen,
            token: &mut self.token,
        }
    }
}

/// The terms of one text.
pub struct CachedWordsStream<'a> {
    text: &'a str,
    /// Byte offset where the search for the next word starts.
    next: usize,
    pipeline: &'a mut TextAnalyzer,
    seen: &'a mut Words,
    token: &'a mut Token,
}

impl CachedWordsStream<'_> {
    /// The next word of the text and its byte range, if any. ASCII is
    /// classified byte by byte; any other character as `char` does.
    fn next_word(&mut self) -> Option<(usize, usize)> {
        let start = self.skip(false)?;
        let end = self.skip(true).unwrap_or(self.text.len());
        Some((start, end))
    }

    /// Moves past the characters that are (`word`) or are not letters and
    /// digits; the offset of the first other one, if any.
    fn skip(&mut self, word: bool) -> Option<usize> {
        let bytes = self.text.as_bytes();
        while self.next < bytes.len() {
            let b = bytes[self.next];
            let (alphanumeric, len) = if b.is_ascii() {
                (b.is_ascii_alphanumeric(), 1)
            } else {
                let c = self.text[self.next..].chars().next()?;
                (c.is_alphanumeric(), c.len_utf8())
            };
            if alphanumeric != word {
                return Some(self.next);
            }
            self.next += len;
        }
        None
    }
}

impl TokenStream for CachedWordsStream<'_> {
    fn advance(&mut self) -> bool {
        while let Some((from, to)) = self.next_word() {
            // Every word takes a position, kept or not, as in the pipeline.
            self.token.position = self.token.position.wrapping_add(1);
            let word = &self.text[from..to];
            let term = match self.seen.get(word) {
                Some(term) => term.as_deref(),
                None => {
                    let mut stream = self.pipeline.token_stream(word);
                    let term = stream.advance().then(|| stream.token().text.clone());
                    debug_assert!(!stream.advance(), "one word is at most one term");
                    drop(stream);
                    if self.seen.len() >= MAX_WORDS {
                        self.seen.clear();
                    }
                    self.seen.entry(word.to_owned()).or_insert(term).as_deref()
                }
            };
            if let Some(term) = term {
                self.token.text.clear();
                self.token.text.push_str(term);
                self.token.offset_from = from;
                self.token.offset_to = to;
                return true;
            }
        }
        false
    }

    fn token(&self) -> &Token {
        self.token
    }

    fn token_mut(&mut self) -> &mut Token {
        self.token
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use tantivy::tokenizer::{
        Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer, StopWordFilter, TextAnalyzer,
    };

    use super::*;

    fn pipeline() -> TextAnalyzer {
        TextAnalyzer::builder(SimpleTokenizer::default())
            .filter(RemoveLongFilter::limit(8))
            .filter(LowerCaser)
            .filter(StopWordFilter::new(Language::English).unwrap())
            .filter(Stemmer::new(Language::English))
            .build()
    }

    fn tokens(analyzer: &mut TextAnalyzer, text: &str) -> Vec<(String, usize, usize, usize)> {
        let mut out = Vec::new();
        let mut stream = analyzer.token_stream(text);
        while stream.advance() {
            let t = stream.token();
            out.push((t.text.clone(), t.position, t.offset_from, t.offset_to));
        }
        out
    }

    #[test]
    fn gives_the_pipelines_terms_when_words_repeat() {
        let mut cached = TextAnalyzer::from(CachedWords::new(pipeline()));
        let text = "The Filling of FORMS: fills, filled; the forms é-Über naïve x_y 42 extraordinarily";
        for _ in 0..3 {
            assert_eq!(tokens(&mut cached, text), tokens(&mut pipeline(), text));
        }
        assert!(tokens(&mut cached, "the of and").is_empty());
    }

    proptest! {
        #[test]
        fn any_text_gives_the_pipelines_tokens(
            texts in proptest::collection::vec("[a-zA-Z0-9 _.,éÜßİ\u{3b1}-\u{3c9}\u{4e00}-\u{4e10}-]{0,60}", 1..6)
        ) {
            let mut cached = TextAnalyzer::from(CachedWords::new(pipeline()));
            for text in &texts {
                prop_assert_eq!(tokens(&mut cached, text), tokens(&mut pipeline(), text));
            }
        }
    }
}
