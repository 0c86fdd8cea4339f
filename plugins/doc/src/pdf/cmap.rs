//! A font's /ToUnicode CMap (PDF 32000-1 §9.10.3): `bfchar` entries (a code
//! and its text) and `bfrange` entries (a run of codes, their text counting
//! up from a start or listed one by one). Codes are 1 to 4 bytes; a code is
//! known with its length, so `<20>` and `<0020>` are different codes.

use std::collections::HashMap;

#[derive(Default)]
pub struct ToUnicode {
    chars: HashMap<(u8, u32), Box<str>>,
    /// (length, first, last, text), sorted by length then first code.
    ranges: Vec<(u8, u32, u32, Target)>,
}

enum Target {
    /// UTF-16 units; the last one counts up from the range's first code.
    From(Vec<u16>),
    /// One text per code of the range.
    Each(Vec<Box<str>>),
}

enum Token<'a> {
    Hex(Vec<u8>),
    Open,
    Close,
    Word(&'a [u8]),
}

impl ToUnicode {
    /// Reads `bytes`; what it cannot read is left out, never an error (a
    /// page's text goes on without it).
    pub fn parse(bytes: &[u8]) -> ToUnicode {
        let mut map = ToUnicode::default();
        let mut tokens = Tokens {
            bytes,
            at: 0,
            back: None,
        };
        while let Some(token) = tokens.next() {
            match token {
                Token::Word(b"beginbfchar") => map.chars(&mut tokens),
                Token::Word(b"beginbfrange") => map.ranges(&mut tokens),
                _ => {}
            }
        }
        map.ranges.sort_by_key(|r| (r.0, r.1));
        map
    }

    fn chars(&mut self, tokens: &mut Tokens) {
        loop {
            let Some(code) = tokens.hex() else { return };
            let Some(Token::Hex(text)) = tokens.next() else {
                return;
            };
            if let Some(key) = code_of(&code) {
                self.chars.insert(key, utf16(&units(&text)));
            }
        }
    }

    fn ranges(&mut self, tokens: &mut Tokens) {
        loop {
            let Some(first) = tokens.hex() else { return };
            let Some(Token::Hex(last)) = tokens.next() else {
                return;
            };
            let target = match tokens.next() {
                Some(Token::Hex(text)) => Target::From(units(&text)),
                Some(Token::Open) => {
                    let mut each = Vec::new();
                    while let Some(Token::Hex(text)) = tokens.next() {
                        each.push(utf16(&units(&text)));
                    }
                    Target::Each(each)
                }
                _ => return,
            };
            if let (Some((len, lo)), Some((_, hi))) = (code_of(&first), code_of(&last))
                && lo <= hi
            {
                self.ranges.push((len, lo, hi, target));
            }
        }
    }

    /// Appends the text of `code`, `len` bytes long, to `out`; false when
    /// the map has none.
    pub fn write(&self, code: u32, len: u8, out: &mut String) -> bool {
        if let Some(text) = self.chars.get(&(len, code)) {
            out.push_str(text);
            return true;
        }
        let at = self.ranges.partition_point(|r| (r.0, r.1) <= (len, code));
        let Some((l, lo, hi, target)) = at.checked_sub(1).and_then(|at| self.ranges.get(at)) else {
            return false;
        };
        if *l != len || code > *hi {
            return false;
        }
        let offset = code - lo;
        match target {
            Target::From(units) => {
                let Some((last, head)) = units.split_last() else {
                    return false;
                };
                let last = last.wrapping_add(offset as u16);
                out.extend(
                    char::decode_utf16(head.iter().copied().chain([last]))
                        .map(|c| c.unwrap_or('\u{FFFD}')),
                );
                true
            }
            Target::Each(each) => match each.get(offset as usize) {
                Some(text) => {
                    out.push_str(text);
                    true
                }
                None => false,
            },
        }
    }

    /// The text of `code`, `len` bytes long.
    pub fn get(&self, code: u32, len: u8) -> Option<Box<str>> {
        let mut text = String::new();
        self.write(code, len, &mut text)
            .then(|| text.into_boxed_str())
    }
}

/// A source code's (length, value); none past 4 bytes.
pub fn code_of(bytes: &[u8]) -> Option<(u8, u32)> {
    if bytes.is_empty() || bytes.len() > 4 {
        return None;
    }
    let value = bytes.iter().fold(0u32, |acc, &b| acc << 8 | u32::from(b));
    Some((bytes.len() as u8, value))
}

fn units(bytes: &[u8]) -> Vec<u16> {
    bytes
        .chunks(2)
        .map(|c| u16::from_be_bytes([c[0], *c.get(1).unwrap_or(&0)]))
        .collect()
}

fn utf16(units: &[u16]) -> Box<str> {
    String::from_utf16_lossy(units).into_boxed_str()
}

