//! What a response is: HTML, other text, or bytes `web_extractor` refuses
//! (images, PDFs, archives ...), by its declared type and its first bytes.

#[derive(Debug, PartialEq, Eq)]
pub enum Kind {
    Html,
    Text,
    /// Not text; the type to name in the refusal.
    Binary(String),
}

/// The media type of a `content-type` header, lowercase, without parameters.
pub fn media_type(content_type: &str) -> String {
    content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The kind a `content-type` declares, if it says.
pub fn declared(content_type: Option<&str>) -> Option<Kind> {
    let t = media_type(content_type?);
    if t.is_empty() {
        return None;
    }
    Some(match t.as_str() {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        _ if t.starts_with("text/") => Kind::Text,
        "application/json"
        | "application/xml"
        | "application/javascript"
        | "application/x-javascript"
        | "application/ecmascript" => Kind::Text,
        _ if t.ends_with("+json") || t.ends_with("+xml") => Kind::Text,
        // Servers that do not know say this of anything: look at the bytes.
        "application/octet-stream" | "binary/octet-stream" | "application/unknown" => {
            return None;
        }
        _ => Kind::Binary(t),
    })
}

/// The kind of `bytes` judged by their start: known magic numbers and NUL
/// bytes are binary; markup is HTML; the rest text.
pub fn sniff(bytes: &[u8]) -> Kind {
    let head = &bytes[..bytes.len().min(1024)];
    const MAGIC: &[(&[u8], &str)] = &[
        (b"%PDF-", "application/pdf"),
        (b"\x89PNG", "image/png"),
        (b"GIF8", "image/gif"),
        (b"\xff\xd8\xff", "image/jpeg"),
        (b"PK\x03\x04", "application/zip"),
        (b"\x1f\x8b", "application/gzip"),
        (b"RIFF", "application/octet-stream (RIFF)"),
        (b"\0asm", "application/wasm"),
        (b"\x7fELF", "application/octet-stream (ELF)"),
    ];
    if let Some((_, t)) = MAGIC.iter().find(|(m, _)| head.starts_with(m)) {
        return Kind::Binary((*t).to_owned());
    }
    if head.contains(&0) {
        return Kind::Binary("application/octet-stream".into());
    }
    let start = String::from_utf8_lossy(head)
        .trim_start()
        .to_ascii_lowercase();
    if start.starts_with('<')
        && [
            "<!doctype html",
            "<html",
            "<head",
            "<body",
            "<p",
            "<div",
            "<title",
            "<meta",
        ]
        .iter()
        .any(|m| start.contains(m))
    {
        Kind::Html
    } else {
        Kind::Text
    }
}

/// The kind of a response: its declared type, checked against its bytes (a
/// "text/html" that starts like a PDF is a PDF).
pub fn classify(content_type: Option<&str>, bytes: &[u8]) -> Kind {
    let sniffed = sniff(bytes);
    match declared(content_type) {
        Some(Kind::Binary(t)) => Kind::Binary(t),
        _ if matches!(sniffed, Kind::Binary(_)) => sniffed,
        Some(kind) => kind,
        None => sniffed,
    }
}

/// `bytes` as text: UTF-8, or Latin-1 / Windows-1252 when the header or a
/// `<meta charset>` says so (invalid UTF-8 replaced).
pub fn decode(content_type: Option<&str>, bytes: &[u8]) -> String {
    let declared = content_type
        .and_then(|t| {
            t.to_ascii_lowercase()
                .split("charset=")
                .nth(1)
                .map(str::to_owned)
        })
        .or_else(|| {
            let head =
                String::from_utf8_lossy(&bytes[..bytes.len().min(2048)]).to_ascii_lowercase();
            head.split("charset=").nth(1).map(str::to_owned)
        })
        .unwrap_or_default();
    let charset = declared.trim_start_matches(['"', '\'']);
    let latin = ["iso-8859-1", "latin1", "windows-1252", "cp1252", "us-ascii"]
        .iter()
        .any(|c| charset.starts_with(c));
    if latin && std::str::from_utf8(bytes).is_err() {
        bytes.iter().map(|&b| char::from(b)).collect()
    } else {
        String::from_utf8_lossy(bytes).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types() {
        assert_eq!(declared(Some("text/html; charset=utf-8")), Some(Kind::Html));
        assert_eq!(declared(Some("TEXT/PLAIN")), Some(Kind::Text));
        assert_eq!(declared(Some("application/ld+json")), Some(Kind::Text));
        assert_eq!(
            declared(Some("image/png")),
            Some(Kind::Binary("image/png".into()))
        );
        assert_eq!(
            declared(Some("application/pdf")),
            Some(Kind::Binary("application/pdf".into()))
        );
        assert_eq!(declared(Some("application/octet-stream")), None);
        assert_eq!(declared(None), None);
    }

    #[test]
    fn bytes_decide_when_the_type_does_not() {
        assert_eq!(
            classify(Some("text/html"), b"%PDF-1.7 ..."),
            Kind::Binary("application/pdf".into())
        );
        assert_eq!(
            classify(None, b"\x89PNG\r\n"),
            Kind::Binary("image/png".into())
        );
        assert_eq!(
            classify(Some("application/octet-stream"), b"ab\0cd"),
            Kind::Binary("application/octet-stream".into())
        );
        assert_eq!(classify(None, b"  <!DOCTYPE html><html>"), Kind::Html);
        assert_eq!(
            classify(Some("application/octet-stream"), b"<html><p>x"),
            Kind::Html
        );
        assert_eq!(classify(None, b"just words"), Kind::Text);
        assert_eq!(classify(Some("text/plain"), b"<html>"), Kind::Text);
    }

    #[test]
    fn latin1_pages_decode() {
        assert_eq!(
            decode(Some("text/html; charset=ISO-8859-1"), b"caf\xe9"),
            "café"
        );
        assert_eq!(
            decode(None, b"<meta charset=\"windows-1252\">caf\xe9"),
            "<meta charset=\"windows-1252\">café"
        );
        assert_eq!(decode(None, "café".as_bytes()), "café");
        assert_eq!(decode(None, b"caf\xe9"), "caf\u{fffd}");
    }
}
