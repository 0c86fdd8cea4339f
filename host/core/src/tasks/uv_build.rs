//! Seed 004 §4.2's `build_tool` with `runtime: "uv"`: the source is a
//! Python HTTP service (listening on `$PORT`, the first of `ports`, else
//! 8000; answering its `health_path`, `/health` by default) and
//! `requirements.dependencies` are PyPI packages. It is deployed as a
//! service whose image is the node image with the dependencies installed by
//! uv: their wheels are fetched by the host from PyPI into the build context
//! (wheels only: no package code runs on the host) and installed offline by
//! the context's Dockerfile (`uv pip install --no-index`); its endpoint is
//! `api_spec.endpoint_path`, tested by the task's examples, staged, then
//! active, as any deploy.

use super::spec::{SERVICE_DEPLOY, TaskSpec};

/// The port a uv service listens on unless `ports` says.
pub const DEFAULT_PORT: u16 = 8000;

/// What a uv build needs beside its source, if something is missing.
pub fn problem(spec: &TaskSpec) -> Option<String> {
    if spec.language.as_deref().is_some_and(|l| l != "python") {
        return Some("runtime `uv` builds a Python service: `language` is python".into());
    }
    if spec.tools.is_none() && spec.api_spec.is_none() {
        return Some(
            "runtime `uv` builds an HTTP service: give `api_spec` ({endpoint_path, http_method, input_schema}) or `tools`"
                .into(),
        );
    }
    let deps = spec
        .requirements
        .as_ref()
        .map(|r| r.dependencies.clone())
        .unwrap_or_default();
    deps.iter()
        .find(|d| !crate::builder::uv::valid_requirement(d))
        .map(|d| format!("requirements.dependencies: `{d}` is not a requirement (a PyPI name, extras, versions)"))
}

/// The Dockerfile installing `deps` from the context's wheels.
fn dockerfile(deps: &[String]) -> String {
    let quoted: Vec<String> = deps.iter().map(|d| format!("\"{d}\"")).collect();
    format!(
        "FROM toolhost-node:latest\nCOPY *.whl /opt/toolhost-wheels/\n\
         RUN [\"uv\", \"pip\", \"install\", \"--system\", \"--break-system-packages\", \"--no-index\", \"--find-links\", \"/opt/toolhost-wheels\", {}]\n",
        quoted.join(", ")
    )
}

impl super::build::Builder {
    /// Deploy a uv build as a service (module docs).
    pub(super) async fn uv_service(
        &self,
        id: &str,
        spec: &TaskSpec,
    ) -> Result<super::TaskResult, super::build::Failure> {
        let deps = spec
            .requirements
            .as_ref()
            .map(|r| r.dependencies.clone())
            .unwrap_or_default();
        let port = spec.internal_port.unwrap_or(DEFAULT_PORT);
        let mut files = std::collections::BTreeMap::new();
        files.insert("app.py".to_owned(), spec.source.clone().unwrap_or_default());
        let mut service = TaskSpec {
            kind: Some(SERVICE_DEPLOY.into()),
            source: None,
            internal_port: Some(port),
            command: Some(vec![
                "python3".into(),
                "-u".into(),
                "/toolkit/app.py".into(),
            ]),
            ..spec.clone()
        };
        if !deps.is_empty() {
            files.insert("Dockerfile".to_owned(), dockerfile(&deps));
            service.dockerfile = Some("Dockerfile".into());
        }
        service.files = Some(files);
        self.deploy(id, &service).await
    }

    /// Fetch a uv build's dependencies' wheels into its build `context`.
    pub(super) async fn uv_wheels(
        &self,
        id: &str,
        spec: &TaskSpec,
        context: &std::path::Path,
    ) -> Result<(), String> {
        let deps = spec
            .requirements
            .as_ref()
            .map(|r| r.dependencies.clone())
            .unwrap_or_default();
        if deps.is_empty() {
            return Ok(());
        }
        self.tasks.update(id, |_| {
            (
                super::TaskStatus::Building,
                format!("fetching the wheels of {} from PyPI", deps.join(", ")),
            )
        });
        let refs: Vec<&str> = deps.iter().map(String::as_str).collect();
        crate::builder::uv::fetch_wheels(&refs, context).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uv_build_needs_an_endpoint_and_real_requirements() {
        let spec = |v: serde_json::Value| -> TaskSpec { serde_json::from_value(v).unwrap() };
        let ok = spec(
            serde_json::json!({"name": "s", "runtime": "uv", "source": "x",
            "api_spec": {"endpoint_path": "/x"}, "requirements": {"dependencies": ["six==1.16.0"]}}),
        );
        assert_eq!(problem(&ok), None);
        let bare = spec(serde_json::json!({"name": "s", "runtime": "uv", "source": "x"}));
        assert!(problem(&bare).unwrap().contains("api_spec"));
        let evil = spec(
            serde_json::json!({"name": "s", "runtime": "uv", "source": "x", "api_spec": {},
            "requirements": {"dependencies": ["six; curl evil"]}}),
        );
        assert!(problem(&evil).unwrap().contains("not a requirement"));
        let d = dockerfile(&["six==1.16.0".into()]);
        assert!(
            d.contains("\"--no-index\"") && d.contains("\"six==1.16.0\"]"),
            "{d}"
        );
    }
}
