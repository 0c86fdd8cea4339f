//! Containers: the engine connection as calls see it, creating and starting
//! a node (recorded in the toolkit's health), removing a container (retried
//! by the monitor when the engine cannot do it now).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, RemoveContainerOptionsBuilder};

use super::{DockerProvider, RUN_LABEL, SCOPE_LABEL, SESSION_LABEL, TOOLKIT_LABEL, engine, lock};
use crate::nodes::health::Cause;
use crate::nodes::manifest::LoadedManifest;
use crate::nodes::node::NodeError;
use crate::nodes::provider::{CreateError, closing};
use crate::nodes::{DRIVER_PATH, Node, READY_WITHIN, SERVICE_FOLDER};
use crate::tool::CallError;

/// What service containers may hold of the host, and what they hold: a
/// start that would take the sum of their `cpus` over `max_cpu_share` of the
/// cores, or of their `memory_mb` over `max_memory_share` of the memory, is
/// refused.
#[derive(Debug)]
pub struct Allocation {
    cpus: f64,
    memory_mb: u64,
    /// Container (name, then id) -> its CPUs, memory and toolkit.
    held: HashMap<String, (f64, u64, String)>,
}

impl Allocation {
    pub fn unbounded() -> Self {
        Allocation {
            cpus: f64::INFINITY,
            memory_mb: u64::MAX,
            held: HashMap::new(),
        }
    }

