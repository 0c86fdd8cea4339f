//! `read`'s windows of lines, read without holding more of the file than
//! the window.

use std::io::{self, BufRead};

use crate::MAX_READ_BYTES;

/// Which lines of a file `read` returns.
#[derive(Debug, Clone)]
pub struct Window {
    /// First line, from 1.
    pub offset_line: u32,
    /// Most lines, if limited.
    pub max_lines: Option<u32>,
    /// Most bytes of text.
    pub max_bytes: usize,
}

#[derive(Debug)]
pub enum WindowError {
    Io(io::Error),
    /// The file is not UTF-8; the 1-based line where that shows.
    NotUtf8 {
        line: u64,
    },
    /// `offset_line` is past the last line.
    PastEnd {
        offset_line: u32,
        lines: u64,
    },
    /// The window holds more than `max_bytes`; the line where it stopped.
    TooLarge {
        line: u64,
    },
    /// `offset_line` is 0.
    ZeroOffset,
}

impl WindowError {
    pub(crate) fn message(&self) -> String {
        match self {
            WindowError::Io(e) => e.to_string(),
            WindowError::NotUtf8 { line } => format!("not UTF-8 text (at line {line})"),
            WindowError::PastEnd { offset_line, lines } => {
                format!("offset_line {offset_line} is past the end of the file ({lines} lines)")
            }
            WindowError::TooLarge { line } => format!(
                "the text from the offset to line {line} is larger than {} KiB; read it in parts with \
                 offset_line and max_lines",
                MAX_READ_BYTES >> 10
            ),
            WindowError::ZeroOffset => "offset_line counts from 1".to_owned(),
        }
    }
}

/// Read the lines of `window` from `reader`, keeping their line endings, without
/// holding more of the file than the window in memory. A line is a run of
/// bytes ending with `\n` or at the end of the file: `a\nb` and `a\nb\n` both
/// have two lines, an empty file has none.
pub fn read_window(mut reader: impl BufRead, window: &Window) -> Result<String, WindowError> {
    if window.offset_line == 0 {
        return Err(WindowError::ZeroOffset);
    }
    let first = u64::from(window.offset_line);
    let last = window.max_lines.map(|n| first + u64::from(n));
    let mut out = Vec::new();
    let mut line = Vec::new();
    let mut number = 0u64;
    loop {
        if last.is_some_and(|last| number + 1 >= last) {
            break;
        }
        line.clear();
        if reader
            .read_until(b'\n', &mut line)
            .map_err(WindowError::Io)?
            == 0
        {
            break;
        }
        number += 1;
        // `\n` never occurs inside a multi-byte character, so checking line by
        // line is exact.
        if std::str::from_utf8(&line).is_err() {
            return Err(WindowError::NotUtf8 { line: number });
        }
        if number >= first {
            if out.len() + line.len() > window.max_bytes {
                return Err(WindowError::TooLarge { line: number });
            }
            out.extend_from_slice(&line);
        }
    }
    if first > 1 && number < first {
        return Err(WindowError::PastEnd {
            offset_line: window.offset_line,
            lines: number,
        });
    }
    Ok(String::from_utf8(out).expect("checked line by line"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn window(text: &str, offset_line: u32, max_lines: Option<u32>) -> Result<String, WindowError> {
        let w = Window {
            offset_line,
            max_lines,
            max_bytes: 32,
        };
        read_window(Cursor::new(text.as_bytes().to_vec()), &w)
    }

    #[test]
    fn windows_of_lines() {
        let text = "one\ntwo\nthree\n";
        assert_eq!(window(text, 1, None).unwrap(), text);
        assert_eq!(window(text, 2, None).unwrap(), "two\nthree\n");
        assert_eq!(window(text, 2, Some(1)).unwrap(), "two\n");
        assert_eq!(window(text, 1, Some(2)).unwrap(), "one\ntwo\n");
        assert_eq!(window(text, 3, Some(10)).unwrap(), "three\n");
        assert_eq!(window("a\r\nb", 2, None).unwrap(), "b");
        assert_eq!(window("", 1, None).unwrap(), "");
        assert_eq!(window("no newline", 1, Some(1)).unwrap(), "no newline");
    }

    #[test]
    fn window_errors() {
        let text = "one\ntwo\nthree\n";
        assert!(matches!(
            window(text, 4, None),
            Err(WindowError::PastEnd {
                offset_line: 4,
                lines: 3
            })
        ));
        assert!(matches!(
            window("", 2, None),
            Err(WindowError::PastEnd { lines: 0, .. })
        ));
        assert!(matches!(
            window(text, 0, None),
            Err(WindowError::ZeroOffset)
        ));
        let bytes = [b"ok\n".as_slice(), b"bad \xff\n"].concat();
        let w = Window {
            offset_line: 1,
            max_lines: None,
            max_bytes: 100,
        };
        assert!(matches!(
            read_window(Cursor::new(bytes), &w),
            Err(WindowError::NotUtf8 { line: 2 })
        ));
        let big = "0123456789\n".repeat(10);
        assert!(matches!(
            window(&big, 1, None),
            Err(WindowError::TooLarge { line: 3 })
        ));
        // A window that fits is fine even in a big file.
        assert_eq!(
            window(&big, 5, Some(2)).unwrap(),
            "0123456789\n0123456789\n"
        );
    }
}
