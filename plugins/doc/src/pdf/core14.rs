//! Widths of the standard 14 fonts, which a PDF may show without /Widths:
//! Adobe's Core 14 AFM metrics (build.rs takes them from the
//! `pdf-core-14-font-afms` crate; Adobe's terms in docs/builtin-tools.md),
//! read once per font per document.

mod afm {
    include!(concat!(env!("OUT_DIR"), "/core14.rs"));
}

/// Advance widths by code (glyph units), for a font shown with `text` as its
/// code → text table; none when `base_font` is not one of the 14 (or a
/// common alias of one).
pub fn widths(base_font: &[u8], text: &[Option<Box<str>>]) -> Option<Vec<f64>> {
    // A subset's name has a six-letter tag: `ABCDEF+Helvetica`.
    let name = match base_font.get(6) {
        Some(b'+') => &base_font[7..],
        _ => base_font,
    };
    let metrics = metrics(name)?;
    let mut by_name = std::collections::HashMap::new();
    let mut by_code = vec![0.0; 256];
    for &(code, width, glyph) in metrics {
        let width = f64::from(width);
        if let Some(slot) = usize::try_from(code).ok().and_then(|c| by_code.get_mut(c)) {
            *slot = width;
        }
        if let Some(text) = super::fonts::glyph_name(glyph.as_bytes()) {
            by_name.entry(text).or_insert(width);
        }
    }
    // Symbol and ZapfDingbats keep their own codes; the others follow the
    // font's encoding, glyph by glyph.
    if matches!(name, b"Symbol" | b"ZapfDingbats") {
        return Some(by_code);
    }
    Some(
        text.iter()
            .map(|t| {
                t.as_ref()
                    .and_then(|t| by_name.get(t))
                    .copied()
                    .unwrap_or(0.0)
            })
            .collect(),
    )
}

fn metrics(name: &[u8]) -> Option<&'static [(i16, u16, &'static str)]> {
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
