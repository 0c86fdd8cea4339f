//! `modify`'s edits: a range of lines or occurrences of a text replaced.

/// One `modify` edit.
#[derive(Debug, Clone, PartialEq)]
pub enum Edit {
    /// Replace the 1-based inclusive line range with `new_text`.
    Lines {
        start: u32,
        end: u32,
        new_text: String,
    },
    /// Replace `old_text` by `new_text`, once or everywhere.
    Text {
        old_text: String,
        new_text: String,
        all: bool,
    },
}

impl Edit {
    /// The edit the optional fields describe: exactly one of a line range
    /// (`start_line`, optionally `end_line`) or `old_text`.
    pub fn new(
        start_line: Option<u32>,
        end_line: Option<u32>,
        old_text: Option<&str>,
        replace_all: Option<bool>,
        new_text: &str,
    ) -> Result<Edit, String> {
        let new_text = new_text.to_owned();
        match (start_line, end_line, old_text) {
            (Some(_), _, Some(_)) | (_, Some(_), Some(_)) => {
                Err("give either a line range (start_line, end_line) or old_text, not both".to_owned())
            }
            (None, None, Some("")) => Err("old_text is empty".to_owned()),
            (None, None, Some(old)) => Ok(Edit::Text {
                old_text: old.to_owned(),
                new_text,
                all: replace_all.unwrap_or(false),
            }),
            (_, _, None) if replace_all == Some(true) => {
                Err("replace_all applies only to old_text; give old_text to replace text".to_owned())
            }
            (Some(start), end, None) => Ok(Edit::Lines {
                start,
                end: end.unwrap_or(start),
                new_text,
            }),
            (None, Some(_), None) => Err("end_line needs start_line".to_owned()),
            (None, None, None) => Err(
                "say what to replace: start_line (and end_line) for a range of lines, or old_text for a text"
                    .to_owned(),
            ),
        }
    }

    /// Apply the edit to `text`: the new text and a summary of what changed.
    pub fn apply(&self, text: &str) -> Result<(String, String), String> {
        match self {
            Edit::Lines {
                start,
                end,
                new_text,
            } => replace_lines(text, *start, *end, new_text),
            Edit::Text {
                old_text,
                new_text,
                all,
            } => replace_text(text, old_text, new_text, *all),
        }
    }
}

pub(crate) fn plural(n: usize, word: &str) -> String {
    if n == 1 {
        format!("1 {word}")
    } else {
        format!("{n} {word}s")
    }
}

/// Replace lines `start..=end` (from 1) of `text` with `new_text`. The lines go
/// with their line endings; `new_text` gets the last replaced line's ending if
/// it lacks one, and an empty `new_text` deletes the lines.
fn replace_lines(
    text: &str,
    start: u32,
    end: u32,
    new_text: &str,
) -> Result<(String, String), String> {
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let (start, end) = (start as usize, end as usize);
    if start == 0 {
        return Err("lines count from 1".to_owned());
    }
    if start > end {
        return Err(format!("start_line {start} is after end_line {end}"));
    }
    if end > lines.len() {
        return Err(format!(
            "lines {start}-{end} are out of range: the file has {}",
            plural(lines.len(), "line")
        ));
    }
    let last = lines[end - 1];
    let ending = if last.ends_with("\r\n") {
        "\r\n"
    } else if last.ends_with('\n') {
        "\n"
    } else {
        ""
    };
    let mut out = String::with_capacity(text.len() + new_text.len() + ending.len());
    out.extend(lines[..start - 1].iter().copied());
    out.push_str(new_text);
    if !new_text.is_empty() && !new_text.ends_with('\n') {
        out.push_str(ending);
    }
    out.extend(lines[end..].iter().copied());
    let old = if start == end {
        format!("line {start}")
    } else {
        format!("lines {start}-{end}")
    };
    let inserted = new_text.split_inclusive('\n').count();
    let total = out.split_inclusive('\n').count();
    let summary = format!(
        "replaced {old} with {}; the file now has {}",
        plural(inserted, "line"),
        plural(total, "line")
    );
    Ok((out, summary))
}

