//! A page's text: its content stream run through the text operators (PDF
//! 32000-1 §9.4), the form XObjects it draws included, each glyph placed by
//! the text rendering matrix and written out by `Lines`.

use std::rc::Rc;

use lopdf::content::Content;
use lopdf::{Dictionary, Document, Object, ObjectId};

use super::fonts::{Font, Fonts, deref, entry, number};

/// How deep form XObjects may draw one another, and how many operators a
/// page may run in all (forms drawn many times count each time).
const MAX_DEPTH: u32 = 12;
const MAX_OPERATIONS: usize = 5_000_000;
/// How many graphics states `q` may save at once (PDF readers allow 28;
/// deeper saves are counted, not kept, so a stream of `q`s holds no memory).
const MAX_SAVED: usize = 256;

/// Reads the pages of one document, its fonts read once for all of them.
pub struct Reader<'d> {
    doc: &'d Document,
    fonts: Fonts,
}

impl<'d> Reader<'d> {
    pub fn new(doc: &'d Document) -> Self {
        Reader {
            doc,
            fonts: Fonts::default(),
        }
    }

    /// The text of page `id`, in content-stream order.
    pub fn page(&mut self, id: ObjectId) -> Result<String, String> {
        let doc = self.doc;
        let page = doc
            .get_object(id)
            .and_then(Object::as_dict)
            .map_err(|e| e.to_string())?;
        let media_box = inherited(doc, page, b"MediaBox")
            .and_then(|o| o.as_array().ok())
            .map(|a| a.iter().filter_map(number).collect::<Vec<_>>())
            .filter(|b| b.len() == 4)
            .unwrap_or_else(|| vec![0.0, 0.0, 612.0, 792.0]);
        let empty = Dictionary::new();
        let resources = inherited(doc, page, b"Resources")
            .and_then(|o| o.as_dict().ok())
            .unwrap_or(&empty);
        let content = doc.get_page_content(id).map_err(|e| e.to_string())?;
        let mut run = Run {
            doc,
            fonts: &mut self.fonts,
            lines: Lines {
                height: media_box[3] - media_box[1],
                ..Lines::default()
            },
            operations: 0,
            shown: String::new(),
        };
        run.stream(&content, resources, State::default(), 0)?;
        Ok(run.lines.text)
    }
}

/// `dict[key]`, else the nearest ancestor's in the page tree.
fn inherited<'a>(doc: &'a Document, mut dict: &'a Dictionary, key: &[u8]) -> Option<&'a Object> {
    for _ in 0..64 {
        if let Some(found) = entry(doc, dict, key) {
            return Some(found);
        }
        dict = entry(doc, dict, b"Parent")?.as_dict().ok()?;
    }
    None
}

/// A 2-D affine matrix `[a b c d e f]` (row vectors, as PDF writes them).
#[derive(Clone, Copy)]
struct Matrix([f64; 6]);

impl Matrix {
    const IDENTITY: Matrix = Matrix([1.0, 0.0, 0.0, 1.0, 0.0, 0.0]);

    fn translate(x: f64, y: f64) -> Matrix {
        Matrix([1.0, 0.0, 0.0, 1.0, x, y])
    }

    fn from(operands: &[Object]) -> Option<Matrix> {
        let m: Vec<f64> = operands.iter().filter_map(number).collect();
        Some(Matrix(m.try_into().ok()?))
    }

    /// `self × then`: this transform, then `then`.
    fn then(self, then: Matrix) -> Matrix {
        let [a, b, c, d, e, f] = self.0;
        let [p, q, r, s, t, u] = then.0;
        Matrix([
            a * p + b * r,
            a * q + b * s,
            c * p + d * r,
            c * q + d * s,
            e * p + f * r + t,
            e * q + f * s + u,
        ])
    }
}

/// The graphics state text extraction follows (what `q`/`Q` save).
#[derive(Clone)]
struct State {
    ctm: Matrix,
    font: Option<Rc<Font>>,
    size: f64,
    char_spacing: f64,
    word_spacing: f64,
    scaling: f64,
    leading: f64,
    rise: f64,
}

