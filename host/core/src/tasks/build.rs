//! The build worker: one task at a time, off the request path. A
//! `build_tool` task's source is written to `<data>/builds/<task>/src` with
//! a manifest, built by the language's SDK script (`sdk/<lang>/build.sh`)
//! in a process group of its own, niced, under a CPU-time limit and a wall
//! clock, then loaded *beside* the catalog and its examples run against it.
//! Only when they all pass is it installed (through the admin upload, the
//! same load and swap as any plugin): a failed build or example leaves the
//! old version serving. New tools enter the catalog `staging` and are made
//! `active` once installed.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::io::AsyncReadExt;

use super::{Example, RunLog, TaskResult, TaskSpec, TaskStatus, Tasks};
use crate::backend::Invocation;
use crate::backend::Loaded;
use crate::dispatch::Dispatcher;
use crate::plugins::PluginManager;
use crate::registry::ToolStatus;
use crate::tool::{self, CallError, Content};

/// What a failed task says, and the step's log if a command ran.
pub struct Failure {
    pub message: String,
    pub log: Option<RunLog>,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure { message, log: None }
    }
}

/// Most bytes of a step's stdout and stderr kept (their ends).
const LOG_TAIL: usize = 32 * 1024;

/// Where `callback_url`s may point, and the client that calls them.
pub struct Callbacks {
    pub policy: Arc<crate::outbound::HttpPolicy>,
    pub client: reqwest::Client,
    /// Where git deploys may clone from (`[tasks] git_allow`).
    pub git_allow: Vec<String>,
}

impl Callbacks {
    pub fn new(allow: &[String], git_allow: &[String]) -> Result<Callbacks, String> {
        let policy = Arc::new(
            crate::outbound::HttpPolicy::parse(allow, &["POST".to_owned()])?
                .named("[tasks] callback_allow"),
        );
        // No proxy from the environment: a proxy would resolve the name
        // itself, past the allow-list.
        let client = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(10))
            .redirect(reqwest::redirect::Policy::none())
            .dns_resolver(Arc::new(crate::outbound::PolicyResolver(policy.clone())))
            .build()
            .map_err(|e| e.to_string())?;
        Ok(Callbacks {
            policy,
            client,
            git_allow: git_allow.to_vec(),
        })
    }

    /// Why `url` may not be called back, if it may not.
    pub fn refusal(&self, url: &str) -> Option<String> {
        let parsed = match reqwest::Url::parse(url) {
            Ok(u) => u,
            Err(e) => return Some(format!("`{url}` is not a URL: {e}")),
        };
        let host = parsed.host_str().unwrap_or_default();
        self.policy
            .refusal("POST", parsed.scheme(), host, parsed.port())
    }
}

pub struct Builder {
    pub tasks: Arc<Tasks>,
    pub plugins: Arc<PluginManager>,
    pub dispatcher: Arc<Dispatcher>,
    /// `<data>/builds`.
    pub builds: PathBuf,
    /// The SDKs (`sdk/` of the repository).
    pub sdk: Option<PathBuf>,
    /// Wall clock (and CPU time) of one build.
    pub timeout: Duration,
    pub callbacks: Arc<Callbacks>,
}