/// Replace the first (or every) occurrence of `old` in `text` with `new`.
fn replace_text(text: &str, old: &str, new: &str, all: bool) -> Result<(String, String), String> {
    let count = text.matches(old).count();
    if count == 0 {
        return Err(
            "old_text was not found (it must match exactly, including whitespace and line breaks)"
                .to_owned(),
        );
    }
    Ok(if all {
        (
            text.replace(old, new),
            format!("replaced {}", plural(count, "occurrence")),
        )
    } else if count == 1 {
        (
            text.replacen(old, new, 1),
            "replaced 1 occurrence".to_owned(),
        )
    } else {
        (
            text.replacen(old, new, 1),
            format!("replaced the first of {count} occurrences (replace_all replaces them all)"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(start: u32, end: Option<u32>, new_text: &str) -> Edit {
        Edit::new(Some(start), end, None, None, new_text).unwrap()
    }

    #[test]
    fn edit_modes_are_exclusive() {
        assert_eq!(
            Edit::new(Some(2), None, None, None, "x").unwrap(),
            Edit::Lines {
                start: 2,
                end: 2,
                new_text: "x".into()
            }
        );
        assert_eq!(
            Edit::new(None, None, Some("a"), Some(true), "b").unwrap(),
            Edit::Text {
                old_text: "a".into(),
                new_text: "b".into(),
                all: true
            }
        );
        let both = Edit::new(Some(1), None, Some("a"), None, "b").unwrap_err();
        assert!(both.contains("not both"), "{both}");
        assert!(
            Edit::new(None, Some(1), Some("a"), None, "b")
                .unwrap_err()
                .contains("not both")
        );
        assert!(
            Edit::new(None, None, None, None, "b")
                .unwrap_err()
                .starts_with("say what to replace")
        );
        assert_eq!(
            Edit::new(None, Some(3), None, None, "b").unwrap_err(),
            "end_line needs start_line"
        );
        assert_eq!(
            Edit::new(None, None, Some(""), None, "b").unwrap_err(),
            "old_text is empty"
        );
        assert!(
            Edit::new(Some(1), None, None, Some(true), "b")
                .unwrap_err()
                .contains("replace_all applies only")
        );
    }

    #[test]
    fn replacing_lines() {
        let text = "one\ntwo\nthree\n";
        let (out, summary) = lines(2, Some(2), "TWO").apply(text).unwrap();
        assert_eq!(out, "one\nTWO\nthree\n");
        assert_eq!(
            summary,
            "replaced line 2 with 1 line; the file now has 3 lines"
        );
        let (out, summary) = lines(1, Some(2), "a\nb\nc\n").apply(text).unwrap();
        assert_eq!(out, "a\nb\nc\nthree\n");
        assert_eq!(
            summary,
            "replaced lines 1-2 with 3 lines; the file now has 4 lines"
        );
        // Deleting.
        assert_eq!(lines(2, Some(3), "").apply(text).unwrap().0, "one\n");
        assert_eq!(lines(1, Some(3), "").apply(text).unwrap().0, "");
        // The last line without a newline stays without one.
        assert_eq!(lines(2, None, "B").apply("a\nb").unwrap().0, "a\nB");
        // CRLF endings are kept.
        assert_eq!(
            lines(1, None, "X").apply("a\r\nb\r\n").unwrap().0,
            "X\r\nb\r\n"
        );
    }

    #[test]
    fn line_range_errors() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(
            lines(3, Some(2), "x").apply(text).unwrap_err(),
            "start_line 3 is after end_line 2"
        );
        assert_eq!(
            lines(2, Some(4), "x").apply(text).unwrap_err(),
            "lines 2-4 are out of range: the file has 3 lines"
        );
        assert!(
            lines(1, None, "x")
                .apply("")
                .unwrap_err()
                .contains("the file has 0 lines")
        );
        assert_eq!(
            lines(0, Some(1), "x").apply(text).unwrap_err(),
            "lines count from 1"
        );
    }

    #[test]
    fn replacing_text() {
        let text = "a-b-a-b";
        let first = Edit::new(None, None, Some("a"), None, "X").unwrap();
        let (out, summary) = first.apply(text).unwrap();
        assert_eq!(out, "X-b-a-b");
        assert!(
            summary.starts_with("replaced the first of 2 occurrences"),
            "{summary}"
        );
        let all = Edit::new(None, None, Some("a"), Some(true), "X").unwrap();
        assert_eq!(
            all.apply(text).unwrap(),
            ("X-b-X-b".to_owned(), "replaced 2 occurrences".to_owned())
        );
        let once = Edit::new(None, None, Some("-b-a"), Some(false), "").unwrap();
        assert_eq!(
            once.apply(text).unwrap(),
            ("a-b".to_owned(), "replaced 1 occurrence".to_owned())
        );
        let missing = Edit::new(None, None, Some("zzz"), None, "X").unwrap();
        assert!(
            missing
                .apply(text)
                .unwrap_err()
                .starts_with("old_text was not found")
        );
    }
}
