//! Office Open XML: Word (paragraphs, headings, lists, tables), PowerPoint
//! (slides with their titles and tables) and Excel (sheets as tables, through
//! `calamine`), with the package's core properties as metadata.

use std::collections::HashMap;

use toolhost_sdk::ToolError;

use crate::model::{Doc, Kind, Metadata, Ranges, Section, markdown_table, tidy};
use crate::xml::{Ev, attr, walk};
use crate::zipped::Package;

/// Paragraphs and tables of a text body (Word's `w:` or DrawingML's `a:`),
/// as Markdown lines. Tables nest: an inner table is flattened into its cell.
#[derive(Default)]
struct Body {
    out: String,
    para: String,
    /// Heading level of the current paragraph, list item or not.
    heading: usize,
    list: bool,
    tables: Vec<Table>,
    in_text: bool,
}

#[derive(Default)]
struct Table {
    rows: Vec<Vec<String>>,
    row: Vec<String>,
    cell: String,
}

impl Body {
    fn start_paragraph(&mut self) {
        self.para.clear();
        self.heading = 0;
        self.list = false;
    }

    fn end_paragraph(&mut self) {
        let text = self.para.trim();
        if text.is_empty() {
            return;
        }
        let line = if self.heading > 0 {
            format!("{} {text}", "#".repeat(self.heading.min(6)))
        } else if self.list {
            format!("- {text}")
        } else {
            text.to_owned()
        };
        match self.tables.last_mut() {
            Some(t) => {
                if !t.cell.is_empty() {
                    t.cell.push(' ');
                }
                t.cell.push_str(text);
            }
            None => {
                self.out.push_str(&line);
                self.out.push_str("\n\n");
            }
        }
        self.para.clear();
    }

    fn end_cell(&mut self) {
        if let Some(t) = self.tables.last_mut() {
            let cell = std::mem::take(&mut t.cell);
            t.row.push(cell);
        }
    }

    fn end_row(&mut self) {
        if let Some(t) = self.tables.last_mut() {
            let row = std::mem::take(&mut t.row);
            t.rows.push(row);
        }
    }

    fn end_table(&mut self) {
        let Some(t) = self.tables.pop() else { return };
        match self.tables.last_mut() {
            Some(outer) => {
                let flat: Vec<String> = t.rows.iter().map(|r| r.join(" ")).collect();
                outer.cell.push_str(&flat.join(" "));
            }
            None => {
                self.out.push_str(&markdown_table(&t.rows));
                self.out.push('\n');
            }
        }
    }
}

/// Heading levels of a Word document's paragraph styles, by style id:
/// "heading N" and "Title" by name, else the style's outline level.
fn heading_styles(styles: &str) -> Result<HashMap<String, usize>, ToolError> {
    let mut levels = HashMap::new();
    let mut id = String::new();
    walk(styles, "word/styles.xml", |ev| match ev {
        Ev::Start(n, a) if n == "w:style" => {
            id = attr(&a, "w:styleId").unwrap_or_default().to_owned();
        }
        Ev::Start(n, a) if n == "w:name" => {
            let name = attr(&a, "w:val").unwrap_or_default().to_ascii_lowercase();
            if name == "title" {
                levels.insert(id.clone(), 1);
            } else if let Some(l) = name
                .strip_prefix("heading ")
                .and_then(|l| l.trim().parse::<usize>().ok())
            {
                levels.insert(id.clone(), l.clamp(1, 6));
            }
        }
        Ev::Start(n, a) if n == "w:outlineLvl" => {
            if let Some(l) = attr(&a, "w:val").and_then(|v| v.parse::<usize>().ok()) {
                levels.entry(id.clone()).or_insert((l + 1).min(6));
            }
        }
        _ => {}
    })?;
    Ok(levels)
}

pub fn docx(bytes: &[u8]) -> Result<Doc, ToolError> {
    let mut pkg = Package::open(bytes)?;
    let levels = match pkg.text("word/styles.xml")? {
        Some(styles) => heading_styles(&styles)?,
        None => HashMap::new(),
    };
    let xml = pkg
        .text("word/document.xml")?
        .ok_or_else(|| ToolError::invalid_input("a DOCX without word/document.xml"))?;
    let mut body = Body::default();
    walk(&xml, "word/document.xml", |ev| match ev {
        Ev::Start(n, a) => match n.as_str() {
            "w:p" => body.start_paragraph(),
            "w:pStyle" => {
                let style = attr(&a, "w:val").unwrap_or_default();
                body.heading = levels.get(style).copied().unwrap_or_else(|| {
                    // Documents without a styles part still name headings.
                    style
                        .to_ascii_lowercase()
                        .strip_prefix("heading")
                        .and_then(|l| l.parse().ok())
                        .unwrap_or(0)
                });
            }
            "w:outlineLvl" if body.heading == 0 => {
                body.heading = attr(&a, "w:val")
                    .and_then(|v| v.parse::<usize>().ok())
                    .map_or(0, |l| if l < 9 { l + 1 } else { 0 });
            }
            "w:numPr" => body.list = true,
            "w:t" => body.in_text = true,
            "w:tab" => body.para.push('\t'),
            "w:br" | "w:cr" => body.para.push(' '),
            "w:tbl" => body.tables.push(Table::default()),
            _ => {}
        },
        Ev::End(n) => match n.as_str() {
            "w:t" => body.in_text = false,
            "w:p" => body.end_paragraph(),
            "w:tc" => body.end_cell(),
            "w:tr" => body.end_row(),
            "w:tbl" => body.end_table(),
            _ => {}
        },
        Ev::Text(t) if body.in_text => body.para.push_str(&t),
        Ev::Text(_) => {}
    })?;
    let metadata = core_properties(&mut pkg)?;
    Ok(Doc {
        metadata,
        sections: vec![Section {
            kind: Kind::Document,
            number: 1,
            title: None,
            text: tidy(&body.out),
        }],
        count: 1,
    })
}

