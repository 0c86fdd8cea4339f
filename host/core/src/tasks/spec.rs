//! What `POST /tools/request` takes (seed 004's task spec), checked before a
//! task is made.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A request for a tool.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskSpec {
    /// `build_tool` (source given), `request` (a description for an
    /// external builder to claim), `service_deploy`, `github_deploy`,
    /// `repair_tool` ([`super::repair`]). Guessed from the fields when
    /// absent (never a repair).
    #[serde(rename = "type", default)]
    pub kind: Option<String>,
    /// The toolkit the tool lands in: its tools are `<name>_<tool>`. Made
    /// from the description when a request gives none (`tasks::seed`).
    #[serde(alias = "tool_id", alias = "tool_name", default)]
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(default)]
    pub category: Option<String>,
    /// `python` or `javascript` (the SDKs' tool shape).
    #[serde(default)]
    pub language: Option<String>,
    /// The module: `app.py` or `app.js`.
    #[serde(default)]
    pub source: Option<String>,
    /// Calls run before the tool is activated; all must pass.
    #[serde(default)]
    pub examples: Vec<Example>,
    /// Replace a toolkit of the same name (else 409).
    #[serde(default)]
    pub replace: bool,
    /// POSTed the task's final status (its host must be allow-listed).
    #[serde(default)]
    pub callback_url: Option<String>,
    /// What the builder says the task costs, USD (see `[budget]`).
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// A service deploy's build context: file name -> text (flat).
    #[serde(default)]
    pub files: Option<std::collections::BTreeMap<String, String>>,
    /// A `github_deploy`'s repository (https:// host in `[tasks]
    /// git_allow`, or file:// with `file` there) and branch or tag.
    #[serde(default)]
    pub repo_url: Option<String>,
    #[serde(default)]
    pub git_ref: Option<String>,
    /// The service's image (default the node image), or a Dockerfile of
    /// the context to build one from.
    #[serde(default)]
    pub image: Option<String>,
    #[serde(default)]
    pub dockerfile: Option<String>,
    /// The service's command (else the image's).
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// The port the service listens on inside its container.
    #[serde(default)]
    pub internal_port: Option<u16>,
    #[serde(default)]
    pub health_path: Option<String>,
    /// The service's endpoints as `[[tools]]` entries (name,
    /// endpoint_path, http_method, description, input_schema) ...
    #[serde(default)]
    pub tools: Option<Vec<Value>>,
    /// ... or an OpenAPI document (JSON) they are derived from (or seed
    /// 004's `{endpoint_path, http_method, input_schema}`: `tasks::seed`).
    #[serde(default)]
    pub api_spec: Option<Value>,
    /// Seed 004's `runtime` (`docker`, `uv`, ...), `ports` and
    /// `requirements`, read by `tasks::seed`.
    #[serde(default)]
    pub runtime: Option<String>,
    #[serde(default)]
    pub ports: Option<Vec<u16>>,
    #[serde(default)]
    pub requirements: Option<Requirements>,
    /// A repair's tool (the seed's `tool_id` is read into `name`, then
    /// resolved: [`super::repair::resolve`]).
    #[serde(default)]
    pub tool: Option<String>,
    /// A repair's error and container, as the seed's §4.3 gives them.
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub container_id: Option<String>,
}

/// §4's `requirements`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Requirements {
    #[serde(default)]
    pub gpu: bool,
    #[serde(default)]
    pub memory_mb: Option<u32>,
    /// Packages the tool needs (PyPI names for `runtime: "uv"`).
    #[serde(default)]
    pub dependencies: Vec<String>,
}

/// One call of a built tool and, optionally, what it must answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    /// The tool's name within the toolkit (or its full id).
    pub tool: String,
    #[serde(default = "empty_object")]
    pub input: Value,
    /// The JSON result the call must give (a text result is a string).
    #[serde(default)]
    pub output: Option<Value>,
}

fn empty_object() -> Value {
    Value::Object(Default::default())
}

/// The kinds of task.
pub const BUILD_TOOL: &str = "build_tool";
pub const REQUEST: &str = "request";
pub const SERVICE_DEPLOY: &str = "service_deploy";
pub const GITHUB_DEPLOY: &str = "github_deploy";
pub use super::repair::REPAIR_TOOL;

impl TaskSpec {
    /// The kind, guessed when not given: source means a build.
    pub fn kind(&self) -> &str {
        match &self.kind {
            Some(k) => k,
            None if self.source.is_some() => BUILD_TOOL,
            None if self.repo_url.is_some() => GITHUB_DEPLOY,
            None if self.internal_port.is_some() => SERVICE_DEPLOY,
            None => REQUEST,
        }
    }

    /// Whether the build worker can take it as it is (a request waits for
    /// a builder's source).
    pub fn buildable(&self) -> bool {
        self.source.is_some()
            || matches!(self.kind(), SERVICE_DEPLOY | GITHUB_DEPLOY)
            || self.kind() == REPAIR_TOOL && self.files.is_some()
    }

    /// Why a seed field cannot be honoured here, if one cannot (a GPU is
    /// judged where the engines are known: [`TaskSpec::gpu_problem`]).
    pub fn seed_problem(&self) -> Option<String> {
        match self.runtime.as_deref() {
            None | Some("docker" | "uv" | "python" | "node" | "javascript") => None,
            Some(other) => Some(format!(
                "runtime `{other}`: docker (a service), uv or python / javascript (a tool's code)"
            )),
        }
    }

