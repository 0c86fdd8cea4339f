//! Several Docker engines as one node pool (`[[docker.engines]]`; none
//! listed: the one local engine, as before).
//!
//! - Placement: a session's first node goes to the engine with the most free
//!   capacity under seed 004's rule, from that engine's own `docker info`:
//!   the CPUs and memory every node of ours there is capped at, against its
//!   cores and 80 % of its memory ([`place`]). Engines where the node fits
//!   come first; when none does, the least loaded one takes it (a session
//!   node's caps are ceilings for bursty use; long-lived service containers
//!   are still refused by the engine's [`Allocation`]).
//! - Affinity: the session's later nodes (every toolkit) go to the same
//!   engine, while it lives, drained or not.
//! - Health: the monitor pings every engine; one that stops answering is
//!   `down`, its nodes are severed (calls in flight end at once with
//!   `node_lost`) and its sessions are placed afresh on their next call.
//! - Drain: a drained engine takes no new session; sessions already on it
//!   carry on until they close.
//! - Images: an engine lacking a node image loads it from the configured
//!   `docker save` archive (engines that cannot pull).

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use super::engine::{Engine, Target};
pub use super::placement::{Candidate, Shares, place, place_where};
use crate::nodes::Allocation;
use crate::nodes::Node;
use crate::tool::CallError;

/// How long a health ping may take before it counts as unanswered.
const PING_WITHIN: Duration = Duration::from_secs(2);

/// Unanswered pings in a row before an engine that was up counts as down.
/// A busy engine (removing containers on two cores, say) can take longer
/// than a ping's time for a look or two; taking it for down then would
/// sever every node of it, calls and all. An engine that refuses the
/// connection or answers an error is down at once.
const SLOW_PINGS: u32 = 3;

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// One engine of the pool.
pub struct Member {
    pub name: String,
    target: Target,
    pub conn: Engine,
    /// Seed 004's rule for long-lived containers (services, builds) here.
    pub allocation: Mutex<Allocation>,
    pub(super) state: Mutex<MemberState>,
    /// One archive load at a time.
    pub(super) loading: tokio::sync::Mutex<()>,
    /// Local folders and where the engine's host sees them, longest first.
    paths: Vec<(PathBuf, PathBuf)>,
    /// `gpus` of its configuration.
    gpus: Option<u32>,
}

#[derive(Debug, Default, Clone)]
pub(super) struct MemberState {
    /// None: not checked yet.
    up: Option<bool>,
    error: Option<String>,
    /// Pings unanswered in a row while up.
    slow: u32,
    drained: bool,
    /// GPUs it offers (its `docker info` lists a GPU runtime).
    pub(super) gpus: u32,
    /// From the engine's own `docker info`.
    cores: f64,
    memory_mb: u64,
    version: Option<String>,
    /// Images known to be there, and known to be missing.
    pub(super) images: HashSet<String>,
    pub(super) missing: HashSet<String>,
    /// Images the archive was loaded for (once: it may not hold them).
    pub(super) tried: HashSet<String>,
}

impl MemberState {
    pub(super) fn is_up(&self) -> bool {
        self.up == Some(true)
    }
}

/// Where a container runs and what it is capped at.
#[derive(Clone)]
pub(super) struct Home {
    pub(super) engine: usize,
    cpus: f64,
    memory_mb: u64,
    /// GPUs it holds ([`super::gpu`]).
    pub(super) gpus: u32,
    node: Option<Weak<Node>>,
}

/// One engine as `GET /plugins`, `GET /system` and `/metrics` show it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EngineView {
    pub name: String,
    pub url: String,
    /// `up`, `down` or `unknown` (not checked yet).
    pub health: &'static str,
    pub error: Option<String>,
    pub drained: bool,
    pub version: Option<String>,
    pub cores: f64,
    pub memory_mb: u64,
    /// Our containers there (session nodes, pooled nodes, services).
    pub nodes: usize,
    pub cpus_allocated: f64,
    pub memory_allocated_mb: u64,
    /// Sessions placed there.
    pub sessions: usize,
}

pub struct Engines {
    pub members: Vec<Member>,
    /// Session -> the engine its nodes go to.
    affinity: Mutex<HashMap<String, usize>>,
    /// Container id (its name until created) -> where it runs.
    pub(super) homes: Mutex<HashMap<String, Home>>,
    pub(super) archive: Option<PathBuf>,
    shares: Shares,
}

impl Engines {
    /// Whether every engine is this machine's own (its containers' bind
    /// mounts are this kernel's directories).
    pub fn all_local(&self) -> bool {
        self.members
            .iter()
            .all(|m| matches!(m.target, Target::Local))
    }

