//! A PDF font as text extraction needs it: what text each character code
//! stands for and how far it advances. Read once per document and shared by
//! every page that shows it (`Fonts`, keyed by the font's object).

use std::collections::HashMap;
use std::rc::Rc;

use lopdf::{Dictionary, Document, Object, ObjectId};
use pdf_encoding::ForwardMap;

use super::cmap::{ToUnicode, code_of};

/// The fonts of one document, each read on first use.
#[derive(Default)]
pub struct Fonts {
    read: HashMap<ObjectId, Rc<Font>>,
}

impl Fonts {
    /// The font `object` (a page resource's value): read once per object;
    /// a font written inline in a resource dictionary is read each time.
    pub fn get(&mut self, doc: &Document, object: &Object) -> Option<Rc<Font>> {
        match object {
            Object::Reference(id) => {
                if let Some(font) = self.read.get(id) {
                    return Some(font.clone());
                }
                let font = Rc::new(Font::read(doc, doc.get_object(*id).ok()?.as_dict().ok()?));
                self.read.insert(*id, font.clone());
                Some(font)
            }
            Object::Dictionary(dict) => Some(Rc::new(Font::read(doc, dict))),
            _ => None,
        }
    }
}

pub struct Font {
    /// Codes are two bytes (a composite font) rather than one.
    two_byte: bool,
    /// A composite font's codes are Unicode (a `Uni…-UCS2-…` or `-UTF16-`
    /// CMap): a code without a /ToUnicode entry is its own text.
    unicode_codes: bool,
    /// A composite font's /ToUnicode map.
    to_unicode: Option<ToUnicode>,
    /// A simple font's text for each code, from its /ToUnicode map, else
    /// its encoding.
    simple: Vec<Option<Box<str>>>,
    widths: Widths,
}

/// Advance widths in glyph units, the width of a code they leave out, and
/// the factor to text space (1/1000, or a Type 3 font's matrix).
struct Widths {
    by: By,
    default: f64,
    scale: f64,
}

enum By {
    /// A simple font's: code - first → width.
    Code { first: u32, widths: Vec<f64> },
    /// A composite font's: (first CID, last CID, width), sorted.
    Ranges(Vec<(u32, u32, f64)>),
}

impl Font {
    fn read(doc: &Document, font: &Dictionary) -> Font {
        let subtype = name(doc, font, b"Subtype").unwrap_or_default();
        let to_unicode = to_unicode(doc, font);
        if subtype == b"Type0" {
            let cmap = name(doc, font, b"Encoding").unwrap_or_default();
            let unicode_codes = cmap.starts_with(b"Uni")
                && [&b"-UCS2-"[..], b"-UTF16-"]
                    .iter()
                    .any(|k| find(cmap, k).is_some());
            return Font {
                two_byte: true,
                unicode_codes,
                to_unicode,
                simple: Vec::new(),
                widths: cid_widths(doc, font),
            };
        }
        let mut simple = simple_encoding(doc, font);
        let widths = simple_widths(doc, font, &simple, subtype == b"Type3");
        if let Some(map) = &to_unicode {
            for (code, slot) in simple.iter_mut().enumerate() {
                if let Some(text) = map.get(code as u32, 1) {
                    *slot = Some(text);
                }
            }
        }
        Font {
            two_byte: false,
            unicode_codes: false,
            to_unicode: None,
            simple,
            widths,
        }
    }

    /// The codes of a shown string, with their byte length.
    pub fn codes<'a>(&self, bytes: &'a [u8]) -> impl Iterator<Item = (u32, u8)> + 'a {
        let step = if self.two_byte { 2 } else { 1 };
        bytes
            .chunks(step)
            .filter_map(code_of)
            .map(|(len, code)| (code, len))
    }

    /// What `code` (of `len` bytes) stands for, appended to `out`; nothing
    /// when unknown.
    pub fn text(&self, code: u32, len: u8, out: &mut String) {
        if self
            .to_unicode
            .as_ref()
            .is_some_and(|m| m.write(code, len, out))
        {
            return;
        }
        if self.unicode_codes {
            out.extend(char::from_u32(code));
        } else if let Some(Some(text)) = self.simple.get(code as usize) {
            out.push_str(text);
        }
    }

    /// The advance of `code` in text space units (for a font size of 1).
    pub fn width(&self, code: u32) -> f64 {
        let w = &self.widths;
        let width = match &w.by {
            By::Code { first, widths } => code
                .checked_sub(*first)
                .and_then(|i| widths.get(i as usize))
                .copied(),
            By::Ranges(ranges) => {
                let at = ranges.partition_point(|r| r.1 < code);
                ranges.get(at).filter(|r| r.0 <= code).map(|r| r.2)
            }
        };
        let width = width.unwrap_or(w.default);
        width * w.scale
    }
}

/// `object`, followed through a reference.
pub fn deref<'a>(doc: &'a Document, object: &'a Object) -> Option<&'a Object> {
    Some(doc.dereference(object).ok()?.1)
}

/// `dict[key]` followed through a reference.
pub fn entry<'a>(doc: &'a Document, dict: &'a Dictionary, key: &[u8]) -> Option<&'a Object> {
    deref(doc, dict.get(key).ok()?)
}