impl Default for State {
    fn default() -> Self {
        State {
            ctm: Matrix::IDENTITY,
            font: None,
            size: 0.0,
            char_spacing: 0.0,
            word_spacing: 0.0,
            scaling: 1.0,
            leading: 0.0,
            rise: 0.0,
        }
    }
}

struct Run<'r, 'd> {
    doc: &'d Document,
    fonts: &'r mut Fonts,
    lines: Lines,
    operations: usize,
    /// One glyph's text, reused.
    shown: String,
}

impl Run<'_, '_> {
    fn stream(
        &mut self,
        bytes: &[u8],
        resources: &Dictionary,
        mut gs: State,
        depth: u32,
    ) -> Result<(), String> {
        let content = Content::decode(bytes).map_err(|e| e.to_string())?;
        self.operations += content.operations.len();
        if self.operations > MAX_OPERATIONS {
            return Err(format!("more than {MAX_OPERATIONS} drawing operations"));
        }
        let doc = self.doc;
        let mut saved: Vec<State> = Vec::new();
        let mut unsaved = 0usize;
        let (mut tm, mut tlm) = (Matrix::IDENTITY, Matrix::IDENTITY);
        for op in &content.operations {
            let args = &op.operands;
            let num = |i: usize| args.get(i).and_then(number).unwrap_or(0.0);
            match op.operator.as_str() {
                "q" if saved.len() < MAX_SAVED => saved.push(gs.clone()),
                "q" => unsaved += 1,
                "Q" if unsaved > 0 => unsaved -= 1,
                "Q" => gs = saved.pop().unwrap_or(gs),
                "cm" => {
                    if let Some(m) = Matrix::from(args) {
                        gs.ctm = m.then(gs.ctm);
                    }
                }
                "BT" => (tm, tlm) = (Matrix::IDENTITY, Matrix::IDENTITY),
                "Tf" => {
                    let font = args.first().and_then(|n| n.as_name().ok()).and_then(|n| {
                        let fonts = entry(doc, resources, b"Font")?.as_dict().ok()?;
                        self.fonts.get(doc, fonts.get(n).ok()?)
                    });
                    gs.font = font;
                    gs.size = num(1);
                }
                "Tc" => gs.char_spacing = num(0),
                "Tw" => gs.word_spacing = num(0),
                "Tz" => gs.scaling = num(0) / 100.0,
                "TL" => gs.leading = num(0),
                "Ts" => gs.rise = num(0),
                "Td" | "TD" => {
                    if op.operator == "TD" {
                        gs.leading = -num(1);
                    }
                    tlm = Matrix::translate(num(0), num(1)).then(tlm);
                    tm = tlm;
                }
                "Tm" => {
                    if let Some(m) = Matrix::from(args) {
                        (tm, tlm) = (m, m);
                    }
                }
                "T*" => {
                    tlm = Matrix::translate(0.0, -gs.leading).then(tlm);
                    tm = tlm;
                }
                "Tj" | "'" | "\"" => {
                    if op.operator != "Tj" {
                        tlm = Matrix::translate(0.0, -gs.leading).then(tlm);
                        tm = tlm;
                    }
                    if op.operator == "\"" {
                        gs.word_spacing = num(0);
                        gs.char_spacing = num(1);
                    }
                    if let Some(Ok(s)) = args.last().map(Object::as_str) {
                        self.show(&gs, &mut tm, s);
                    }
                }
                "TJ" => {
                    for item in args
                        .first()
                        .and_then(|a| a.as_array().ok())
                        .into_iter()
                        .flatten()
                    {
                        match item {
                            Object::String(s, _) => self.show(&gs, &mut tm, s),
                            other => {
                                let adjust = number(other).unwrap_or(0.0);
                                let tx = -adjust / 1000.0 * gs.size * gs.scaling;
                                tm = Matrix::translate(tx, 0.0).then(tm);
                            }
                        }
                    }
                }
                "Do" if depth < MAX_DEPTH => {
                    let form = args.first().and_then(|n| n.as_name().ok()).and_then(|n| {
                        let xobjects = entry(doc, resources, b"XObject")?.as_dict().ok()?;
                        deref(doc, xobjects.get(n).ok()?)?.as_stream().ok()
                    });
                    let Some(form) = form else { continue };
                    if entry(doc, &form.dict, b"Subtype").and_then(|s| s.as_name().ok())
                        != Some(b"Form")
                    {
                        continue;
                    }
                    let own = entry(doc, &form.dict, b"Resources").and_then(|r| r.as_dict().ok());
                    let matrix = entry(doc, &form.dict, b"Matrix")
                        .and_then(|m| m.as_array().ok())
                        .and_then(|m| Matrix::from(m))
                        .unwrap_or(Matrix::IDENTITY);
                    let mut inner = gs.clone();
                    inner.ctm = matrix.then(gs.ctm);
                    // A form that cannot be read is left out; past the
                    // budget, the page ends.
                    let Ok(bytes) = form.decompressed_content() else {
                        continue;
                    };
                    let drawn = self.stream(&bytes, own.unwrap_or(resources), inner, depth + 1);
                    if self.operations > MAX_OPERATIONS {
                        return drawn;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Shows string `s`: each code's glyph written out where the text
    /// rendering matrix puts it, the text matrix moved past it.
    fn show(&mut self, gs: &State, tm: &mut Matrix, s: &[u8]) {
        let Some(font) = gs.font.as_deref() else {
            return;
        };
        for (code, len) in font.codes(s) {
            let trm = Matrix([gs.scaling, 0.0, 0.0, 1.0, 0.0, gs.rise])
                .then(*tm)
                .then(gs.ctm);
            let width = font.width(code);
            self.shown.clear();
            font.text(code, len, &mut self.shown);
            self.lines.glyph(&trm, width, gs.size, &self.shown);
            let mut spacing = gs.char_spacing;
            // Word spacing applies to the one-byte code 32 only (§9.3.3).
            if code == 32 && len == 1 {
                spacing += gs.word_spacing;
            }
            let tx = (width * gs.size + spacing) * gs.scaling;
            *tm = Matrix::translate(tx, 0.0).then(*tm);
        }
    }
}

/// Text of a page in content-stream order, with a space wherever glyphs are
/// apart by more than a fraction of the font size (PDFs often position words
/// without space characters) and a line break wherever the baseline moves.
#[derive(Default)]
struct Lines {
    text: String,
    height: f64,
    /// Where the last glyph ended, its baseline and size; none at a page start.
    last: Option<(f64, f64, f64)>,
}

impl Lines {
    fn glyph(&mut self, trm: &Matrix, width: f64, font_size: f64, glyph: &str) {
        let [a, b, c, d, e, f] = trm.0;
        // The glyph's origin on the page (y downwards) and its size in page units.
        let (x, y) = (e, self.height - f);
        let vx = font_size * (a + c);
        let vy = font_size * (b + d);
        let size = (vx * vy).abs().sqrt().max(0.1);
        if let Some((end, base, last_size)) = self.last {
            let size_ref = size.max(last_size);
            if (y - base).abs() > size_ref * 0.6 {
                self.text.push('\n');
                if (y - base).abs() > size_ref * 2.2 {
                    self.text.push('\n');
                }
            } else if (x > end + size_ref * 0.15 || x < end - size_ref * 3.0)
                && !self.text.ends_with([' ', '\n'])
                && !glyph.starts_with(' ')
            {
                self.text.push(' ');
            }
        }
        // Ligature glyphs (ﬁ, ﬂ, …) are the letters they join.
        for c in glyph.chars() {
            match c {
                '\u{FB00}' => self.text.push_str("ff"),
                '\u{FB01}' => self.text.push_str("fi"),
                '\u{FB02}' => self.text.push_str("fl"),
                '\u{FB03}' => self.text.push_str("ffi"),
                '\u{FB04}' => self.text.push_str("ffl"),
                '\u{FB05}' | '\u{FB06}' => self.text.push_str("st"),
                c => self.text.push(c),
            }
        }
        self.last = Some((x + width * size, y, size));
    }
}
