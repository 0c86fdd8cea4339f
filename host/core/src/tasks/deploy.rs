//! Service deploys (`service_deploy`, and `github_deploy` from a git URL):
//! a build context (files given inline, or a shallow clone) becomes a
//! container-service toolkit folder with a generated manifest (`[docker]`
//! with the image or a Dockerfile of the context, the internal port and the
//! health path; a `[[tools]]` entry per endpoint, given, or derived from an
//! OpenAPI `api_spec`). It is installed `staging`, its examples run through
//! the dispatcher against the real container, and it becomes `active`;
//! a failure removes it (and puts back the version it replaced).

use super::TaskSpec;
use super::deploy_plan::{context_files, git_refusal, manifest, tool_entries};

impl super::build::Builder {
    /// A service deploy: context, manifest, installed as staging, examples
    /// through the dispatcher, then active (or removed, the replaced
    /// version put back).
    pub(super) async fn deploy(
        &self,
        id: &str,
        spec: &TaskSpec,
    ) -> Result<super::TaskResult, super::build::Failure> {
        use super::TaskStatus;
        use crate::registry::ToolStatus;
        let name = &spec.name;
        let dir = self.builds.join(id);
        let context = dir.join(name);
        tokio::fs::create_dir_all(&dir)
            .await
            .map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        let _ = tokio::fs::remove_dir_all(&context).await;
        let repair = spec.kind() == super::spec::REPAIR_TOOL;
        if let Some(url) = &spec.repo_url {
            if let Some(why) = git_refusal(url, &self.callbacks.git_allow) {
                return Err(why.into());
            }
            self.tasks
                .update(id, |_| (TaskStatus::Building, format!("cloning {url}")));
            let mut argv: Vec<std::ffi::OsString> =
                vec!["git".into(), "clone".into(), "--depth".into(), "1".into()];
            if let Some(r) = &spec.git_ref {
                argv.extend(["--branch".into(), r.into()]);
            }
            argv.extend(["--".into(), url.into(), context.clone().into_os_string()]);
            let log = super::build::run_limited(&argv, self.timeout).await?;
            let ok = log.exit_code == Some(0);
            self.tasks.update(id, |t| {
                t.last_run = Some(log.clone());
                (
                    TaskStatus::Building,
                    format!("git exited {:?}", log.exit_code),
                )
            });
            if !ok {
                return Err(super::build::Failure {
                    message: "the clone failed".into(),
                    log: Some(log),
                });
            }
            let _ = tokio::fs::remove_dir_all(context.join(".git")).await;
        } else {
            if repair {
                // The fix's files over the serving folder's.
                let serving = self.plugins.dir().join(name);
                copy_flat(&serving, &context)
                    .await
                    .map_err(|e| format!("cannot copy {}: {e}", serving.display()))?;
            } else {
                tokio::fs::create_dir_all(&context)
                    .await
                    .map_err(|e| format!("cannot make {}: {e}", context.display()))?;
            }
            for (file, text) in context_files(spec)? {
                tokio::fs::write(context.join(&file), text)
                    .await
                    .map_err(|e| format!("cannot write {file}: {e}"))?;
            }
        }
        // A repaired service keeps the manifest it serves with.
        let (manifest, skipped) = if repair {
            let serving = self.plugins.dir().join(name).join(format!("{name}.toml"));
            let text = tokio::fs::read_to_string(&serving).await.map_err(|e| {
                format!(
                    "cannot read the serving manifest {}: {e}",
                    serving.display()
                )
            })?;
            (text, Vec::new())
        } else {
            let (tools, skipped) = tool_entries(spec)?;
            (manifest(spec, &tools)?, skipped)
        };
        // A uv build: its dependencies' wheels in the context, installed by
        // its Dockerfile (the service's container has no network).
        if spec.runtime.as_deref() == Some("uv") {
            self.uv_wheels(id, spec, &context).await?;
        }
        let parsed = crate::nodes::manifest::parse(name, &context, &manifest)
            .map_err(|e| format!("the manifest is refused: {e}"))?;
        tokio::fs::write(context.join(format!("{name}.toml")), &manifest)
            .await
            .map_err(|e| format!("cannot write the manifest: {e}"))?;
        let ids: Vec<String> = parsed
            .manifest
            .tools
            .iter()
            .map(|t| crate::tool::tool_id(name, &t.name))
            .collect();
        self.tasks.update(id, |_| {
            let mut m = format!("installing {} as staging", ids.join(", "));
            if !skipped.is_empty() {
                m.push_str(&format!(
                    " (left out of the api_spec: {})",
                    skipped.join(", ")
                ));
            }
            (TaskStatus::Testing, m)
        });

        // Installed beside the version it replaces, which is kept aside.
        let catalog = self.dispatcher.catalog();
        let new: Vec<String> = ids
            .iter()
            .filter(|i| catalog.get(i).is_none())
            .cloned()
            .collect();
        for i in &new {
            catalog.set_status(i, ToolStatus::Staging);
        }
        let target = self.plugins.dir().join(name);
        let previous = dir.join("previous");
        let had_previous = tokio::fs::rename(&target, &previous).await.is_ok();
        let installed = copy_flat(&context, &target).await;
        let outcome = match installed {
            Err(e) => Err(format!("cannot install into the plugins directory: {e}")),
            Ok(()) => {
                self.plugins.reconcile(name).await;
                match self.plugins.get(name) {
                    Some(s) if s.error.is_none() && s.version.is_some() => {
                        self.service_examples(id, name, spec).await
                    }
                    Some(s) => Err(format!(
                        "the service toolkit did not load: {}",
                        s.error.unwrap_or_default()
                    )),
                    None => Err("the service toolkit did not load".into()),
                }
            }
        };
        match outcome {
            Ok(()) => {
                for i in &ids {
                    catalog.set_status(i, ToolStatus::Active);
                }
                let _ = tokio::fs::remove_dir_all(&dir).await;
                Ok(super::TaskResult {
                    tool_id: ids[0].clone(),
                    url: format!("/tools/{}/invoke", ids[0]),
                    tool_ids: ids.clone(),
                    version: self
                        .plugins
                        .get(name)
                        .and_then(|s| s.version)
                        .unwrap_or_default(),
                })
            }
            Err(e) => {
                let _ = tokio::fs::remove_dir_all(&target).await;
                if had_previous {
                    let _ = tokio::fs::rename(&previous, &target).await;
                }
                self.plugins.reconcile(name).await;
                for i in &new {
                    catalog.set_status(i, ToolStatus::Active);
                }
                Err(e.into())
            }
        }
    }

