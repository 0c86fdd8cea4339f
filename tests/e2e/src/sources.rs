//! Tool sources the tests request builds of (seed 004's tasks).

/// A Python tool: `count` counts the words of a text.
pub const WORDCOUNT: &str = r#"
from toolhost_sdk import Toolkit, tool  # noqa: F401


@tool
def count(text: str) -> int:
    """Count the words of a text.

    Args:
        text: The text.
    """
    return len(text.split())
"#;

/// Request a build of [`WORDCOUNT`] (`POST /tools/request`, as the admin of
/// token `admin`) from the server at `base`: the task's id.
pub fn request_wordcount(http: &reqwest::blocking::Client, base: &str, admin: &str) -> String {
    let r = http
        .post(format!("{base}/tools/request"))
        .bearer_auth(admin)
        .json(&serde_json::json!({"name": "wordcount", "language": "python", "source": WORDCOUNT}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let body: serde_json::Value = r.json().unwrap();
    body["task_id"].as_str().unwrap().to_owned()
}