    /// The engines of `config` (its one local engine when none is listed).
    pub fn new(config: &super::config::DockerConfig) -> Result<Engines, String> {
        let shares = Shares {
            cpu: config.max_cpu_share,
            memory: config.max_memory_share,
        };
        let mut members = Vec::new();
        if config.engines.is_empty() {
            let mut local = Member::new("local".into(), Target::Local, Allocation::of_host(config));
            local.gpus = config.gpus;
            members.push(local);
        }
        let mut names = HashSet::new();
        for e in &config.engines {
            if e.name.is_empty() || !names.insert(e.name.clone()) {
                return Err(format!(
                    "[[docker.engines]]: every engine needs a name of its own (`{}`)",
                    e.name
                ));
            }
            // Bounded once its `docker info` is known.
            let mut member = Member::new(e.name.clone(), Target::of(e)?, Allocation::unbounded());
            member.gpus = e.gpus.or(config.gpus);
            for (local, there) in &e.paths {
                if !local.is_absolute() || !there.is_absolute() {
                    return Err(format!(
                        "[[docker.engines]] `{}`: paths maps absolute folders to absolute folders (`{}` = `{}`)",
                        e.name,
                        local.display(),
                        there.display()
                    ));
                }
                member.paths.push((local.clone(), there.clone()));
            }
            member
                .paths
                .sort_by_key(|(local, _)| std::cmp::Reverse(local.components().count()));
            members.push(member);
        }
        Ok(Engines {
            members,
            affinity: Mutex::default(),
            homes: Mutex::default(),
            archive: config.image_archive.clone(),
            shares,
        })
    }

    /// The one local engine (tests, and servers built without a config).
    pub fn local() -> Engines {
        Engines {
            members: vec![Member::new(
                "local".into(),
                Target::Local,
                Allocation::unbounded(),
            )],
            affinity: Mutex::default(),
            homes: Mutex::default(),
            archive: None,
            shares: Shares {
                cpu: 1.0,
                memory: 0.8,
            },
        }
    }

    pub fn member(&self, i: usize) -> &Member {
        &self.members[i.min(self.members.len() - 1)]
    }

    pub fn index_of(&self, name: &str) -> Option<usize> {
        self.members.iter().position(|m| m.name == name)
    }

    /// The engine of container `id` (the first engine when unknown).
    pub fn home_of(&self, id: &str) -> usize {
        lock(&self.homes).get(id).map_or(0, |h| h.engine)
    }

    /// Container `name` is being made on `engine` with these caps.
    pub fn settle(&self, name: &str, engine: usize, cpus: f64, memory_mb: u64) {
        lock(&self.homes).insert(
            name.to_owned(),
            Home {
                engine,
                cpus,
                memory_mb,
                gpus: 0,
                node: None,
            },
        );
    }

    /// Container `name` was created as `id`, or was not (`None`).
    pub fn created(&self, name: &str, id: Option<&str>) {
        let mut homes = lock(&self.homes);
        if let Some(home) = homes.remove(name)
            && let Some(id) = id
        {
            homes.insert(id.to_owned(), home);
        }
    }

    /// `node` runs in its container (severed if its engine goes down).
    pub fn attach(&self, node: &Arc<Node>) {
        if let Some(home) = lock(&self.homes).get_mut(&node.container) {
            home.node = Some(Arc::downgrade(node));
        }
    }

    /// Container `id` is gone.
    pub fn forget(&self, id: &str) {
        lock(&self.homes).remove(id);
    }

    /// The session's engine for a node capped at `cpus`, `memory_mb` of
    /// `image`: its engine while that one is up, else a placement. `local`:
    /// on this machine (a service node, reached through its `/proc`),
    /// outside the session's affinity when that engine is remote.
    pub async fn engine_for(
        &self,
        session: &str,
        image: Option<&str>,
        cpus: f64,
        memory_mb: u64,
        local: bool,
    ) -> Result<usize, CallError> {
        let current = lock(&self.affinity).get(session).copied();
        if let Some(i) = current
            && lock(&self.member(i).state).up != Some(false)
            && !(local && self.member(i).target.is_remote())
        {
            return Ok(i);
        }
        let candidates = self.candidates(image);
        let chosen = match place_where(&candidates, cpus, memory_mb, self.shares, local) {
            Some(i) => i,
            None if local && candidates.iter().all(|c| c.remote) => {
                return Err(CallError::BackendUnavailable(
                    "service toolkits need a Docker engine on this machine (the host reaches a service inside its container's network namespace); every engine listed is remote".into(),
                ));
            }
            None => self.revive().await?,
        };
        let keeps_affinity = local && current.is_some_and(|i| self.member(i).target.is_remote());
        if session != "pool" && !keeps_affinity {
            let before = lock(&self.affinity).insert(session.to_owned(), chosen);
            if let Some(b) = before.filter(|b| *b != chosen) {
                tracing::info!(
                    session,
                    from = %self.member(b).name,
                    to = %self.member(chosen).name,
                    "session moved to another engine (its engine is down)"
                );
            }
        }
        Ok(chosen)
    }

