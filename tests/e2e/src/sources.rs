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

/// `source` with a comment no other build has: sdk/python/build.sh keeps
/// what the same sources built, so a test that needs a build running (to
/// stop its server midway) asks for sources never built before.
pub fn unique(source: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default()
        .as_nanos();
    format!("{source}\n# built for {} at {nanos}\n", std::process::id())
}

/// Request a build of [`WORDCOUNT`] (`POST /tools/request`, as the admin of
/// token `admin`) from the server at `base`: the task's id. Its sources are
/// [`unique`]: the callers stop a replica while it builds.
pub fn request_wordcount(http: &reqwest::blocking::Client, base: &str, admin: &str) -> String {
    let r = http
        .post(format!("{base}/tools/request"))
        .bearer_auth(admin)
        .json(&serde_json::json!({"name": "wordcount", "language": "python", "source": unique(WORDCOUNT)}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 202);
    let body: serde_json::Value = r.json().unwrap();
    body["task_id"].as_str().unwrap().to_owned()
}
