//! Prompts and resources a plugin declares in its manifest, beside its tools:
//! fixed data, no code, so they are served without running the plugin and are
//! loaded, replaced and removed with it (hot loading).
//!
//! ```toml
//! [[prompts]]                    # served as `<plugin>_<name>`
//! name = "review"
//! description = "Review a file of the workspace."
//! [[prompts.arguments]]
//! name = "path"
//! description = "The file."
//! required = true
//! values = ["src/main.rs"]       # completion candidates (optional)
//! [[prompts.messages]]
//! role = "user"                  # "user" (default) or "assistant"
//! text = "Review {path}."        # `{argument}` is replaced by its value
//! [[prompts.messages]]
//! image = "<base64>"             # or an image...
//! mime_type = "image/png"
//! [[prompts.messages]]
//! resource = "{uri}"             # ...or an embedded resource: uri, then
//! text = "..."                   # its text (or `blob`, base64)
//!
//! [[resources]]                  # a fixed resource
//! uri = "docs://guide"
//! name = "guide"
//! mime_type = "text/markdown"
//! text = "..."                   # or blob = "<base64>"
//!
//! [[resource_templates]]         # resources by URI template (RFC 6570 level 1)
//! uri_template = "docs://page/{id}"
//! name = "page"
//! text = "Page {id}"
//! values = { id = ["1", "2"] }   # completion candidates (optional)
//!
//! [tools.slow_job]               # how a tool is served over MCP
//! alias = "slow_job"             # listed and called on /mcp by this bare name
//! task = "optional"              # "optional" (default): a call still running
//!                                # after a moment becomes a task for clients
//!                                # of the tasks extension; "required": always
//!                                # a task (refused to other clients);
//!                                # "forbidden": never
//! ```
//!
//! Declarations are checked when the manifest is parsed ([`Declared::check`]):
//! a message has exactly one kind, base64 decodes, names are unique.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// Everything one plugin declares.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Declared {
    #[serde(default)]
    pub prompts: Vec<Prompt>,
    #[serde(default)]
    pub resources: Vec<Resource>,
    #[serde(default)]
    pub resource_templates: Vec<ResourceTemplate>,
    /// By tool name (its name in the plugin, not its id).
    #[serde(default)]
    pub tools: BTreeMap<String, ToolDecl>,
}

/// How one tool is served over MCP.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDecl {
    /// A bare name MCP clients list and call it by, instead of its id (for
    /// clients that expect fixed tool names). A tool id always wins over an
    /// alias of the same name.
    #[serde(default)]
    pub alias: Option<String>,
    #[serde(default)]
    pub task: TaskSupport,
    /// Its questions come before its work (it gathers what it needs): a
    /// stateless client that follows tasks answers them in rounds
    /// (`InputRequiredResult`), and the call becomes a task once they are
    /// answered. Else (mid-work questions, the default) they are the task's
    /// `input_required`.
    #[serde(default)]
    pub asks_first: bool,
}

/// Whether a call may become a task (MCP's tasks extension, XAgent's 450).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskSupport {
    /// Never: the client waits for the result.
    Forbidden,
    /// When the call is still running after a moment.
    #[default]
    Optional,
    /// Always, and only for clients that can follow a task.
    Required,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prompt {
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub arguments: Vec<Argument>,
    pub messages: Vec<Message>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Argument {
    pub name: String,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub required: bool,
    /// Completion candidates.
    #[serde(default)]
    pub values: Vec<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    #[default]
    User,
    Assistant,
}

/// One message of a prompt: text, an image or an embedded resource.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Message {
    #[serde(default)]
    pub role: Role,
    #[serde(default)]
    pub text: Option<String>,
    /// Base64 image data.
    #[serde(default)]
    pub image: Option<String>,
    /// URI of an embedded resource (its content is `text` or `blob`).
    #[serde(default)]
    pub resource: Option<String>,
    #[serde(default)]
    pub blob: Option<String>,
    #[serde(default)]
    pub mime_type: Option<String>,
}

/// A message with its arguments filled in.
#[derive(Debug, Clone, PartialEq)]
pub enum Rendered {
    Text(String),
    Image {
        data: String,
        mime_type: String,
    },
    Resource {
        uri: String,
        body: Body,
        mime_type: Option<String>,
    },
}