    /// No engine is usable: try to reach any undrained one now (the
    /// monitor may not have seen it come back yet), or say why not.
    async fn revive(&self) -> Result<usize, CallError> {
        let mut why = Vec::new();
        for (i, m) in self.members.iter().enumerate() {
            if lock(&m.state).drained {
                why.push(format!("`{}` is drained", m.name));
                continue;
            }
            match m.conn.get().await {
                Ok(_) => {
                    lock(&m.state).up = Some(true);
                    return Ok(i);
                }
                Err(e) => why.push(e),
            }
        }
        Err(CallError::BackendUnavailable(if self.members.len() == 1 {
            why.pop().unwrap_or_default()
        } else {
            format!("no Docker engine can take the node: {}", why.join("; "))
        }))
    }

    fn candidates(&self, image: Option<&str>) -> Vec<Candidate> {
        let mut held: Vec<(f64, u64, usize)> = vec![(0.0, 0, 0); self.members.len()];
        for h in lock(&self.homes).values() {
            if let Some(x) = held.get_mut(h.engine) {
                *x = (x.0 + h.cpus, x.1 + h.memory_mb, x.2 + 1);
            }
        }
        self.members
            .iter()
            .zip(held)
            .map(|(m, (cpus_held, memory_held_mb, nodes))| {
                let s = lock(&m.state);
                Candidate {
                    up: s.up != Some(false),
                    drained: s.drained,
                    lacks_image: self.archive.is_none()
                        && image.is_some_and(|i| s.missing.contains(i)),
                    remote: m.target.is_remote(),
                    cores: s.cores,
                    memory_mb: s.memory_mb,
                    cpus_held,
                    memory_held_mb,
                    nodes,
                }
            })
            .collect()
    }

    /// Drain engine `name` (or undo it): whether there is such an engine.
    pub fn drain(&self, name: &str, drained: bool) -> Option<EngineView> {
        let i = self.index_of(name)?;
        lock(&self.member(i).state).drained = drained;
        tracing::info!(
            engine = name,
            drained,
            "engine {}",
            if drained { "drained" } else { "undrained" }
        );
        self.views().into_iter().nth(i)
    }

    /// The session closed: it has no engine any more.
    pub fn release(&self, session: &str) {
        lock(&self.affinity).remove(session);
    }