impl Builder {
    /// Build the queued tasks, one at a time, until the queue closes.
    pub fn spawn(
        self: Arc<Self>,
        mut queue: tokio::sync::mpsc::UnboundedReceiver<String>,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            while let Some(id) = queue.recv().await {
                self.run(&id).await;
            }
        })
    }

    async fn run(&self, id: &str) {
        let Some(task) = self.tasks.get(id) else {
            return;
        };
        let Some(cancel) = self.tasks.cancellation(id) else {
            return;
        };
        if task.status.is_final() || cancel.is_cancelled() || !self.tasks.hold(id).await {
            return;
        }
        self.tasks.building_on_disk(id).await;
        let outcome = tokio::select! {
            outcome = self.build(id, &task.spec) => outcome,
            // `Tasks::cancel` has said so; the build's processes die with
            // its future.
            _ = cancel.cancelled() => return,
        };
        let task = match outcome {
            Ok(result) => self.tasks.update(id, |t| {
                let message = format!("completed: {} serves", result.tool_ids.join(", "));
                t.result = Some(result);
                t.error = None;
                (TaskStatus::Completed, message)
            }),
            Err(failure) => self.tasks.update(id, |t| {
                if failure.log.is_some() {
                    t.last_run = failure.log;
                }
                t.error = Some(failure.message.clone());
                (TaskStatus::Failed, failure.message)
            }),
        };
        if let Some(task) = task {
            self.call_back(&task).await;
        }
    }

    /// POST the final status to the task's `callback_url`, if it has one.
    async fn call_back(&self, task: &super::Task) {
        let Some(url) = &task.spec.callback_url else {
            return;
        };
        let message = match self
            .callbacks
            .client
            .post(url)
            .json(&task.view())
            .send()
            .await
        {
            Ok(r) => format!("callback {url} answered {}", r.status().as_u16()),
            Err(e) => format!("callback {url} failed: {e}"),
        };
        tracing::info!(task = %task.task_id, "{message}");
        let status = task.status;
        self.tasks.update(&task.task_id, |_| (status, message));
    }

    async fn build(&self, id: &str, spec: &TaskSpec) -> Result<TaskResult, Failure> {
        if spec.runtime.as_deref() == Some("uv") && spec.source.is_some() {
            return self.uv_service(id, spec).await;
        }
        let repaired_service = spec.kind() == super::spec::REPAIR_TOOL && spec.source.is_none();
        if repaired_service
            || matches!(
                spec.kind(),
                super::spec::SERVICE_DEPLOY | super::spec::GITHUB_DEPLOY
            )
        {
            return self.deploy(id, spec).await;
        }
        let language = spec.language.as_deref().unwrap_or("python");
        let (sdk_lang, module) = match language {
            "javascript" => ("js", "app.js"),
            _ => ("python", "app.py"),
        };
        let sdk = self.sdk.as_ref().ok_or_else(|| {
            "cannot find toolhost's sdk/ directory to build with: set TOOLHOST_SDK_DIR".to_owned()
        })?;
        let dir = self.builds.join(id);
        let (src, out) = (dir.join("src"), dir.join("out"));
        let name = &spec.name;
        // A repair keeps the manifest it serves with (its limits, health,
        // fallbacks), or the toolkit's description.
        let serving = self.plugins.dir().join(format!("{name}.toml"));
        let toml_text = match spec.kind() == super::spec::REPAIR_TOOL {
            true => match tokio::fs::read_to_string(&serving).await {
                Ok(text) => text,
                Err(_) => {
                    let toolkit = self
                        .dispatcher
                        .catalog()
                        .toolkits()
                        .into_iter()
                        .find(|k| k.name == *name);
                    let described = TaskSpec {
                        description: toolkit.map(|k| k.description.clone()).unwrap_or_default(),
                        ..spec.clone()
                    };
                    manifest(&described, language)
                }
            },
            false => manifest(spec, language),
        };
        let write = async {
            tokio::fs::create_dir_all(&src).await?;
            tokio::fs::create_dir_all(&out).await?;
            tokio::fs::write(src.join(module), spec.source.as_deref().unwrap_or("")).await?;
            tokio::fs::write(src.join(format!("{name}.toml")), &toml_text).await
        };
        write
            .await
            .map_err(|e| format!("cannot write the build folder {}: {e}", dir.display()))?;
        let script = sdk.join(sdk_lang).join("build.sh");
        self.tasks.update(id, |_| {
            (
                TaskStatus::Building,
                format!("building with {}", script.display()),
            )
        });
        let argv = [
            "bash".into(),
            script.clone().into_os_string(),
            src.clone().into_os_string(),
            out.clone().into_os_string(),
        ];
        let log = run_limited(&argv, self.timeout).await?;
        let ok = log.exit_code == Some(0);
        self.tasks.update(id, |t| {
            t.last_run = Some(log.clone());
            (
                TaskStatus::Building,
                format!(
                    "the build exited {} after {} ms",
                    log.exit_code
                        .map_or("on a signal".into(), |c| c.to_string()),
                    log.duration_ms
                ),
            )
        });
        if !ok {
            let last = log.stderr.lines().rev().find(|l| !l.trim().is_empty());
            return Err(Failure {
                message: format!(
                    "the build failed{}",
                    last.map(|l| format!(": {l}")).unwrap_or_default()
                ),
                log: Some(log),
            });
        }

        let wasm_path = out.join(format!("{name}.wasm"));
        let toml_path = out.join(format!("{name}.toml"));
        let (wasm, toml) = match (
            tokio::fs::read(&wasm_path).await,
            tokio::fs::read(&toml_path).await,
        ) {
            (Ok(w), Ok(t)) => (w, t),
            _ => return Err(format!("the build made no {}", wasm_path.display()).into()),
        };
        self.tasks.update(id, |_| {
            (
                TaskStatus::Testing,
                format!(
                    "built {} KiB; loading it beside the catalog and running {} example(s)",
                    wasm.len() / 1024,
                    spec.examples.len()
                ),
            )
        });
        let loaded = self
            .plugins
            .trial_load(name, wasm.clone(), toml.clone())
            .await
            .map_err(|e| format!("the built component does not load: {e}"))?;
        self.examples(id, name, &loaded, &spec.examples).await?;

        // Installed: new tools pass through staging.
        let catalog = self.dispatcher.catalog();
        let ids: Vec<String> = loaded
            .tools
            .iter()
            .map(|t| tool::tool_id(name, &t.name))
            .collect();
        let new: Vec<&String> = ids.iter().filter(|i| catalog.get(i).is_none()).collect();
        for i in &new {
            catalog.set_status(i, ToolStatus::Staging);
        }
        if let Err(e) = self.plugins.upload(name, wasm, Some(toml)).await {
            for i in &new {
                catalog.set_status(i, ToolStatus::Active);
            }
            return Err(format!("the tested component was not installed: {e}").into());
        }
        for i in &ids {
            catalog.set_status(i, ToolStatus::Active);
        }
        let _ = tokio::fs::remove_dir_all(&dir).await;
        Ok(TaskResult {
            tool_id: ids[0].clone(),
            url: format!("/tools/{}/invoke", ids[0]),
            tool_ids: ids,
            version: loaded.version,
        })
    }

    /// Run the examples against `loaded` (not in the catalog), in a session
    /// of their own; the first one that fails fails the task.
    async fn examples(
        &self,
        id: &str,
        name: &str,
        loaded: &Loaded,
        examples: &[Example],
    ) -> Result<(), Failure> {
        if examples.is_empty() {
            return Ok(());
        }
        let sessions = self.dispatcher.sessions();
        let (session, _) = sessions
            .open(&crate::callers::Caller::anonymous(), None)
            .map_err(|e| format!("no session for the examples: {e}"))?;
        let result = async {
            for (i, ex) in examples.iter().enumerate() {
                let n = i + 1;
                let started = Instant::now();
                let got = example(name, loaded, ex, &session)
                    .await
                    .map_err(|e| format!("example {n} (`{}`): {e}", ex.tool))?;
                self.example_passed(id, n, ex, &got, started)?;
            }
            Ok::<(), String>(())
        }
        .await;
        let _ = sessions.close(session.id()).await;
        result.map_err(Failure::from)
    }
}