    /// The examples of a deploy, called through the dispatcher (the
    /// toolkit is in the catalog, `staging`) in a session of their own.
    async fn service_examples(&self, id: &str, name: &str, spec: &TaskSpec) -> Result<(), String> {
        let sessions = self.dispatcher.sessions();
        let (session, _) = sessions
            .open(&crate::callers::Caller::anonymous(), None)
            .map_err(|e| format!("no session for the examples: {e}"))?;
        let mut result = Ok(());
        for (i, ex) in spec.examples.iter().enumerate() {
            let n = i + 1;
            let tool = if ex.tool.starts_with(&format!("{name}_")) {
                ex.tool.clone()
            } else {
                crate::tool::tool_id(name, &ex.tool)
            };
            let options = crate::dispatch::CallOptions {
                staging: true,
                no_fallback: true,
                ..Default::default()
            };
            let started = std::time::Instant::now();
            let got = match self
                .dispatcher
                .dispatch(&session, &tool, ex.input.clone(), options)
                .await
            {
                Ok(out) => super::build::content_json(&out.content),
                Err(e) => {
                    result = Err(format!("example {n} (`{}`): {}: {e}", ex.tool, e.kind()));
                    break;
                }
            };
            if let Err(e) = self.example_passed(id, n, ex, &got, started) {
                result = Err(e);
                break;
            }
        }
        let _ = sessions.close(session.id()).await;
        result
    }
}

/// Copy the files of `from` (flat) into a new folder `to`, made whole
/// under a hidden name first, so the watcher never sees half of it.
async fn copy_flat(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
    let name = to
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let staging = to.with_file_name(format!(".{name}.installing"));
    let _ = tokio::fs::remove_dir_all(&staging).await;
    tokio::fs::create_dir_all(&staging).await?;
    let mut entries = tokio::fs::read_dir(from).await?;
    while let Some(entry) = entries.next_entry().await? {
        if entry.file_type().await?.is_file() {
            tokio::fs::copy(entry.path(), staging.join(entry.file_name())).await?;
        }
    }
    tokio::fs::rename(&staging, to).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::deploy_plan::context_file_problem;
    use serde_json::{Value, json};

    fn spec(v: Value) -> TaskSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn manifests_from_given_tools_and_from_an_api_spec() {
        let s = spec(json!({
            "type": "service_deploy", "name": "rev", "description": "Reverses.",
            "files": {"service.py": "x"}, "command": ["python3", "/toolkit/service.py"],
            "internal_port": 8080,
            "api_spec": {"openapi": "3.0.0", "info": {"title": "t", "version": "1"}, "paths": {
                "/reverse": {"post": {"operationId": "reverse", "summary": "Reverse a text.",
                    "requestBody": {"content": {"application/json": {"schema": {
                        "type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}}}}}}},
                "/items/{id}": {"get": {"operationId": "item", "parameters": [
                    {"name": "id", "in": "path", "required": true, "schema": {"type": "string"}}]}}
            }}
        }));
        let (tools, skipped) = tool_entries(&s).unwrap();
        assert_eq!(tools.len(), 1, "{tools:?}");
        assert_eq!(tools[0]["endpoint_path"], "/reverse");
        assert_eq!(tools[0]["input_schema"]["required"], json!(["text"]));
        assert_eq!(skipped.len(), 1, "{skipped:?}");
        let text = manifest(&s, &tools).unwrap();
        let parsed = crate::nodes::manifest::parse("rev", std::path::Path::new("/tmp"), &text)
            .expect("a manifest the Docker backend takes");
        assert_eq!(parsed.descriptors()[0].name, "reverse");
        assert!(text.contains("internal_port = 8080"), "{text}");
    }

    #[test]
    fn context_files_and_git_urls_are_checked() {
        assert!(context_file_problem("service.py", "rev").is_none());
        for bad in ["../x", "a/b", ".env", "rev.toml", ""] {
            assert!(context_file_problem(bad, "rev").is_some(), "{bad}");
        }
        let allow = vec!["github.com".to_owned()];
        assert!(git_refusal("https://github.com/a/b.git", &allow).is_none());
        assert!(git_refusal("https://evil.example/a.git", &allow).is_some());
        assert!(git_refusal("http://github.com/a/b.git", &allow).is_some());
        assert!(git_refusal("file:///srv/repo", &allow).is_some());
        assert!(git_refusal("file:///srv/repo", &["file".to_owned()]).is_none());
        assert!(git_refusal("ssh://github.com/a", &allow).is_some());
    }
}