    pub fn views(&self) -> Vec<EngineView> {
        let homes = lock(&self.homes).clone();
        let affinity = lock(&self.affinity).clone();
        self.members
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let s = lock(&m.state).clone();
                let mine = homes.values().filter(|h| h.engine == i);
                let (nodes, cpus, memory) = mine.fold((0, 0.0, 0), |(n, c, mm), h| {
                    (n + 1, c + h.cpus, mm + h.memory_mb)
                });
                EngineView {
                    name: m.name.clone(),
                    url: m.target.url(),
                    health: match s.up {
                        Some(true) => "up",
                        Some(false) => "down",
                        None => "unknown",
                    },
                    error: s.error,
                    drained: s.drained,
                    version: s.version,
                    cores: s.cores,
                    memory_mb: s.memory_mb,
                    nodes,
                    cpus_allocated: cpus + 0.0,
                    memory_allocated_mb: memory,
                    sessions: affinity.values().filter(|e| **e == i).count(),
                }
            })
            .collect()
    }

    /// Ping every engine; one found down has its nodes severed. Returns the
    /// engines that are up, and those of them that were not before.
    pub async fn check(&self) -> (Vec<usize>, Vec<usize>) {
        let pings = self.members.iter().map(|m| async move {
            let docker = m.conn.get().await.map_err(|e| (e, false))?;
            let info = tokio::time::timeout(PING_WITHIN, docker.info())
                .await
                .map_err(|_| {
                    (
                        format!("the engine did not answer within {PING_WITHIN:?}"),
                        true,
                    )
                })?
                .map_err(|e| (e.to_string(), false))?;
            Ok::<_, (String, bool)>(info)
        });
        let answers = futures::future::join_all(pings).await;
        let (mut up, mut came_up) = (Vec::new(), Vec::new());
        for (i, (m, answer)) in self.members.iter().zip(answers).enumerate() {
            match answer {
                Ok(info) => {
                    let cores = info.ncpu.unwrap_or(0) as f64;
                    let runtime = super::gpu::has_runtime(info.runtimes.as_ref());
                    let gpus = super::gpu::offered(m.gpus, runtime);
                    let memory_mb = (info.mem_total.unwrap_or(0).max(0) as u64) >> 20;
                    let mut s = lock(&m.state);
                    if s.up == Some(false) {
                        tracing::info!(engine = %m.name, "Docker engine up again");
                    }
                    if s.up != Some(true) {
                        came_up.push(i);
                        s.tried.clear();
                    }
                    s.slow = 0;
                    s.gpus = gpus;
                    let fresh = s.cores != cores || s.memory_mb != memory_mb;
                    (s.up, s.error, s.cores, s.memory_mb) = (Some(true), None, cores, memory_mb);
                    s.version = info.server_version;
                    drop(s);
                    // A listed engine's rule comes from its own info (the
                    // default local one keeps the host's, as before).
                    if fresh && !matches!(m.target, Target::Local) {
                        lock(&m.allocation).bound(cores, memory_mb, self.shares);
                    }
                    up.push(i);
                }
                Err((e, unanswered)) => {
                    if unanswered {
                        let mut s = lock(&m.state);
                        if s.up == Some(true) && s.slow + 1 < SLOW_PINGS {
                            s.slow += 1;
                            tracing::warn!(engine = %m.name, "the Docker engine is slow to answer; its nodes are kept");
                            up.push(i);
                            continue;
                        }
                    }
                    m.conn.reset().await;
                    let was = {
                        let mut s = lock(&m.state);
                        let was = s.up;
                        (s.up, s.error) = (Some(false), Some(e.clone()));
                        was
                    };
                    if was != Some(false) {
                        tracing::warn!(engine = %m.name, error = %e, "Docker engine down: its nodes are lost, its sessions move on their next call");
                        self.sever(i);
                    }
                }
            }
        }
        (up, came_up)
    }

    /// Why no engine is up (the one engine's own reason when there is one).
    pub fn down_reason(&self) -> String {
        let why: Vec<String> = self
            .members
            .iter()
            .map(|m| {
                let e = lock(&m.state).error.clone().unwrap_or_default();
                if self.members.len() == 1 {
                    e
                } else {
                    format!("`{}`: {e}", m.name)
                }
            })
            .collect();
        if self.members.len() == 1 {
            why.join("")
        } else {
            format!("no Docker engine answers ({})", why.join("; "))
        }
    }

    /// Engine `i` is gone: every node on it stops at once (calls waiting on
    /// one end with `node_lost`).
    pub fn sever(&self, i: usize) {
        let nodes: Vec<Arc<Node>> = lock(&self.homes)
            .values()
            .filter(|h| h.engine == i)
            .filter_map(|h| h.node.as_ref()?.upgrade())
            .collect();
        for n in nodes {
            n.sever();
        }
    }

    /// Whether engine `i` still answers (a quick ping); marked down and
    /// its nodes severed when not.
    pub async fn answers(&self, i: usize) -> bool {
        let m = self.member(i);
        let ok = match m.conn.get().await {
            Ok(d) => matches!(tokio::time::timeout(PING_WITHIN, d.ping()).await, Ok(Ok(_))),
            Err(_) => false,
        };
        if !ok {
            m.conn.reset().await;
            let was = {
                let mut s = lock(&m.state);
                s.up.replace(false)
            };
            if was != Some(false) {
                tracing::warn!(engine = %m.name, "Docker engine down (found by a failed call)");
                self.sever(i);
            }
        }
        ok
    }
}

impl Member {
    fn new(name: String, target: Target, allocation: Allocation) -> Member {
        Member {
            name,
            conn: Engine::new(target.clone()),
            target,
            allocation: Mutex::new(allocation),
            state: Mutex::default(),
            loading: tokio::sync::Mutex::new(()),
            paths: Vec::new(),
            gpus: None,
        }
    }

    /// Where this engine's host sees local folder or file `local` (its
    /// `paths`: the deepest listed folder holding it), for a bind mount.
    pub fn host_path(&self, local: &Path) -> PathBuf {
        for (from, to) in &self.paths {
            if let Ok(rest) = local.strip_prefix(from) {
                return to.join(rest);
            }
        }
        local.to_path_buf()
    }

    pub fn is_drained(&self) -> bool {
        lock(&self.state).drained
    }
}

#[cfg(test)]
#[path = "engines_tests.rs"]
mod tests;
