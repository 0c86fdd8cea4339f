use lopdf::{Dictionary, Document, Object, Stream, dictionary};

use super::*;
use crate::model::Ranges;

#[test]
fn pdf_dates_and_strings() {
    assert_eq!(date("D:20230102150405+01'00'"), "2023-01-02T15:04:05+01:00");
    assert_eq!(date("D:20230102"), "2023-01-02");
    assert_eq!(date("yesterday"), "yesterday");
    assert_eq!(text_string(&[0xFE, 0xFF, 0, b'h', 0x4E, 0x2D]), "h中");
    assert_eq!(text_string(b"caf\xe9"), "café");
}

#[test]
fn a_cut_pdf_is_the_callers_error() {
    let e = parse(b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog", &Ranges::default()).unwrap_err();
    assert!(format!("{e:?}").contains("not a readable PDF"), "{e:?}");
}

/// A PDF of the pages `build` gives (content, resources), after it added
/// the objects they refer to.
fn pdf(build: impl FnOnce(&mut Document) -> Vec<(&'static str, Dictionary)>) -> Vec<u8> {
    let mut doc = Document::with_version("1.5");
    let pages = build(&mut doc);
    let tree = doc.new_object_id();
    let kids: Vec<Object> = pages
        .into_iter()
        .map(|(content, resources)| {
            let content = doc.add_object(Stream::new(dictionary! {}, content.as_bytes().to_vec()));
            doc.add_object(dictionary! {
                "Type" => "Page",
                "Parent" => tree,
                "Contents" => content,
                "Resources" => resources,
            })
            .into()
        })
        .collect();
    doc.objects.insert(
        tree,
        dictionary! {
            "Type" => "Pages",
            "Count" => kids.len() as i64,
            "Kids" => kids,
            "MediaBox" => vec![0.into(), 0.into(), 612.into(), 792.into()],
        }
        .into(),
    );
    let catalog = doc.add_object(dictionary! { "Type" => "Catalog", "Pages" => tree });
    doc.trailer.set("Root", catalog);
    let mut bytes = Vec::new();
    doc.save_to(&mut bytes).unwrap();
    bytes
}

fn texts(bytes: &[u8]) -> Vec<String> {
    let doc = parse(bytes, &Ranges::default()).unwrap();
    doc.sections.into_iter().map(|s| s.text).collect()
}

fn fonts(name: &str, font: Object) -> Dictionary {
    dictionary! { "Font" => dictionary! { name => font } }
}

/// A standard font by name, without /Widths (Adobe's metrics apply).
fn standard(doc: &mut Document, name: &str) -> Object {
    let font = dictionary! {
        "Type" => "Font", "Subtype" => "Type1", "BaseFont" => name,
        "Encoding" => "WinAnsiEncoding",
    };
    doc.add_object(font).into()
}

#[test]
fn words_are_spaced_by_where_they_are_drawn() {
    // "Hello" in Helvetica is 2.278 em wide: at 10 pt the next word starts
    // 0.05 em after it in the first line (a kerned join: no space) and 0.55
    // em after it in the second (a space); a TJ gap of 0.8 em is a space.
    let bytes = pdf(|doc| {
        let helvetica = standard(doc, "Helvetica");
        vec![(
            "BT /F1 10 Tf 72 700 Td (Hello) Tj 23.28 0 Td (world) Tj \
             -23.28 -12 Td (Hello) Tj 28.28 0 Td (world) Tj \
             [( Good) -800 (bye)] TJ 14 TL T* (third) Tj (fourth) ' ET",
            fonts("F1", helvetica),
        )]
    });
    assert_eq!(
        texts(&bytes),
        ["Helloworld\nHello world Good bye\nthird\nfourth"]
    );
}

#[test]
fn a_font_name_means_each_page_its_own_font() {
    // All pages call their font /F1; a cache by name would decode page 2
    // with page 1's encoding, or page 3 with page 2's.
    let bytes = pdf(|doc| {
        let plain = standard(doc, "Times-Roman");
        let encoding = dictionary! {
            "Type" => "Encoding",
            "Differences" => vec![65.into(), "z".into(), "y".into()],
        };
        let shifted: Object = doc
            .add_object(dictionary! {
                "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Times-Roman",
                "Encoding" => encoding,
            })
            .into();
        let page = "BT /F1 12 Tf 72 700 Td (AB) Tj ET";
        vec![
            (page, fonts("F1", plain.clone())),
            (page, fonts("F1", shifted)),
            (page, fonts("F1", plain)),
        ]
    });
    assert_eq!(texts(&bytes), ["AB", "zy", "AB"]);
}

#[test]
fn fonts_are_read_once_per_document() {
    let mut font = Object::Null;
    let bytes = pdf(|doc| {
        font = standard(doc, "Courier");
        vec![
            ("BT /A 10 Tf (x) Tj ET", fonts("A", font.clone())),
            ("BT /B 10 Tf (y) Tj ET", fonts("B", font.clone())),
        ]
    });
    assert_eq!(texts(&bytes), ["x", "y"]);
    let doc = Document::load_mem(&bytes).unwrap();
    let mut fonts = fonts::Fonts::default();
    let first = fonts.get(&doc, &font).unwrap();
    let again = fonts.get(&doc, &font).unwrap();
    assert!(std::rc::Rc::ptr_eq(&first, &again));
    // Courier: 600 units a glyph.
    assert!((first.width(u32::from(b'x')) - 0.6).abs() < 1e-9);
}

#[test]
fn composite_fonts_use_their_map_and_widths() {
    let map = b"begincmap 1 begincodespacerange <0000> <FFFF> endcodespacerange\n\
        2 beginbfchar <0001> <0048> <0002> <0069> endbfchar\n\
        1 beginbfrange <0010> <0012> <0061> endbfrange endcmap";
    let bytes = pdf(|doc| {
        let to_unicode = doc.add_object(Stream::new(dictionary! {}, map.to_vec()));
        let widths: Vec<Object> = vec![
            1.into(),
            vec![500.into(), 250.into()].into(),
            16.into(),
            18.into(),
            400.into(),
        ];
        let descendant = dictionary! {
            "Type" => "Font", "Subtype" => "CIDFontType2", "BaseFont" => "X",
            "DW" => 1000, "W" => widths,
        };
        let font = doc.add_object(dictionary! {
            "Type" => "Font", "Subtype" => "Type0", "BaseFont" => "X",
            "Encoding" => "Identity-H",
            "DescendantFonts" => vec![descendant.into()],
            "ToUnicode" => to_unicode,
        });
        // "Hi" at 10 pt ends 7.5 pt after 72; "abc" starts 1 pt later (no
        // space) and ends at 92.5; "ab" starts 5 pt after that (a space).
        vec![(
            "BT /F 10 Tf 72 700 Td <00010002> Tj 8.5 0 Td <001000110012> Tj \
             17 0 Td <00100011> Tj ET",
            fonts("F", font.into()),
        )]
    });
    assert_eq!(texts(&bytes), ["Hiabc ab"]);
}

#[test]
fn a_unicode_cmap_without_a_map_is_its_own_text() {
    let bytes = pdf(|doc| {
        let font = doc.add_object(dictionary! {
            "Type" => "Font", "Subtype" => "Type0", "BaseFont" => "STSong-Light",
            "Encoding" => "UniGB-UCS2-H",
            "DescendantFonts" => vec![dictionary! { "Subtype" => "CIDFontType0" }.into()],
        });
        vec![(
            "BT /F 10 Tf 72 700 Td <4E2D6587> Tj ET",
            fonts("F", font.into()),
        )]
    });
    assert_eq!(texts(&bytes), ["中文"]);
}

#[test]
fn a_type1_programs_own_encoding_is_read() {
    let program = b"%!PS-AdobeFont-1.0: Test\n/Encoding 256 array\n\
        0 1 255 {1 index exch /.notdef put} for\n\
        dup 65 /Q put\ndup 66 /eacute put\nreadonly def\ncurrentfile eexec\n\x80\x81";
    let bytes = pdf(|doc| {
        let file = doc.add_object(Stream::new(dictionary! {}, program.to_vec()));
        let descriptor = doc.add_object(dictionary! {
            "Type" => "FontDescriptor", "FontName" => "Test", "Flags" => 4, "FontFile" => file,
        });
        let font = doc.add_object(dictionary! {
            "Type" => "Font", "Subtype" => "Type1", "BaseFont" => "Test",
            "FirstChar" => 65, "Widths" => vec![500.into(), 500.into()],
            "FontDescriptor" => descriptor,
        });
        vec![("BT /F 10 Tf 72 700 Td (AB) Tj ET", fonts("F", font.into()))]
    });
    assert_eq!(texts(&bytes), ["Qé"]);
}

/// A page drawing form `X` (with `form` as its content) after "before".
fn page_with_form(form: &'static [u8]) -> Vec<u8> {
    pdf(|doc| {
        let font = standard(doc, "Helvetica");
        let id = doc.new_object_id();
        let stream = Stream::new(
            dictionary! {
                "Type" => "XObject", "Subtype" => "Form",
                "Matrix" => vec![1.into(), 0.into(), 0.into(), 1.into(), 0.into(), (-100).into()],
                // The form's own resources name itself: it may draw itself.
                "Resources" => dictionary! {
                    "Font" => dictionary! { "F1" => font.clone() },
                    "XObject" => dictionary! { "X" => id },
                },
            },
            form.to_vec(),
        );
        doc.objects.insert(id, stream.into());
        let resources = dictionary! {
            "Font" => dictionary! { "F1" => font },
            "XObject" => dictionary! { "X" => id },
        };
        vec![("BT /F1 10 Tf 72 700 Td (before) Tj ET /X Do", resources)]
    })
}

#[test]
fn forms_draw_their_text_where_their_matrix_puts_it() {
    let bytes = page_with_form(b"BT /F1 10 Tf 72 700 Td (inside) Tj ET");
    // 100 pt below: a paragraph break.
    assert_eq!(texts(&bytes), ["before\n\ninside"]);
}

#[test]
fn forms_drawing_themselves_end() {
    // Each level draws the next twice, 12 levels deep: 2^12 - 1 runs.
    let text = texts(&page_with_form(
        b"q /X Do Q q /X Do Q BT /F1 10 Tf (x) Tj ET",
    ));
    assert!(text[0].starts_with("before"), "{text:?}");
    assert_eq!(text[0].matches('x').count(), 4095);
    // A form whose content is not a content stream is left out.
    let text = texts(&page_with_form(b"BT /F1 10 Tf (never closed"));
    assert_eq!(text, ["before"]);
    // Past the page's budget of operations, the page says so.
    let many: &'static [u8] = "0 0 m ".repeat(2_000).leak().as_bytes();
    let many = [many, b"q /X Do Q q /X Do Q"].concat().leak();
    let text = texts(&page_with_form(many));
    assert!(
        text[0].starts_with("[page 1 could not be read: more than 5000000"),
        "{text:?}"
    );
}

#[test]
fn saved_states_are_bounded_and_restored() {
    // 300 saves (past the 256 kept), a shift inside the innermost, then as
    // many restores: the text after them is back where the shift began.
    let content: &'static str = format!(
        "BT /F1 10 Tf 72 700 Td (a) Tj ET {} 1 0 0 1 0 -300 cm {} BT /F1 10 Tf 72 700 Td (b) Tj ET",
        "q ".repeat(300),
        "Q ".repeat(300),
    )
    .leak();
    let bytes = pdf(|doc| {
        let font = standard(doc, "Helvetica");
        vec![(content, fonts("F1", font))]
    });
    // Same baseline as "a", right after it: no break, no space.
    assert_eq!(texts(&bytes), ["ab"]);
}

#[test]
fn tables_read_row_by_row() {
    // Reference cards and option tables: a name beside its description,
    // not (as pdftotext) every name of a column, then every description.
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/docs");
    let read = |name: &str| {
        let bytes = std::fs::read(format!("{dir}/{name}")).unwrap();
        texts(&bytes).join("\n")
    };
    let card = read("ref_card.pdf");
    assert!(
        card.contains("check_y Check the value of the year."),
        "{card}"
    );
    assert!(
        card.contains("BIBINPUTS Search path for bib files"),
        "{card}"
    );
    let manual = read("blktrace.pdf");
    assert!(
        manual.contains("-a mask –act-mask=mask Add mask to current filter"),
        "{manual}"
    );
}

/// Real PDFs with their page content and fonts mutated at random (a fixed
/// seed): each reads to text or to an error, never a panic. 12 rounds a
/// document; `PDF_MUTATION_ROUNDS=1000` for a longer search.
#[test]
fn mutated_documents_never_panic() {
    let rounds: usize = std::env::var("PDF_MUTATION_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(12);
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../tests/fixtures/docs");
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    const ALPHABET: &[u8] = b"0123456789-.()<>[]/ \nTJjfmdcqQBEDo'\"*";
    for name in ["ref_card.pdf", "libargtable2-docs-argtable2.pdf"] {
        let original = Document::load(format!("{dir}/{name}")).unwrap();
        for _ in 0..rounds {
            let mut doc = original.clone();
            for object in doc.objects.values_mut() {
                match object {
                    Object::Stream(stream) if next() % 3 == 0 => {
                        let mut bytes = stream.decompressed_content().unwrap_or_default();
                        for _ in 0..1 + bytes.len() / 200 {
                            if bytes.is_empty() {
                                break;
                            }
                            let at = next() as usize % bytes.len();
                            bytes[at] = ALPHABET[next() as usize % ALPHABET.len()];
                        }
                        stream.dict.remove(b"Filter");
                        stream.set_content(bytes);
                    }
                    Object::Dictionary(dict) if dict.has(b"FirstChar") && next() % 2 == 0 => {
                        dict.set("FirstChar", -(next() as i64 % 1000));
                        dict.set("Widths", vec![Object::Real(f32::MAX); 3]);
                    }
                    Object::Dictionary(dict) if dict.has(b"DescendantFonts") && next() % 2 == 0 => {
                        dict.set(
                            "DescendantFonts",
                            vec![dictionary! { "W" => vec![Object::Integer(-1)] }.into()],
                        );
                    }
                    _ => {}
                }
            }
            let mut bytes = Vec::new();
            doc.save_to(&mut bytes).unwrap();
            let _ = parse(&bytes, &Ranges::default());
        }
    }
}