/// A resource's content: text, or base64 bytes.
#[derive(Debug, Clone, PartialEq)]
pub enum Body {
    Text(String),
    Blob(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resource {
    pub uri: String,
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub mime_type: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub blob: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceTemplate {
    pub uri_template: String,
    pub name: String,
    #[serde(default)]
    pub title: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub mime_type: Option<String>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub blob: Option<String>,
    /// Completion candidates per variable.
    #[serde(default)]
    pub values: BTreeMap<String, Vec<String>>,
}

impl Declared {
    pub fn is_empty(&self) -> bool {
        self.prompts.is_empty()
            && self.resources.is_empty()
            && self.resource_templates.is_empty()
            && self.tools.is_empty()
    }

    /// How tool `name` (its name in the plugin) is served over MCP.
    pub fn tool(&self, name: &str) -> ToolDecl {
        self.tools.get(name).cloned().unwrap_or_default()
    }

    /// Refuse what could not be served: a message of no kind or of two, bad
    /// base64, duplicate names, a template without variables.
    pub fn check(&self) -> Result<(), String> {
        let mut aliases = std::collections::HashSet::new();
        for (name, t) in &self.tools {
            if let Some(alias) = &t.alias
                && (!crate::tool::is_valid_tool_id(alias) || !aliases.insert(alias))
            {
                return Err(format!(
                    "[tools.{name}] alias `{alias}`: a unique name of [a-zA-Z0-9_-], at most 64"
                ));
            }
        }
        let mut names = std::collections::HashSet::new();
        for p in &self.prompts {
            let valid = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
            if p.name.is_empty() || !p.name.chars().all(valid) {
                return Err(format!("[[prompts]] `{}`: a name of [a-zA-Z0-9_-]", p.name));
            }
            if !names.insert(&p.name) {
                return Err(format!("[[prompts]] `{}` is declared twice", p.name));
            }
            if p.messages.is_empty() {
                return Err(format!("[[prompts]] `{}` has no messages", p.name));
            }
            for m in &p.messages {
                let kinds = [m.image.is_some(), m.resource.is_some()]
                    .iter()
                    .filter(|k| **k)
                    .count()
                    + usize::from(m.text.is_some() && m.resource.is_none());
                if kinds != 1 {
                    return Err(format!(
                        "[[prompts]] `{}`: each message has one of `text`, `image`, `resource`",
                        p.name
                    ));
                }
                if let Some(data) = &m.image {
                    decode(data).map_err(|e| format!("[[prompts]] `{}`: image: {e}", p.name))?;
                    if m.mime_type.is_none() {
                        return Err(format!(
                            "[[prompts]] `{}`: an image needs `mime_type`",
                            p.name
                        ));
                    }
                }
                if m.resource.is_some() {
                    body(&m.text, &m.blob)
                        .map_err(|e| format!("[[prompts]] `{}`: resource: {e}", p.name))?;
                }
            }
        }
        let mut uris = std::collections::HashSet::new();
        for r in &self.resources {
            if !uris.insert(&r.uri) {
                return Err(format!("[[resources]] `{}` is declared twice", r.uri));
            }
            body(&r.text, &r.blob).map_err(|e| format!("[[resources]] `{}`: {e}", r.uri))?;
        }
        for t in &self.resource_templates {
            if variables(&t.uri_template).is_empty() {
                return Err(format!(
                    "[[resource_templates]] `{}` has no `{{variable}}`",
                    t.uri_template
                ));
            }
            body(&t.text, &t.blob)
                .map_err(|e| format!("[[resource_templates]] `{}`: {e}", t.uri_template))?;
        }
        Ok(())
    }
}

fn decode(data: &str) -> Result<Vec<u8>, String> {
    base64::engine::general_purpose::STANDARD
        .decode(data)
        .map_err(|e| format!("not base64: {e}"))
}

/// Exactly one of `text` and `blob` (base64).
fn body(text: &Option<String>, blob: &Option<String>) -> Result<Body, String> {
    match (text, blob) {
        (Some(t), None) => Ok(Body::Text(t.clone())),
        (None, Some(b)) => decode(b).map(|_| Body::Blob(b.clone())),
        _ => Err("give one of `text` and `blob`".into()),
    }
}

/// `{name}` in `text` replaced by `values[name]`; other braces kept.
pub fn fill(text: &str, values: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if values.contains_key(&after[..close]) => {
                out.push_str(&values[&after[..close]]);
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

impl Prompt {
    /// The messages with `arguments` filled in; a missing required argument
    /// or an unknown one is the caller's error.
    pub fn render(
        &self,
        arguments: &BTreeMap<String, String>,
    ) -> Result<Vec<(Role, Rendered)>, String> {
        for a in &self.arguments {
            if a.required && !arguments.contains_key(&a.name) {
                return Err(format!("missing required argument `{}`", a.name));
            }
        }
        if let Some(unknown) = arguments
            .keys()
            .find(|k| !self.arguments.iter().any(|a| &a.name == *k))
        {
            return Err(format!("unknown argument `{unknown}`"));
        }
        let filled = |s: &str| fill(s, arguments);
        Ok(self
            .messages
            .iter()
            .map(|m| {
                let rendered = if let Some(data) = &m.image {
                    Rendered::Image {
                        data: data.clone(),
                        mime_type: m.mime_type.clone().unwrap_or_default(),
                    }
                } else if let Some(uri) = &m.resource {
                    let body = match (&m.text, &m.blob) {
                        (Some(t), _) => Body::Text(filled(t)),
                        (None, b) => Body::Blob(b.clone().unwrap_or_default()),
                    };
                    Rendered::Resource {
                        uri: filled(uri),
                        body,
                        mime_type: m.mime_type.clone(),
                    }
                } else {
                    Rendered::Text(filled(m.text.as_deref().unwrap_or_default()))
                };
                (m.role, rendered)
            })
            .collect())
    }
}

impl Resource {
    pub fn body(&self) -> Body {
        body(&self.text, &self.blob).unwrap_or(Body::Text(String::new()))
    }
}

/// The variable names of a URI template, in order (`{name}`, `{+name}`).
pub fn variables(template: &str) -> Vec<&str> {
    template
        .split('{')
        .skip(1)
        .filter_map(|s| s.split_once('}').map(|(v, _)| v.trim_start_matches('+')))
        .collect()
}

/// Match `uri` against `template`: the value of each variable, if it matches.
/// `{name}` takes no `/`; `{+name}` takes anything (at least one character).
pub fn match_template(template: &str, uri: &str) -> Option<BTreeMap<String, String>> {
    let mut values = BTreeMap::new();
    let mut rest = uri;
    let mut parts = template.split('{');
    let head = parts.next()?;
    rest = rest.strip_prefix(head)?;
    for part in parts {
        let (var, literal) = part.split_once('}')?;
        let (name, reserved) = match var.strip_prefix('+') {
            Some(n) => (n, true),
            None => (var, false),
        };
        // The value runs to the next literal (the last occurrence for `+`,
        // so a path may hold the literal), or to the end.
        let end = if literal.is_empty() {
            rest.len()
        } else if reserved {
            rest.rfind(literal)?
        } else {
            rest.find(literal)?
        };
        let value = &rest[..end];
        if value.is_empty() || (!reserved && value.contains('/')) {
            return None;
        }
        values.insert(name.to_owned(), value.to_owned());
        rest = &rest[end + literal.len()..];
    }
    rest.is_empty().then_some(values)
}

impl ResourceTemplate {
    /// The resource at `uri`, if it matches: its content with the variables
    /// filled in.
    pub fn read(&self, uri: &str) -> Option<Body> {
        let values = match_template(&self.uri_template, uri)?;
        Some(match body(&self.text, &self.blob).ok()? {
            Body::Text(t) => Body::Text(fill(&t, &values)),
            blob => blob,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn templates_match_and_fill() {
        let t = "test://template/{id}/data";
        assert_eq!(
            match_template(t, "test://template/123/data"),
            Some(map(&[("id", "123")]))
        );
        assert_eq!(match_template(t, "test://template/1/2/data"), None);
        assert_eq!(match_template(t, "test://template//data"), None);
        assert_eq!(match_template(t, "test://other/1/data"), None);
        assert_eq!(
            match_template("ws://{+path}", "ws://a/b/c.txt"),
            Some(map(&[("path", "a/b/c.txt")]))
        );
        assert_eq!(variables("x://{a}/{+b}"), vec!["a", "b"]);
        assert_eq!(fill("{a} and {b} {c", &map(&[("a", "1")])), "1 and {b} {c");
    }

    #[test]
    fn prompts_render_and_refuse_missing_arguments() {
        let p: Prompt = toml::from_str(
            r#"
            name = "p"
            [[arguments]]
            name = "arg1"
            required = true
            [[messages]]
            text = "say {arg1}"
            "#,
        )
        .unwrap();
        let out = p.render(&map(&[("arg1", "hi")])).unwrap();
        assert_eq!(out, vec![(Role::User, Rendered::Text("say hi".into()))]);
        assert!(p.render(&map(&[])).unwrap_err().contains("arg1"));
        assert!(p.render(&map(&[("arg1", "a"), ("x", "b")])).is_err());
    }

    #[test]
    fn bad_declarations_are_refused() {
        let two_kinds: Declared = toml::from_str(
            "[[prompts]]\nname = \"p\"\n[[prompts.messages]]\ntext = \"a\"\nimage = \"AAAA\"\nmime_type = \"image/png\"",
        )
        .unwrap();
        assert!(two_kinds.check().is_err());
        let bad_blob: Declared =
            toml::from_str("[[resources]]\nuri = \"a://b\"\nname = \"b\"\nblob = \"!!\"").unwrap();
        assert!(bad_blob.check().unwrap_err().contains("base64"));
        let no_var: Declared = toml::from_str(
            "[[resource_templates]]\nuri_template = \"a://b\"\nname = \"b\"\ntext = \"x\"",
        )
        .unwrap();
        assert!(no_var.check().is_err());
    }
}