    /// The limits of `config` on this host.
    pub fn of_host(config: &super::config::DockerConfig) -> Self {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let memory_mb = std::fs::read_to_string("/proc/meminfo")
            .ok()
            .and_then(|m| {
                m.lines()
                    .find_map(|l| l.strip_prefix("MemTotal:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .map_or(u64::MAX, |kb| kb / 1024);
        Allocation {
            cpus: cores * config.max_cpu_share,
            memory_mb: (memory_mb as f64 * config.max_memory_share) as u64,
            held: HashMap::new(),
        }
    }

    /// Bound to an engine's own `cores` and `memory_mb` (what it holds stays).
    pub(super) fn bound(&mut self, cores: f64, memory_mb: u64, shares: super::engines::Shares) {
        self.cpus = cores * shares.cpu;
        self.memory_mb = (memory_mb as f64 * shares.memory) as u64;
    }

    /// The limits, what is held, and by which toolkit.
    pub fn view(&self) -> serde_json::Value {
        let mut by_toolkit: std::collections::BTreeMap<&str, (u32, f64, u64)> = Default::default();
        for (cpus, memory, toolkit) in self.held.values() {
            let e = by_toolkit.entry(toolkit).or_default();
            *e = (e.0 + 1, e.1 + cpus, e.2 + memory);
        }
        let finite = |x: f64| x.is_finite().then_some(x);
        serde_json::json!({
            "cpus_limit": finite(self.cpus),
            // (An empty f64 sum is -0.0.)
            "cpus_allocated": by_toolkit.values().map(|v| v.1).sum::<f64>() + 0.0,
            "memory_limit_mb": (self.memory_mb != u64::MAX).then_some(self.memory_mb),
            "memory_allocated_mb": by_toolkit.values().map(|v| v.2).sum::<u64>(),
            "by_toolkit": by_toolkit.iter().map(|(k, (n, c, m))| (k.to_string(), serde_json::json!({"containers": n, "cpus": c, "memory_mb": m}))).collect::<serde_json::Map<_, _>>(),
        })
    }

    /// Hold `cpus` and `memory_mb` for container `key`, or say why not.
    pub(super) fn reserve(&mut self, key: &str, cpus: f64, memory_mb: u64) -> Result<(), String> {
        let (used_cpus, used_memory) = self
            .held
            .values()
            .fold((0.0, 0u64), |(c, m), (hc, hm, _)| (c + hc, m + hm));
        if used_cpus + cpus > self.cpus + 1e-9 {
            return Err(format!(
                "starting it would allocate {:.2} CPUs to long-lived containers (services, build environments), over the host's limit of {:.2} ([docker] max_cpu_share); retry when one stops",
                used_cpus + cpus,
                self.cpus
            ));
        }
        if used_memory + memory_mb > self.memory_mb {
            return Err(format!(
                "starting it would allocate {} MiB to long-lived containers (services, build environments), over the host's limit of {} MiB ([docker] max_memory_share); retry when one stops",
                used_memory + memory_mb,
                self.memory_mb
            ));
        }
        // Held under the container's name (`toolhost-<toolkit>-<id>`) until
        // it is renamed to the container's id.
        let toolkit = key
            .strip_prefix("toolhost-")
            .and_then(|k| k.rsplit_once('-'))
            .map_or(key, |(t, _)| t);
        self.held
            .insert(key.to_owned(), (cpus, memory_mb, toolkit.to_owned()));
        Ok(())
    }

    pub(super) fn rename(&mut self, from: &str, to: &str) {
        if let Some(v) = self.held.remove(from) {
            self.held.insert(to.to_owned(), v);
        }
    }

    /// Container `name` was created as `id` (its hold, if any, follows
    /// the id), or was not (its hold goes).
    pub(super) fn created(&mut self, name: &str, id: Option<&str>) {
        match id {
            Some(id) => self.rename(name, id),
            None => self.release(name),
        }
    }

    pub(super) fn release(&mut self, key: &str) {
        self.held.remove(key);
    }
}

/// The host config of every container toolhost makes: an init process, no
/// capabilities, no new privileges, memory (no swap), CPU and pids caps.
pub(crate) fn hardened(
    network: &str,
    memory_bytes: i64,
    cpus: f64,
    pids: u32,
    binds: Vec<String>,
) -> HostConfig {
    HostConfig {
        init: Some(true),
        network_mode: Some(network.into()),
        memory: Some(memory_bytes),
        memory_swap: Some(memory_bytes),
        nano_cpus: Some((cpus * 1e9) as i64),
        pids_limit: Some(i64::from(pids)),
        cap_drop: Some(vec!["ALL".into()]),
        security_opt: Some(vec!["no-new-privileges".into()]),
        binds: Some(binds),
        ..Default::default()
    }
}

/// A fresh container name for toolkit `toolkit`.
pub(crate) fn container_name(toolkit: &str) -> String {
    format!(
        "toolhost-{toolkit}-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

impl DockerProvider {
    /// The labels of every container this provider makes: its scope and run
    /// (orphans of earlier runs are found by them), the toolkit, the session.
    pub(crate) fn labels(&self, toolkit: &str, session: &str) -> HashMap<String, String> {
        [
            (SCOPE_LABEL.to_owned(), self.scope.clone()),
            (RUN_LABEL.to_owned(), self.run.clone()),
            (TOOLKIT_LABEL.to_owned(), toolkit.to_owned()),
            (SESSION_LABEL.to_owned(), session.to_owned()),
        ]
        .into()
    }

    /// A client of engine `engine`.
    pub(crate) async fn docker(&self, engine: usize) -> Result<bollard::Docker, CallError> {
        self.engines
            .member(engine)
            .conn
            .get()
            .await
            .map_err(CallError::BackendUnavailable)
    }

    /// Map an engine error; a lost connection is forgotten so the next call reconnects.
    pub(crate) async fn engine_error(
        &self,
        engine: usize,
        what: &str,
        e: bollard::errors::Error,
    ) -> (Option<Cause>, CallError) {
        if engine::is_connection_error(&e) {
            // Down (marked so, its nodes severed) or just a dropped connection.
            self.engines.answers(engine).await;
            self.engines.member(engine).conn.reset().await;
            return (
                Some(Cause::Engine),
                CallError::BackendUnavailable(format!(
                    "the Docker engine failed while {what}: {e}"
                )),
            );
        }
        (
            Some(Cause::Create),
            CallError::BackendUnavailable(format!("Docker refused {what}: {e}")),
        )
    }

    /// Remove container `id`; when the engine cannot do it now, remember it
    /// and let the monitor try again.
    pub(crate) async fn remove(&self, id: &str) {
        let engine = self.engines.home_of(id);
        let member = self.engines.member(engine);
        lock(&member.allocation).release(id);
        let Ok(docker) = member.conn.get().await else {
            lock(&self.graveyard).insert(id.to_owned());
            return;
        };
        let options = RemoveContainerOptionsBuilder::default()
            .force(true)
            .v(true)
            .build();
        match docker.remove_container(id, Some(options)).await {
            Ok(()) => {
                lock(&self.graveyard).remove(id);
                self.engines.forget(id);
                self.life.count_removed();
            }
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {
                lock(&self.graveyard).remove(id);
                self.engines.forget(id);
            }
            Err(e) => {
                tracing::debug!(container = id, error = %e, "could not remove a node container; retrying later");
                lock(&self.graveyard).insert(id.to_owned());
            }
        }
    }

    /// Create and start a node of `spec` with `workspace` at /workspace on
    /// engine `engine`; an error says what stood in the way (none when the
    /// server is shutting down).
    pub(super) async fn start_node(
        &self,
        spec: &LoadedManifest,
        workspace: &Path,
        session: &str,
        engine: usize,
    ) -> Result<Arc<Node>, CreateError> {
        let _creating = self.life.creating();
        if self.life.is_closing() {
            return Err(closing());
        }
        let docker = self
            .docker(engine)
            .await
            .map_err(|e| (Some(Cause::Engine), e))?;
        let d = &spec.manifest.docker;
        // A built image: made (or waited for) first; another one: loaded
        // from the image archive when the engine lacks it.
        if d.build.is_some() {
            self.ensure_built(spec, engine).await?;
        } else if self.engines.has_archive() {
            self.engines
                .ensure_image(engine, &docker, &d.image, false)
                .await
                .map_err(|e| {
                    (
                        Some(Cause::Image),
                        CallError::BackendUnavailable(format!(
                            "the node image `{}` cannot be made present on engine `{}`: {e}",
                            d.image,
                            self.engines.member(engine).name
                        )),
                    )
                })?;
        }
        let labels = self.labels(&spec.name, session);
        let memory = i64::from(d.memory_mb) << 20;
        // Host paths as the engine's host sees them.
        let there = |p: &std::path::Path| self.engines.member(engine).host_path(p);
        let mut binds = vec![format!("{}:/workspace:rw", there(workspace).display())];
        let (cmd, env) = match &spec.driver {
            // A driver node idles; the driver is exec'd into it.
            Some(driver) => {
                binds.push(format!("{}:{DRIVER_PATH}:ro", there(driver).display()));
                (Some(vec!["sleep".into(), "infinity".into()]), None)
            }
            // A service runs its own command, its folder at /toolkit.
            None => {
                binds.push(format!(
                    "{}:{SERVICE_FOLDER}:ro",
                    there(&spec.folder).display()
                ));
                let env = d.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
                (d.command.clone(), Some(env))
            }
        };
        let mut host_config = hardened(d.network.mode(), memory, d.cpus, d.pids, binds);
        if d.gpu {
            host_config.device_requests = Some(super::gpu::device_requests(d.gpu_count));
        }
        let body = ContainerCreateBody {
            image: Some(d.image.clone()),
            cmd,
            env,
            // A service runs as the manifest's user (a driver is exec'd as it).
            user: spec.driver.is_none().then(|| d.user.clone()).flatten(),
            labels: Some(labels),
            working_dir: Some("/workspace".into()),
            host_config: Some(host_config),
            ..Default::default()
        };
        let name = container_name(&spec.name);
        let allocation = &self.engines.member(engine).allocation;
        if spec.service_port().is_some() {
            lock(allocation)
                .reserve(&name, d.cpus, u64::from(d.memory_mb))
                .map_err(|why| {
                    (
                        None,
                        CallError::Overloaded(format!(
                            "the {} service cannot start: {why}",
                            spec.name
                        )),
                    )
                })?;
        }
        let options = CreateContainerOptionsBuilder::default().name(&name).build();
        let begun = std::time::Instant::now();
        self.engines
            .settle(&name, engine, d.cpus, u64::from(d.memory_mb));
        if d.gpu {
            self.engines.hold_gpus(&name, d.gpu_count);
        }
        let created = docker.create_container(Some(options), body).await;
        let create_ms = begun.elapsed().as_secs_f64() * 1e3;
        let id = created.as_ref().ok().map(|c| c.id.as_str());
        lock(allocation).created(&name, id);
        self.engines.created(&name, id);
        let created = match created {
            Ok(c) => c,
            Err(bollard::errors::Error::DockerResponseServerError {
                status_code: 404, ..
            }) => {
                return Err((Some(Cause::Image), missing_image(&d.image)));
            }
            Err(e) => return Err(self.engine_error(engine, "creating a node", e).await),
        };
        if let Err(e) = docker.start_container(&created.id, None).await {
            self.remove(&created.id).await;
            return Err(self.engine_error(engine, "starting a node", e).await);
        }
        let start_ms = begun.elapsed().as_secs_f64() * 1e3 - create_ms;
        let linked = match d.internal_port {
            Some(port) => {
                let within = std::time::Duration::from_secs(d.start_timeout_s);
                Node::service(
                    &docker,
                    &created.id,
                    &spec.name,
                    port,
                    &d.health_path,
                    within,
                )
                .await
            }
            None => {
                let cmd = vec!["python3".into(), "-u".into(), DRIVER_PATH.into()];
                Node::attach(
                    &docker,
                    &created.id,
                    &spec.name,
                    cmd,
                    d.user.as_deref(),
                    READY_WITHIN,
                )
                .await
            }
        };
        match linked {
            Ok(node) if self.life.is_closing() => {
                // Shutdown began while this node started: it must not outlive us.
                drop(node);
                self.remove(&created.id).await;
                Err(closing())
            }
            Ok(node) => {
                let ready_ms = begun.elapsed().as_secs_f64() * 1e3 - create_ms - start_ms;
                let node = Arc::new(node);
                self.engines.attach(&node);
                tracing::info!(
                    toolkit = %spec.name, session, container = %name,
                    engine = %self.engines.member(engine).name,
                    create_ms = create_ms.round(), start_ms = start_ms.round(), ready_ms = ready_ms.round(),
                    "node started"
                );
                Ok(node)
            }
            Err(e) => {
                self.remove(&created.id).await;
                // A service that never answered its health path: `failed`.
                let cause = match (&e, d.internal_port) {
                    (NodeError::Io(m), Some(_)) if m.contains("CAP_SYS_ADMIN") => Cause::Create,
                    (_, Some(_)) => Cause::Unhealthy,
                    (_, None) => Cause::Create,
                };
                Err((
                    Some(cause),
                    CallError::BackendUnavailable(format!(
                        "the {} node's driver did not start: {e}",
                        spec.name
                    )),
                ))
            }
        }
    }
}

pub(crate) fn missing_image(image: &str) -> CallError {
    CallError::BackendUnavailable(format!(
        "the node image `{image}` is missing: build it with `make node-image`"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_allocations_stay_under_the_host_share() {
        let mut a = Allocation {
            cpus: 2.0,
            memory_mb: 1000,
            held: HashMap::new(),
        };
        a.reserve("a", 1.5, 400).unwrap();
        let err = a.reserve("b", 0.75, 100).unwrap_err();
        assert!(
            err.contains("2.25 CPUs") && err.contains("max_cpu_share"),
            "{err}"
        );
        let err = a.reserve("b", 0.5, 700).unwrap_err();
        assert!(
            err.contains("1100 MiB") && err.contains("max_memory_share"),
            "{err}"
        );
        a.reserve("b", 0.5, 600).unwrap();
        a.rename("b", "id-b");
        a.release("a");
        a.reserve("c", 1.5, 400).unwrap();
        a.release("id-b");
        assert_eq!(a.held.len(), 1);
        assert!(Allocation::unbounded().reserve("x", 64.0, 1 << 40).is_ok());
    }
}
