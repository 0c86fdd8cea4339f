//! The shell examples of the docs as commands: the ```` ```sh ```` blocks
//! of a page, each block's commands (continuation lines and quoted line
//! breaks joined) with what the page shows after each. The README's tour
//! (`tests/docs.rs`) and the `docs/` pages (`tests/docs_pages.rs`) are run
//! from these.

/// The ```sh blocks of a page.
pub fn sh_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("```sh\n") {
        let body = &rest[at + 6..];
        let end = body.find("\n```").expect("the block ends") + 1;
        blocks.push(body[..end].to_owned());
        rest = &body[end + 3..];
    }
    blocks
}

/// Whether `text` leaves a quote open, as shell reads it (a `#` after a
/// blank, outside quotes, starts a comment to the end of its line).
fn open_quote(text: &str) -> bool {
    let (mut single, mut double, mut comment) = (false, false, false);
    let mut previous = ' ';
    for c in text.chars() {
        match c {
            '\n' => comment = false,
            _ if comment => {}
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && previous.is_whitespace() => comment = true,
            _ => {}
        }
        previous = c;
    }
    single || double
}

/// Where a `#` comment starts in `line`, outside quotes.
fn comment_at(line: &str) -> Option<usize> {
    let (mut single, mut double) = (false, false);
    let mut previous = ' ';
    for (i, c) in line.char_indices() {
        match c {
            '\'' if !double => single = !single,
            '"' if !single => double = !double,
            '#' if !single && !double && previous.is_whitespace() => return Some(i),
            _ => {}
        }
        previous = c;
    }
    None
}

/// A block's commands, each with what the docs show after it (the comment
/// ending its line, else the comment lines that follow it).
pub fn commands(block: &str) -> Vec<(String, Option<String>)> {
    let mut out: Vec<(String, Option<String>)> = Vec::new();
    let mut pending = String::new();
    for line in block.lines() {
        if pending.is_empty() {
            let trimmed = line.trim_start();
            if trimmed.starts_with('#') {
                if let Some(last) = out.last_mut()
                    && last.1.is_none()
                {
                    last.1 = Some(trimmed.trim_start_matches(['#', ' ']).to_owned());
                }
                continue;
            }
            if trimmed.is_empty() {
                continue;
            }
        }
        if open_quote(&pending) {
            pending.push('\n');
            pending.push_str(line);
        } else {
            pending.push_str(line.trim_start());
        }
        if open_quote(&pending) {
            continue;
        }
        if pending.ends_with('\\') {
            pending.pop();
            pending.push(' ');
            continue;
        }
        let command = std::mem::take(&mut pending);
        match comment_at(&command) {
            Some(at) => out.push((
                command[..at].trim_end().to_owned(),
                Some(command[at..].trim_start_matches(['#', ' ']).to_owned()),
            )),
            None => out.push((command, None)),
        }
    }
    out
}

/// `"status":"..."` in a shown answer.
pub fn shown_status(shown: &str) -> Option<String> {
    let at = shown.find("\"status\":\"")? + 10;
    Some(shown[at..].split('"').next()?.to_owned())
}