fn name<'a>(doc: &'a Document, dict: &'a Dictionary, key: &[u8]) -> Option<&'a [u8]> {
    entry(doc, dict, key)?.as_name().ok()
}

pub fn number(object: &Object) -> Option<f64> {
    object.as_float().ok().map(f64::from)
}

/// The numbers of the array at `dict[key]`, each followed through a reference.
fn numbers(doc: &Document, dict: &Dictionary, key: &[u8]) -> Option<Vec<f64>> {
    let array = entry(doc, dict, key)?.as_array().ok()?;
    array.iter().map(|o| number(deref(doc, o)?)).collect()
}

/// The font's /ToUnicode CMap.
fn to_unicode(doc: &Document, font: &Dictionary) -> Option<ToUnicode> {
    let stream = entry(doc, font, b"ToUnicode")?.as_stream().ok()?;
    Some(ToUnicode::parse(&stream.decompressed_content().ok()?))
}

fn table(name: &[u8]) -> Option<&'static ForwardMap> {
    use pdf_encoding::Encoding as Base;
    match name {
        b"WinAnsiEncoding" => Base::WinAnsiEncoding,
        b"MacRomanEncoding" => Base::MacRomanEncoding,
        b"MacExpertEncoding" => Base::AdobeExpert,
        b"StandardEncoding" => Base::AdobeStandard,
        _ => return None,
    }
    .forward_map()
}

/// A glyph name's text: the Adobe Glyph List, `uniXXXX` and `uXXXX[XX]`.
fn glyph_name(name: &[u8]) -> Option<Box<str>> {
    let name = std::str::from_utf8(name).ok()?;
    if let Some(text) = pdf_encoding::glyphname_to_unicode(name) {
        return Some(text.into());
    }
    let hex = |digits: &str| {
        let c = u32::from_str_radix(digits, 16)
            .ok()
            .and_then(char::from_u32)?;
        Some(c.to_string().into_boxed_str())
    };
    match name {
        _ if name.starts_with("uni") && name.len() >= 7 => hex(name.get(3..7)?),
        _ if name.starts_with('u') && (5..=7).contains(&name.len()) => hex(&name[1..]),
        _ => None,
    }
}

/// A simple font's code → text: its /Encoding (a name, or a base and
/// /Differences), else the font program's own encoding (Type 1), else the
/// standard (Symbol's for Symbol).
fn simple_encoding(doc: &Document, font: &Dictionary) -> Vec<Option<Box<str>>> {
    use pdf_encoding::Encoding as Base;
    let base_font = name(doc, font, b"BaseFont").unwrap_or_default();
    // pdf_encoding's StandardEncoding gives 32 as a no-break space and 45
    // as a soft hyphen; the glyphs there are `space` and `hyphen`.
    let from = |set: &ForwardMap| {
        (0..=255u8)
            .map(|code| {
                let c = match (code, set.get(code)?) {
                    (32, '\u{A0}') => ' ',
                    (45, '\u{AD}') => '-',
                    (_, c) => c,
                };
                Some(c.to_string().into_boxed_str())
            })
            .collect()
    };
    let builtin = || -> Vec<Option<Box<str>>> {
        let own = match base_font {
            b"Symbol" => Base::AdobeSymbol.forward_map(),
            b"ZapfDingbats" => Base::AdobeZdingbat.forward_map(),
            _ => None,
        };
        own.map(from).unwrap_or_else(|| {
            type1_encoding(doc, font).unwrap_or_else(|| from(&pdf_encoding::STANDARD))
        })
    };
    let encoding = entry(doc, font, b"Encoding");
    let mut codes: Vec<Option<Box<str>>> = match encoding {
        Some(Object::Name(n)) => table(n).map(from).unwrap_or_else(builtin),
        Some(Object::Dictionary(d)) => match name(doc, d, b"BaseEncoding").and_then(table) {
            Some(set) => from(set),
            None => builtin(),
        },
        _ => builtin(),
    };
    let differences = match encoding {
        Some(Object::Dictionary(d)) => {
            entry(doc, d, b"Differences").and_then(|o| o.as_array().ok())
        }
        _ => None,
    };
    let mut code = 0usize;
    for item in differences.into_iter().flatten() {
        match item {
            Object::Integer(n) => code = (*n).clamp(0, 255) as usize,
            Object::Name(n) => {
                if let Some(slot) = codes.get_mut(code) {
                    *slot = glyph_name(n);
                }
                code += 1;
            }
            _ => {}
        }
    }
    codes
}