impl Builder {
    /// Whether example `n` answered what it must (then the task says so).
    pub(super) fn example_passed(
        &self,
        id: &str,
        n: usize,
        ex: &Example,
        got: &Value,
        started: Instant,
    ) -> Result<(), String> {
        if let Some(want) = &ex.output
            && got != want
        {
            return Err(format!(
                "example {n} (`{}`): expected {want}, got {got}",
                ex.tool
            ));
        }
        self.tasks.update(id, |_| {
            (
                TaskStatus::Testing,
                format!(
                    "example {n} (`{}`) passed in {} ms",
                    ex.tool,
                    started.elapsed().as_millis()
                ),
            )
        });
        Ok(())
    }
}

/// One example's result as JSON: a JSON result as it is, a text result as a
/// string, several items as an array of those.
async fn example(
    name: &str,
    loaded: &Loaded,
    ex: &Example,
    session: &Arc<crate::sessions::Session>,
) -> Result<Value, String> {
    let short = ex
        .tool
        .strip_prefix(&format!("{name}_"))
        .unwrap_or(&ex.tool);
    let tool = loaded
        .tools
        .iter()
        .find(|t| t.name == short)
        .ok_or_else(|| {
            let names: Vec<&str> = loaded.tools.iter().map(|t| t.name.as_str()).collect();
            format!("no such tool; the component has {names:?}")
        })?;
    let mut schema = tool.input_schema.clone();
    crate::schema::normalize_input(&mut schema);
    let validator =
        jsonschema::validator_for(&schema).map_err(|e| format!("invalid input schema: {e}"))?;
    if let Some(e) = validator.iter_errors(&ex.input).next() {
        return Err(format!("the input does not match the tool's schema: {e}"));
    }
    let limits = loaded.limits;
    let call = loaded.toolkit.clone().invoke(Invocation {
        tool: tool.name.clone(),
        id: ex.tool.clone(),
        input: ex.input.clone(),
        session: session.clone(),
        limits,
        lower: Default::default(),
        progress: None,
        ask: None,
        usage: Default::default(),
    });
    let content = tokio::time::timeout(Duration::from_millis(limits.timeout_ms + 1000), call)
        .await
        .map_err(|_| {
            CallError::Timeout {
                limit_ms: limits.timeout_ms,
            }
            .to_string()
        })?
        .map_err(|e| format!("{}: {e}", e.kind()))?;
    Ok(content_json(&content))
}

