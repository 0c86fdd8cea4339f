//! Tokens for keyword search: Latin-script words lower-cased, stop words
//! dropped and stemmed (Snowball English); CJK runs as overlapping character
//! bigrams (a single character stays a unigram), the usual choice for BM25
//! over Chinese and Japanese without a dictionary.

use rust_stemmers::{Algorithm, Stemmer};

const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "has", "have", "he", "in",
    "is", "it", "its", "of", "on", "or", "that", "the", "this", "to", "was", "were", "will",
    "with", "which", "what", "how", "when", "where", "who", "does", "do", "can", "i", "you",
];

pub struct Tokenizer {
    stemmer: Stemmer,
}

impl Default for Tokenizer {
    fn default() -> Self {
        Tokenizer {
            stemmer: Stemmer::create(Algorithm::English),
        }
    }
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF      // Hiragana, Katakana
        | 0x3400..=0x4DBF    // CJK Extension A
        | 0x4E00..=0x9FFF    // CJK Unified Ideographs
        | 0xAC00..=0xD7AF    // Hangul syllables
        | 0xF900..=0xFAFF    // CJK Compatibility Ideographs
        | 0x20000..=0x2FA1F) // Extensions B-F, supplement
}

impl Tokenizer {
    /// The tokens of `text`, in order.
    pub fn tokens(&self, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        let mut word = String::new();
        let mut cjk: Vec<char> = Vec::new();
        for c in text.chars().chain(std::iter::once(' ')) {
            if is_cjk(c) {
                self.word(&mut word, &mut out);
                cjk.push(c);
            } else {
                Self::cjk_run(&mut cjk, &mut out);
                if c.is_alphanumeric() {
                    word.extend(c.to_lowercase());
                } else {
                    self.word(&mut word, &mut out);
                }
            }
        }
        out
    }

    fn word(&self, word: &mut String, out: &mut Vec<String>) {
        if !word.is_empty() && !STOP.contains(&word.as_str()) {
            out.push(self.stemmer.stem(word).into_owned());
        }
        word.clear();
    }

    fn cjk_run(run: &mut Vec<char>, out: &mut Vec<String>) {
        match run.len() {
            0 => {}
            1 => out.push(run[0].to_string()),
            _ => out.extend(run.windows(2).map(|w| w.iter().collect::<String>())),
        }
        run.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin_and_cjk() {
        let t = Tokenizer::default();
        assert_eq!(t.tokens("The Running dogs, ran!"), ["run", "dog", "ran"]);
        assert_eq!(t.tokens("机器学习 is fun"), ["机器", "器学", "学习", "fun"]);
        assert_eq!(t.tokens("日 x"), ["日", "x"]);
        assert_eq!(t.tokens("Ünïcode ÉTÉ"), ["ünïcode", "été"]);
    }
}
