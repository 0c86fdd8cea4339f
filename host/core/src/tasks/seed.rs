//! Seed 004's task specs as its own examples write them (§4.1 `github_deploy`,
//! §4.2 `build_tool`, §6 a description-only request), read into a
//! [`TaskSpec`]: what each of their fields means here, and what cannot be
//! honoured, said by name rather than refusing the shape.
//!
//! - `tool_name` with `_` (`text_summarizer_api`): toolkit names hold none
//!   (tool ids are `<toolkit>_<tool>`), so `-` stands for it.
//! - No name at all (§6: a description): one is made from the description.
//! - `api_spec` as `{endpoint_path, http_method, input_schema}`: the
//!   service's one endpoint, a tool named like the toolkit.
//! - `ports`: the first is the service's `internal_port`.
//! - `requirements.memory_mb`: the service's memory; `requirements.gpu`:
//!   one GPU for the service's container where an engine has a GPU runtime,
//!   else refused by name ([`TaskSpec::gpu_problem`]);
//!   `requirements.dependencies` and `runtime`: kept for the builder.
//! - A `build_tool` without `source` (§4.2 asks a coding agent to write it):
//!   a request that waits for a builder to claim it.

use serde_json::json;

use super::spec::{BUILD_TOOL, REQUEST, TaskSpec};

impl TaskSpec {
    /// This spec with seed 004's fields read (module docs); returns what
    /// was read how, for the answer.
    pub fn read_seed_fields(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        // A repair's `tool_id` names a tool (`<toolkit>_<tool>`).
        if self.name.contains('_') && self.kind() != super::spec::REPAIR_TOOL {
            let name = self.name.replace('_', "-");
            notes.push(format!(
                "name `{}` is `{name}` here (toolkit names hold no `_`: tool ids are <toolkit>_<tool>)",
                self.name
            ));
            self.name = name;
        }
        if self.name.is_empty() && !self.description.trim().is_empty() {
            self.name = name_for(&self.description);
            notes.push(format!(
                "no name given: `{}`, made from the description",
                self.name
            ));
        }
        if let Some(endpoint) = self
            .api_spec
            .as_ref()
            .filter(|s| s.get("endpoint_path").is_some())
            .cloned()
        {
            let tool = self.name.replace('-', "_");
            self.api_spec = None;
            self.tools.get_or_insert_with(Vec::new).push(json!({
                "name": tool,
                "endpoint_path": endpoint["endpoint_path"],
                "http_method": endpoint.get("http_method").cloned().unwrap_or(json!("POST")),
                "description": self.description,
                "input_schema": endpoint.get("input_schema").cloned().unwrap_or(json!({"type": "object"})),
            }));
            notes.push(format!(
                "api_spec: the endpoint {} is the tool `{}_{tool}`",
                endpoint["endpoint_path"], self.name
            ));
        }
        if self.internal_port.is_none()
            && let Some(port) = self.ports.as_ref().and_then(|p| p.first())
        {
            self.internal_port = Some(*port);
        }
        if self.kind() == BUILD_TOOL && self.source.is_none() {
            self.kind = Some(REQUEST.into());
            let deps = self
                .requirements
                .as_ref()
                .map(|r| r.dependencies.join(", "))
                .filter(|d| !d.is_empty())
                .map(|d| format!("; dependencies: {d}"))
                .unwrap_or_default();
            notes.push(format!(
                "build_tool without source: a request for a builder to write it (runtime: {}{deps})",
                self.runtime.as_deref().unwrap_or("any")
            ));
        }
        notes
    }
}

/// A toolkit name from a description: its first ASCII words, else a hash of
/// it (`tool-3fa1c2`).
fn name_for(description: &str) -> String {
    let words: Vec<String> = description
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && w.chars().next().is_some_and(|c| c.is_ascii_alphabetic()))
        .take(4)
        .map(str::to_ascii_lowercase)
        .collect();
    let name = words.join("-");
    if !name.is_empty() && name.len() <= 40 {
        return name;
    }
    format!(
        "tool-{}",
        &crate::backend::content_hash(description.as_bytes())[..6]
    )
}

/// The seed's own examples, for tests: §4.1, §4.2 and §6's request body.
#[cfg(test)]
pub fn examples() -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/seed004/examples.json"
    ))
    .expect("the seed's examples");
    serde_json::from_str(&text).expect("JSON")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seeds_examples_read_as_written() {
        let mut specs: Vec<TaskSpec> = examples()
            .into_iter()
            .map(|e| serde_json::from_value(e).expect("the seed's shape"))
            .collect();
        let notes: Vec<Vec<String>> = specs.iter_mut().map(|s| s.read_seed_fields()).collect();
        // §4.1: a service from a repository, its endpoint a tool.
        let deploy = &specs[0];
        assert_eq!(deploy.name, "project-api");
        assert_eq!(deploy.internal_port, Some(8080));
        assert_eq!(
            deploy.tools.as_ref().unwrap()[0]["endpoint_path"],
            "/api/run"
        );
        assert_eq!(deploy.requirements.as_ref().unwrap().memory_mb, Some(512));
        assert!(deploy.seed_problem().is_none());
        // §4.2: no source: a request for a builder, dependencies kept.
        let build = &specs[1];
        assert_eq!(build.kind(), REQUEST);
        assert_eq!(build.name, "text-summarizer-api");
        assert!(
            notes[1].iter().any(|n| n.contains("transformers, torch")),
            "{:?}",
            notes[1]
        );
        assert!(build.problem().is_none(), "{:?}", build.problem());
        // §6: a description only.
        let request = &specs[2];
        assert_eq!(request.kind(), REQUEST);
        assert!(request.name.starts_with("tool-"), "{}", request.name);
        assert!(request.problem().is_none(), "{:?}", request.problem());
        // §4.3: a repair; its `tool_id` names a tool, kept as written.
        let repair = &specs[3];
        assert_eq!(repair.kind(), super::super::spec::REPAIR_TOOL);
        assert_eq!(repair.name, "image_compress_api");
        assert_eq!(repair.container_id.as_deref(), Some("abc123..."));
        assert!(notes[3].is_empty(), "{:?}", notes[3]);
        // A GPU is refused by name, not by shape.
        let mut gpu = specs[0].clone();
        gpu.requirements.as_mut().unwrap().gpu = true;
        assert!(gpu.seed_problem().is_none());
        assert!(
            gpu.gpu_problem(false)
                .unwrap()
                .contains("no Docker engine here has a GPU runtime")
        );
        // Where an engine has one, a service gets it; a wasm tool cannot.
        assert_eq!(gpu.gpu_problem(true), None);
        let mut build = specs[1].clone();
        build.requirements.as_mut().unwrap().gpu = true;
        assert!(build.gpu_problem(true).unwrap().contains("only a service"));
    }

    #[test]
    fn names_from_descriptions() {
        assert_eq!(
            name_for("An image compressor, please!"),
            "an-image-compressor-please"
        );
        assert!(name_for("需要一个图片压缩工具").starts_with("tool-"));
    }
}