struct Tokens<'a> {
    bytes: &'a [u8],
    at: usize,
    /// A token read and given back.
    back: Option<Token<'a>>,
}

impl<'a> Tokens<'a> {
    /// The next token if it is a hex string; another is given back.
    fn hex(&mut self) -> Option<Vec<u8>> {
        match self.next() {
            Some(Token::Hex(bytes)) => Some(bytes),
            other => {
                self.back = other;
                None
            }
        }
    }

    fn next(&mut self) -> Option<Token<'a>> {
        if let Some(token) = self.back.take() {
            return Some(token);
        }
        let b = self.bytes;
        while self.at < b.len() {
            match b[self.at] {
                c if c.is_ascii_whitespace() => self.at += 1,
                b'%' => {
                    while self.at < b.len() && b[self.at] != b'\n' && b[self.at] != b'\r' {
                        self.at += 1;
                    }
                }
                _ => break,
            }
        }
        let start = self.at;
        let c = *b.get(start)?;
        self.at += 1;
        Some(match c {
            b'[' => Token::Open,
            b']' => Token::Close,
            b'<' if b.get(self.at) == Some(&b'<') => {
                self.at += 1;
                Token::Word(b"<<")
            }
            b'<' => {
                let end = b[self.at..]
                    .iter()
                    .position(|&c| c == b'>')
                    .map_or(b.len(), |p| self.at + p);
                let digits: Vec<u8> = b[self.at..end]
                    .iter()
                    .filter_map(|&c| (c as char).to_digit(16).map(|d| d as u8))
                    .collect();
                self.at = (end + 1).min(b.len());
                let mut hex: Vec<u8> = digits
                    .chunks(2)
                    .map(|p| p[0] << 4 | p.get(1).unwrap_or(&0))
                    .collect();
                if hex.is_empty() {
                    hex.push(0);
                }
                Token::Hex(hex)
            }
            _ => {
                let delimiter = |c: &u8| c.is_ascii_whitespace() || b"[]<>()/%".contains(c);
                while self.at < b.len() && !delimiter(&b[self.at]) {
                    self.at += 1;
                }
                Token::Word(&b[start..self.at.max(start + 1)])
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chars_and_ranges_by_code_length() {
        let map = ToUnicode::parse(
            b"/CIDInit /ProcSet findresource begin 12 dict begin begincmap\n\
              1 begincodespacerange <0000> <FFFF> endcodespacerange\n\
              2 beginbfchar <0003> <0020> <0011><002E> endbfchar % a comment <0012> <0041>\n\
              3 beginbfrange <0024> <0026> <0041> <0030> <0031> [<0066006C> <D835DC00>]\n\
              <20> <21> <0061> endbfrange endcmap",
        );
        let text = |code, len| map.get(code, len).map(String::from);
        assert_eq!(text(0x0003, 2).as_deref(), Some(" "));
        assert_eq!(text(0x0011, 2).as_deref(), Some("."));
        assert_eq!(text(0x0012, 2), None, "inside a comment");
        assert_eq!(text(0x0024, 2).as_deref(), Some("A"));
        assert_eq!(text(0x0026, 2).as_deref(), Some("C"));
        assert_eq!(text(0x0027, 2), None);
        assert_eq!(text(0x0030, 2).as_deref(), Some("fl"));
        assert_eq!(text(0x0031, 2).as_deref(), Some("\u{1D400}"));
        assert_eq!(text(0x20, 1).as_deref(), Some("a"));
        assert_eq!(text(0x21, 1).as_deref(), Some("b"));
        assert_eq!(text(0x20, 2), None, "<20> is not <0020>");
    }

    #[test]
    fn broken_maps_give_what_they_can() {
        for bytes in [
            &b""[..],
            b"beginbfchar <01",
            b"beginbfrange <05> <01> <41> endbfrange",
            b"beginbfrange <0102030405> <0102030406> <41> endbfrange",
            b"beginbfchar <> <> endbfchar beginbfrange [ ] <",
            b"beginbfchar <01> <0041> endbfchar beginbfrange <02> <03> [<0042>] endbfrange",
        ] {
            let map = ToUnicode::parse(bytes);
            assert_eq!(map.get(5, 1), None);
        }
        let map = ToUnicode::parse(b"beginbfchar <01> <0041> <02> endbfchar");
        assert_eq!(map.get(1, 1).as_deref(), Some("A"));
        // A section right after another's end, without its count.
        let map = ToUnicode::parse(
            b"beginbfchar <01> <0041> endbfchar beginbfrange <02> <03> [<0042>] endbfrange",
        );
        assert_eq!(map.get(1, 1).as_deref(), Some("A"));
        assert_eq!(map.get(2, 1).as_deref(), Some("B"));
        assert_eq!(map.get(3, 1), None, "past the listed texts");
    }
}
