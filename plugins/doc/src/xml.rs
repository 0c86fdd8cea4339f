//! A small pull reader over `quick-xml` for the Office formats: start and
//! end tags by qualified name with their attributes, and text with entity
//! references resolved.

use quick_xml::events::{BytesStart, Event};
use toolhost_sdk::ToolError;

pub enum Ev {
    /// A start tag (an empty element gives `Start` then `End`).
    Start(String, Vec<(String, String)>),
    End(String),
    Text(String),
}

/// Walk `xml`, calling `f` for each event; `part` names the part in errors.
pub fn walk(xml: &str, part: &str, mut f: impl FnMut(Ev)) -> Result<(), ToolError> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let bad = |e: &dyn std::fmt::Display| {
        ToolError::invalid_input(format!("damaged XML in the document's `{part}`: {e}"))
    };
    loop {
        match reader.read_event() {
            Ok(Event::Start(e)) => f(Ev::Start(name(&e), attrs(&e))),
            Ok(Event::Empty(e)) => {
                let n = name(&e);
                f(Ev::Start(n.clone(), attrs(&e)));
                f(Ev::End(n));
            }
            Ok(Event::End(e)) => f(Ev::End(
                String::from_utf8_lossy(e.name().as_ref()).into_owned(),
            )),
            Ok(Event::Text(t)) => f(Ev::Text(t.decode().map_err(|e| bad(&e))?.into_owned())),
            Ok(Event::CData(t)) => f(Ev::Text(String::from_utf8_lossy(&t).into_owned())),
            Ok(Event::GeneralRef(r)) => {
                let text = match r.resolve_char_ref() {
                    Ok(Some(c)) => c.to_string(),
                    _ => {
                        let name = r.decode().map_err(|e| bad(&e))?;
                        quick_xml::escape::resolve_predefined_entity(&name)
                            .unwrap_or_default()
                            .to_owned()
                    }
                };
                f(Ev::Text(text));
            }
            Ok(Event::Eof) => return Ok(()),
            Ok(_) => {}
            Err(e) => return Err(bad(&e)),
        }
    }
}

fn name(e: &BytesStart) -> String {
    String::from_utf8_lossy(e.name().as_ref()).into_owned()
}

fn attrs(e: &BytesStart) -> Vec<(String, String)> {
    e.attributes()
        .flatten()
        .map(|a| {
            (String::from_utf8_lossy(a.key.as_ref()).into_owned(), {
                let raw = String::from_utf8_lossy(&a.value);
                quick_xml::escape::unescape(&raw)
                    .map(|v| v.into_owned())
                    .unwrap_or_else(|_| raw.into_owned())
            })
        })
        .collect()
}

/// The value of attribute `key` (a qualified name, e.g. `w:val`).
pub fn attr<'a>(attrs: &'a [(String, String)], key: &str) -> Option<&'a str> {
    attrs
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_with_references() {
        let mut out = String::new();
        walk(
            "<a x='1'><b/>T&amp;C &#x4E2D;<![CDATA[<z>]]></a>",
            "t",
            |e| match e {
                Ev::Start(n, a) => out += &format!("<{n}{}>", a.len()),
                Ev::End(n) => out += &format!("</{n}>"),
                Ev::Text(t) => out += &t,
            },
        )
        .unwrap();
        assert_eq!(out, "<a1><b0></b>T&C 中<z></a>");
        assert!(walk("<a><b></a>", "t", |_| {}).is_err());
    }
}