/// A result as JSON: a JSON item as it is, text as a string, several items
/// as an array of those.
pub(super) fn content_json(content: &[Content]) -> Value {
    let as_json = |c: &Content| match c.plain() {
        Content::Json(v) | Content::Structured(v) => v.clone(),
        Content::Text(t) => Value::String(t.clone()),
        Content::Binary {
            media_type, data, ..
        } => {
            serde_json::json!({"media_type": media_type, "bytes": data.len()})
        }
        Content::Link(link) => serde_json::json!({"uri": link.uri, "name": link.name}),
        Content::Resource(r) => match &r.text {
            Some(text) => Value::String(text.clone()),
            None => serde_json::json!({"uri": r.uri, "bytes": r.blob.as_ref().map_or(0, Vec::len)}),
        },
        Content::Annotated(_) | Content::Meta(_) => Value::Null,
    };
    let (content, _) = Content::split_meta(content);
    match &*content {
        [one] => as_json(one),
        many => Value::Array(many.iter().map(as_json).collect()),
    }
}

/// The manifest of a built tool: its description and category, and the
/// SDK template's limits for the language (a component carries its
/// interpreter).
fn manifest(spec: &TaskSpec, language: &str) -> String {
    let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
    let mut text = format!("description = {}\n", quote(&spec.description));
    if let Some(category) = &spec.category {
        text.push_str(&format!("category = {}\n", quote(category)));
    }
    text.push_str(match language {
        "javascript" => {
            "[limits]\nfuel = 2_000_000_000\nmemory_mb = 128\ntimeout_ms = 5000\nmax_concurrency = 8\n"
        }
        _ => "[limits]\nfuel = 200_000_000\nmemory_mb = 64\ntimeout_ms = 5000\nmax_concurrency = 8\n",
    });
    text
}

/// Kills a process group when dropped (a build cut short: timeout, cancel).
struct GroupKill(Option<i32>);

impl Drop for GroupKill {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // SAFETY: kill(2) with a negative pid signals that process group.
            unsafe {
                libc::kill(-pgid, libc::SIGKILL);
            }
        }
    }
}

/// Run `argv` niced, in a process group of its own, with a CPU-time limit
/// and a wall clock of `timeout`.
pub(super) async fn run_limited(
    argv: &[std::ffi::OsString],
    timeout: Duration,
) -> Result<RunLog, Failure> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the toolhost binary: {e}"))?;
    let command = format!(
        "nice -n 10 {}",
        argv.iter()
            .map(|a| a.to_string_lossy())
            .collect::<Vec<_>>()
            .join(" ")
    );
    let cpu = timeout.as_secs().max(1);
    let mut cmd = tokio::process::Command::new("nice");
    cmd.args(["-n", "10"])
        .args(argv)
        .env("TOOLHOST_BIN", exe)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    // SAFETY: only async-signal-safe calls (setrlimit) between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let limit = libc::rlimit {
                rlim_cur: cpu,
                rlim_max: cpu,
            };
            libc::setrlimit(libc::RLIMIT_CPU, &limit);
            Ok(())
        });
    }
    let started = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {command}: {e}"))?;
    let mut kill = GroupKill(child.id().map(|p| p as i32));
    let mut stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (mut out_buf, mut err_buf) = (Vec::new(), Vec::new());
    let waited = tokio::time::timeout(timeout, async {
        let (_, _, status) = tokio::join!(
            stdout.read_to_end(&mut out_buf),
            stderr.read_to_end(&mut err_buf),
            child.wait()
        );
        status
    })
    .await;
    let tail = |b: &[u8]| {
        let text = String::from_utf8_lossy(b);
        let start = text.len().saturating_sub(LOG_TAIL);
        let start = (start..=text.len())
            .find(|i| text.is_char_boundary(*i))
            .unwrap_or(text.len());
        text[start..].to_owned()
    };
    let mut log = RunLog {
        command,
        exit_code: None,
        stdout: tail(&out_buf),
        stderr: tail(&err_buf),
        duration_ms: started.elapsed().as_millis() as u64,
    };
    match waited {
        Ok(Ok(status)) => {
            kill.0 = None;
            log.exit_code = status.code();
            Ok(log)
        }
        Ok(Err(e)) => Err(Failure {
            message: format!("the build could not be waited for: {e}"),
            log: Some(log),
        }),
        Err(_) => Err(Failure {
            message: format!(
                "the build took longer than {} s and was stopped",
                timeout.as_secs()
            ),
            log: Some(log),
        }),
    }
}
