//! Widths of the standard 14 fonts, which a PDF may show without /Widths:
//! Adobe's Core 14 AFM metrics (build.rs takes them from the
//! `pdf-core-14-font-afms` crate; Adobe's terms in docs/builtin-tools.md),
//! read once per font per document.

mod afm {
    include!(concat!(env!("OUT_DIR"), "/core14.rs"));
}

/// A glyph's code, advance width (glyph units) and name.
pub type Glyph = (i16, u16, &'static str);

/// A standard font's glyphs,
/// and whether it is shown in its own codes (Symbol, ZapfDingbats) rather
/// than by glyph name through the font's encoding; none when `base_font`
/// is not one of the 14 (or a common alias of one).
pub fn glyphs(base_font: &[u8]) -> Option<(&'static [Glyph], bool)> {
    // A subset's name has a six-letter tag: `ABCDEF+Helvetica`.
    let name = match base_font.get(6) {
        Some(b'+') => &base_font[7..],
        _ => base_font,
    };
    Some((metrics(name)?, matches!(name, b"Symbol" | b"ZapfDingbats")))
}

fn metrics(name: &[u8]) -> Option<&'static [Glyph]> {
    Some(match name {
        b"Courier" | b"CourierNew" => afm::COURIER,
        b"Courier-Bold" | b"CourierNew,Bold" => afm::COURIER_BOLD,
        b"Courier-Oblique" | b"CourierNew,Italic" => afm::COURIER_OBLIQUE,
        b"Courier-BoldOblique" | b"CourierNew,BoldItalic" => afm::COURIER_BOLD_OBLIQUE,
        b"Helvetica" | b"Arial" => afm::HELVETICA,
        b"Helvetica-Bold" | b"Arial,Bold" => afm::HELVETICA_BOLD,
        b"Helvetica-Oblique" | b"Arial,Italic" => afm::HELVETICA_OBLIQUE,
        b"Helvetica-BoldOblique" | b"Arial,BoldItalic" => afm::HELVETICA_BOLD_OBLIQUE,
        b"Times-Roman" | b"TimesNewRoman" => afm::TIMES_ROMAN,
        b"Times-Bold" | b"TimesNewRoman,Bold" => afm::TIMES_BOLD,
        b"Times-Italic" | b"TimesNewRoman,Italic" => afm::TIMES_ITALIC,
        b"Times-BoldItalic" | b"TimesNewRoman,BoldItalic" => afm::TIMES_BOLD_ITALIC,
        b"Symbol" => afm::SYMBOL,
        b"ZapfDingbats" => afm::ZAPF_DINGBATS,
        _ => return None,
    })
}