/// The encoding written in an embedded Type 1 font program's clear text:
/// `StandardEncoding`, or `dup <code> /<name> put` entries.
fn type1_encoding(doc: &Document, font: &Dictionary) -> Option<Vec<Option<Box<str>>>> {
    let descriptor = entry(doc, font, b"FontDescriptor")?.as_dict().ok()?;
    let program = entry(doc, descriptor, b"FontFile")?.as_stream().ok()?;
    let bytes = program.decompressed_content().ok()?;
    let clear = match find(&bytes, b"eexec") {
        Some(end) => &bytes[..end],
        None => &bytes[..],
    };
    let at = find(clear, b"/Encoding")?;
    let mut words = clear[at + 9..]
        .split(|b| b.is_ascii_whitespace())
        .filter(|w| !w.is_empty());
    let mut codes = vec![None; 256];
    while let Some(word) = words.next() {
        match word {
            b"StandardEncoding" => return None,
            b"def" | b"readonly" => break,
            b"dup" => {
                let code = words.next().and_then(|w| std::str::from_utf8(w).ok());
                let code: Option<usize> = code.and_then(|c| c.parse().ok());
                let glyph = words.next().and_then(|w| w.strip_prefix(b"/"));
                if let (Some(code), Some(glyph)) = (code, glyph)
                    && let Some(slot) = codes.get_mut(code)
                {
                    *slot = glyph_name(glyph);
                }
            }
            _ => {}
        }
    }
    Some(codes)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn simple_widths(
    doc: &Document,
    font: &Dictionary,
    text: &[Option<Box<str>>],
    type3: bool,
) -> Widths {
    let scale = if type3 {
        numbers(doc, font, b"FontMatrix")
            .and_then(|m| m.first().copied())
            .unwrap_or(0.001)
    } else {
        0.001
    };
    let missing = entry(doc, font, b"FontDescriptor")
        .and_then(|d| d.as_dict().ok())
        .and_then(|d| entry(doc, d, b"MissingWidth"))
        .and_then(number)
        .unwrap_or(0.0);
    if let Some(by_code) = numbers(doc, font, b"Widths") {
        let first = entry(doc, font, b"FirstChar")
            .and_then(|o| o.as_i64().ok())
            .unwrap_or(0)
            .clamp(0, 255) as u32;
        return Widths {
            by: By::Code {
                first,
                widths: by_code,
            },
            default: missing,
            scale,
        };
    }
    // The standard 14 fonts may go without /Widths: their Adobe metrics.
    let base_font = name(doc, font, b"BaseFont").unwrap_or_default();
    let widths = super::core14::glyphs(base_font)
        .map(|(glyphs, own_codes)| standard_widths(glyphs, own_codes, text))
        .unwrap_or_default();
    Widths {
        by: By::Code { first: 0, widths },
        default: missing,
        scale,
    }
}

/// A standard font's advance widths by code: by its own codes, or by the
/// glyph each code of the font's encoding (`text`) names.
fn standard_widths(
    glyphs: &[super::core14::Glyph],
    own_codes: bool,
    text: &[Option<Box<str>>],
) -> Vec<f64> {
    if own_codes {
        let mut by_code = vec![0.0; 256];
        for &(code, width, _) in glyphs {
            if let Some(slot) = usize::try_from(code).ok().and_then(|c| by_code.get_mut(c)) {
                *slot = f64::from(width);
            }
        }
        return by_code;
    }
    let mut by_text = HashMap::new();
    for &(_, width, glyph) in glyphs {
        if let Some(text) = glyph_name(glyph.as_bytes()) {
            by_text.entry(text).or_insert(f64::from(width));
        }
    }
    text.iter()
        .map(|t| {
            t.as_ref()
                .and_then(|t| by_text.get(t))
                .copied()
                .unwrap_or(0.0)
        })
        .collect()
}

/// A composite font's widths: its descendant's /W (`c [w ...]` and
/// `first last w`) and /DW.
fn cid_widths(doc: &Document, font: &Dictionary) -> Widths {
    let descendant = entry(doc, font, b"DescendantFonts")
        .and_then(|o| o.as_array().ok())
        .and_then(|a| a.first())
        .and_then(|o| deref(doc, o))
        .and_then(|o| o.as_dict().ok());
    let mut ranges = Vec::new();
    let default = descendant
        .and_then(|d| entry(doc, d, b"DW"))
        .and_then(number)
        .unwrap_or(1000.0);
    let w = descendant
        .and_then(|d| entry(doc, d, b"W"))
        .and_then(|o| o.as_array().ok());
    let items: Vec<&Object> = w
        .into_iter()
        .flatten()
        .filter_map(|o| deref(doc, o))
        .collect();
    let mut i = 0;
    while i + 1 < items.len() {
        let Some(first) = items[i].as_i64().ok().and_then(|c| u32::try_from(c).ok()) else {
            break;
        };
        if let Ok(list) = items[i + 1].as_array() {
            for (k, o) in list.iter().enumerate() {
                if let Some(width) = deref(doc, o).and_then(number) {
                    let cid = first.saturating_add(k as u32);
                    ranges.push((cid, cid, width));
                }
            }
            i += 2;
        } else if let (Some(last), Some(width)) = (
            items[i + 1]
                .as_i64()
                .ok()
                .and_then(|c| u32::try_from(c).ok()),
            items.get(i + 2).and_then(|o| number(o)),
        ) {
            ranges.push((first, last.max(first), width));
            i += 3;
        } else {
            break;
        }
    }
    ranges.sort_by_key(|r| r.0);
    Widths {
        by: By::Ranges(ranges),
        default,
        scale: 0.001,
    }
}