/// The targets of a part's relationships, by id, resolved against `dir`.
fn relationships(
    pkg: &mut Package,
    rels: &str,
    dir: &str,
) -> Result<HashMap<String, String>, ToolError> {
    let mut targets = HashMap::new();
    if let Some(xml) = pkg.text(rels)? {
        walk(&xml, rels, |ev| {
            if let Ev::Start(n, a) = ev
                && n == "Relationship"
                && let (Some(id), Some(target)) = (attr(&a, "Id"), attr(&a, "Target"))
            {
                let path = match target.strip_prefix('/') {
                    Some(abs) => abs.to_owned(),
                    None => format!("{dir}/{target}"),
                };
                targets.insert(id.to_owned(), path);
            }
        })?;
    }
    Ok(targets)
}

pub fn pptx(bytes: &[u8], slides: &Ranges) -> Result<Doc, ToolError> {
    let mut pkg = Package::open(bytes)?;
    let presentation = pkg
        .text("ppt/presentation.xml")?
        .ok_or_else(|| ToolError::invalid_input("a PPTX without ppt/presentation.xml"))?;
    let mut order = Vec::new();
    walk(&presentation, "ppt/presentation.xml", |ev| {
        if let Ev::Start(n, a) = ev
            && n == "p:sldId"
            && let Some(id) = attr(&a, "r:id")
        {
            order.push(id.to_owned());
        }
    })?;
    let rels = relationships(&mut pkg, "ppt/_rels/presentation.xml.rels", "ppt")?;
    let count = order.len();
    if !slides.any_of(count) {
        return Err(ToolError::invalid_input(format!(
            "`pages` asks for none of this presentation's {count} slides"
        )));
    }
    let mut sections = Vec::new();
    for (i, id) in order.iter().enumerate() {
        let number = i + 1;
        if !slides.contains(number) {
            continue;
        }
        let Some(part) = rels.get(id) else { continue };
        let part = normalise(part);
        let Some(xml) = pkg.text(&part)? else {
            continue;
        };
        let (title, text) = slide(&xml, &part)?;
        let text = match &title {
            Some(t) => tidy(&format!("## {t}\n\n{text}")),
            None => tidy(&text),
        };
        sections.push(Section {
            kind: Kind::Slide,
            number,
            title,
            text,
        });
    }
    Ok(Doc {
        metadata: core_properties(&mut pkg)?,
        sections,
        count,
    })
}

/// `ppt/slides/../media/x` → `ppt/media/x`.
fn normalise(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            ".." => {
                parts.pop();
            }
            "." | "" => {}
            p => parts.push(p),
        }
    }
    parts.join("/")
}

/// A slide's title (its title placeholder's text) and the rest of its text.
fn slide(xml: &str, part: &str) -> Result<(Option<String>, String), ToolError> {
    let mut body = Body::default();
    let mut title: Option<String> = None;
    let mut in_title_shape = false;
    let mut shape_depth = 0usize;
    let mut title_text = String::new();
    walk(xml, part, |ev| match ev {
        Ev::Start(n, a) => match n.as_str() {
            "p:sp" => {
                shape_depth += 1;
                in_title_shape = false;
            }
            "p:ph" => {
                in_title_shape = matches!(attr(&a, "type"), Some("title" | "ctrTitle"));
            }
            "a:p" => body.start_paragraph(),
            "a:t" => body.in_text = true,
            "a:br" => body.para.push(' '),
            "a:tbl" => body.tables.push(Table::default()),
            _ => {}
        },
        Ev::End(n) => match n.as_str() {
            "a:t" => body.in_text = false,
            "a:p" if in_title_shape && body.tables.is_empty() => {
                let t = body.para.trim();
                if !t.is_empty() {
                    if !title_text.is_empty() {
                        title_text.push(' ');
                    }
                    title_text.push_str(t);
                }
                body.para.clear();
            }
            "a:p" => body.end_paragraph(),
            "a:tc" => body.end_cell(),
            "a:tr" => body.end_row(),
            "a:tbl" => body.end_table(),
            "p:sp" => {
                shape_depth = shape_depth.saturating_sub(1);
                if in_title_shape && title.is_none() && !title_text.is_empty() {
                    title = Some(std::mem::take(&mut title_text));
                }
                in_title_shape = false;
            }
            _ => {}
        },
        Ev::Text(t) if body.in_text => body.para.push_str(&t),
        Ev::Text(_) => {}
    })?;
    Ok((title, body.out))
}