    /// Why its `requirements.gpu` cannot be honoured, when no engine has a
    /// GPU runtime (`gpu_here`) or the task is no service (only a service's
    /// container can be given one).
    pub fn gpu_problem(&self, gpu_here: bool) -> Option<String> {
        if !self.requirements.as_ref().is_some_and(|r| r.gpu) {
            return None;
        }
        if !gpu_here {
            return Some("requirements.gpu: no Docker engine here has a GPU runtime (`docker info` lists no `nvidia` runtime), so no GPU can be given".into());
        }
        (!matches!(self.kind(), SERVICE_DEPLOY | GITHUB_DEPLOY)).then(|| {
            "requirements.gpu: only a service (service_deploy, github_deploy) runs where a GPU can be given; a wasm tool cannot use one".into()
        })
    }

    /// What is wrong with this spec on its own (422), if anything.
    pub fn problem(&self) -> Option<String> {
        if let Some(problem) = self.seed_problem() {
            return Some(problem);
        }
        if self.name.is_empty() {
            return Some("the task needs `name` (or `tool_name`)".into());
        }
        if !crate::tool::is_valid_plugin_name(&self.name) {
            return Some(format!(
                "invalid name `{}`: use lowercase letters, digits and `-`, starting with a letter (its tools are `<name>_<tool>`)",
                self.name
            ));
        }
        match self.kind() {
            BUILD_TOOL => {
                if self.source.as_deref().is_none_or(str::is_empty) {
                    return Some("a build_tool task needs `source` (the module's code)".into());
                }
                let uv = self.runtime.as_deref() == Some("uv");
                if uv && let Some(problem) = super::uv_build::problem(self) {
                    return Some(problem);
                }
                match self.language.as_deref() {
                    _ if uv => {}
                    Some("python" | "javascript") => {}
                    Some(other) => {
                        return Some(format!(
                            "unknown language `{other}`: use python or javascript"
                        ));
                    }
                    None => {
                        return Some(
                            "a build_tool task needs `language` (python or javascript)".into(),
                        );
                    }
                }
            }
            REQUEST => {
                if self.description.trim().is_empty() {
                    return Some(
                        "a request without source needs a `description` for its builder".into(),
                    );
                }
            }
            SERVICE_DEPLOY | GITHUB_DEPLOY => {
                if self.internal_port.is_none() {
                    return Some("a service deploy needs `internal_port`".into());
                }
                if self.tools.is_none() && self.api_spec.is_none() {
                    return Some(
                        "a service deploy needs `tools` (its endpoints) or an OpenAPI `api_spec`"
                            .into(),
                    );
                }
                match (self.kind(), &self.repo_url, &self.files) {
                    (GITHUB_DEPLOY, None, _) => {
                        return Some("a github_deploy task needs `repo_url`".into());
                    }
                    (SERVICE_DEPLOY, Some(_), _) => {
                        return Some("`repo_url` is for github_deploy tasks".into());
                    }
                    (_, Some(_), Some(_)) => {
                        return Some("give `files` or `repo_url`, not both".into());
                    }
                    _ => {}
                }
                if let Err(e) = super::deploy_plan::context_files(self) {
                    return Some(e);
                }
                if let Err(e) = super::deploy_plan::tool_entries(self) {
                    return Some(e);
                }
            }
            REPAIR_TOOL => {
                if let Err(e) = super::deploy_plan::context_files(self) {
                    return Some(e);
                }
                if self.source.is_some() && self.files.is_some() {
                    return Some("a repair's fix is `source` or `files`, not both".into());
                }
                if self.source.is_some()
                    && !matches!(self.language.as_deref(), Some("python" | "javascript"))
                {
                    return Some(
                        "a repair's `source` needs `language` (python or javascript)".into(),
                    );
                }
            }
            other => {
                return Some(format!(
                    "unknown task type `{other}`: use build_tool, service_deploy, github_deploy, repair_tool or request"
                ));
            }
        }
        if let Some(e) = self.examples.iter().find(|e| e.tool.is_empty()) {
            return Some(format!(
                "an example names no tool: {}",
                serde_json::json!(e.input)
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(v: Value) -> TaskSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn kinds_are_guessed_and_checked() {
        let build = spec(json!({"name": "wc", "language": "python", "source": "x = 1"}));
        assert_eq!((build.kind(), build.problem()), (BUILD_TOOL, None));
        let request = spec(json!({"name": "wc", "description": "count words"}));
        assert_eq!((request.kind(), request.problem()), (REQUEST, None));
        for (v, needle) in [
            (
                json!({"name": "Bad_Name", "description": "x"}),
                "invalid name",
            ),
            (json!({"name": "wc"}), "needs a `description`"),
            (json!({"name": "wc", "source": "x"}), "needs `language`"),
            (
                json!({"name": "wc", "source": "x", "language": "cobol"}),
                "unknown language",
            ),
            (
                json!({"type": "repair_tool", "name": "wc", "files": {"wc.toml": ""}}),
                "not the manifest",
            ),
            (
                json!({"type": "repair_tool", "name": "wc", "source": "x = 1"}),
                "needs `language`",
            ),
            (
                json!({"type": "github_deploy", "name": "wc", "internal_port": 80, "tools": []}),
                "needs `repo_url`",
            ),
            (
                json!({"type": "service_deploy", "name": "wc", "internal_port": 80}),
                "needs `tools`",
            ),
            (json!({"type": "dance", "name": "wc"}), "unknown task type"),
        ] {
            let problem = spec(v.clone()).problem().unwrap_or_default();
            assert!(problem.contains(needle), "{v}: {problem}");
        }
        assert!(serde_json::from_value::<TaskSpec>(json!({"name": "wc", "colour": 1})).is_err());
    }
}