pub fn xlsx(bytes: &[u8], sheets: &Ranges) -> Result<Doc, ToolError> {
    // The same ZIP checks as the other formats before calamine inflates a part.
    let mut pkg = Package::open(bytes)?;
    let metadata = core_properties(&mut pkg)?;
    let mut book = calamine::Xlsx::new(std::io::Cursor::new(bytes))
        .map_err(|e| ToolError::invalid_input(format!("not a readable XLSX workbook: {e}")))?;
    use calamine::Reader;
    let names = book.sheet_names();
    let count = names.len();
    if !sheets.any_of(count) {
        return Err(ToolError::invalid_input(format!(
            "`pages` asks for none of this workbook's {count} sheets"
        )));
    }
    let mut sections = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let number = i + 1;
        if !sheets.contains(number) {
            continue;
        }
        let range = book
            .worksheet_range(name)
            .map_err(|e| ToolError::invalid_input(format!("cannot read sheet `{name}`: {e}")))?;
        let mut rows: Vec<Vec<String>> = range
            .rows()
            .map(|r| r.iter().map(cell_text).collect())
            .collect();
        // Trailing empty rows and columns are layout, not data.
        while rows.last().is_some_and(|r| r.iter().all(String::is_empty)) {
            rows.pop();
        }
        let width = rows
            .iter()
            .map(|r| r.iter().rposition(|c| !c.is_empty()).map_or(0, |p| p + 1))
            .max()
            .unwrap_or(0);
        for r in &mut rows {
            r.truncate(width);
        }
        let text = if rows.is_empty() {
            String::from("(empty sheet)")
        } else {
            format!("## {name}\n\n{}", markdown_table(&rows))
        };
        sections.push(Section {
            kind: Kind::Sheet,
            number,
            title: Some(name.clone()),
            text: tidy(&text),
        });
    }
    Ok(Doc {
        metadata,
        sections,
        count,
    })
}

/// A cell as text; dates and times as ISO 8601 (Excel stores them as days since
/// 1899-12-30).
fn cell_text(cell: &calamine::Data) -> String {
    match cell {
        calamine::Data::DateTime(d) if d.is_datetime() => excel_date(d.as_f64()),
        other => other.to_string(),
    }
}

fn excel_date(serial: f64) -> String {
    let days = serial.floor() as i64;
    let secs = ((serial - serial.floor()) * 86_400.0).round() as i64;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days - 25_569 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let date = format!("{year:04}-{month:02}-{day:02}");
    if secs == 0 {
        date
    } else {
        format!(
            "{date}T{:02}:{:02}:{:02}",
            secs / 3600,
            secs / 60 % 60,
            secs % 60
        )
    }
}

/// `docProps/core.xml` (Dublin Core) and the application from `app.xml`.
fn core_properties(pkg: &mut Package) -> Result<Metadata, ToolError> {
    let mut m = Metadata::default();
    if let Some(xml) = pkg.text("docProps/core.xml")? {
        let mut current = String::new();
        walk(&xml, "docProps/core.xml", |ev| match ev {
            Ev::Start(n, _) => current = n,
            Ev::End(_) => current.clear(),
            Ev::Text(t) => {
                let t = t.trim();
                if t.is_empty() {
                    return;
                }
                let slot = match current.as_str() {
                    "dc:title" => &mut m.title,
                    "dc:creator" => &mut m.author,
                    "dc:subject" => &mut m.subject,
                    "cp:keywords" => &mut m.keywords,
                    "dc:language" => &mut m.language,
                    "dcterms:created" => &mut m.created,
                    "dcterms:modified" => &mut m.modified,
                    _ => return,
                };
                *slot = Some(t.to_owned());
            }
        })?;
    }
    if pkg.has("docProps/app.xml")
        && let Some(xml) = pkg.text("docProps/app.xml")?
    {
        let mut in_app = false;
        walk(&xml, "docProps/app.xml", |ev| match ev {
            Ev::Start(n, _) => in_app = n == "Application",
            Ev::End(_) => in_app = false,
            Ev::Text(t) if in_app && !t.trim().is_empty() => m.creator = Some(t.trim().to_owned()),
            Ev::Text(_) => {}
        })?;
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excel_serial_dates() {
        assert_eq!(excel_date(38051.0), "2004-03-05");
        assert_eq!(excel_date(45292.5), "2024-01-01T12:00:00");
        assert_eq!(excel_date(25569.0), "1970-01-01");
    }

    #[test]
    fn relative_part_paths() {
        assert_eq!(normalise("ppt/slides/../media/a.png"), "ppt/media/a.png");
        assert_eq!(
            normalise("ppt/./slides/slide1.xml"),
            "ppt/slides/slide1.xml"
        );
    }
}
