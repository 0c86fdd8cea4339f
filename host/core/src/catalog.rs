//! The one registry of tools, whatever backend runs them.
//!
//! A backend loads a toolkit (a wasm plugin, later a Docker toolkit) and registers
//! it here with its tool descriptors. The catalog validates ids, compiles each
//! input schema once, and publishes an immutable snapshot that readers get
//! without locking; registering or removing a toolkit swaps the snapshot
//! atomically, so a call in flight keeps the version it started with.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use tokio::sync::{Semaphore, watch};

use crate::backend::{Backend, Toolkit};
use crate::pins::{Judged, Pins};
use crate::registry::{Registry, Saved, StatsRow, ToolMeta, ToolRecord, ToolStatus, Write};
pub use crate::registry::{StatsView, ToolStats};
use crate::tool::{self, Limits, ToolDescriptor};

/// A toolkit as registered: the backend's handle plus what the host needs to
/// schedule calls to it.
pub struct ToolkitEntry {
    /// The backend that loaded it.
    pub backend: Arc<dyn Backend>,
    pub name: String,
    pub description: String,
    /// The manifest's `category`, if it gives one.
    pub category: Option<String>,
    /// The manifest's `[health]`, if it has one.
    pub health: Option<crate::health::declared::Declared>,
    /// The manifest's `[fallback]`: a tool's name -> tool ids.
    pub fallback: crate::health::declared::Fallbacks,
    /// Content hash or other version label.
    pub version: String,
    pub limits: Limits,
    pub toolkit: Arc<dyn Toolkit>,
    /// Admission control: at most `max_concurrency` calls run, at most
    /// `max_queue` wait.
    pub slots: Semaphore,
    pub waiting: AtomicU64,
}

impl ToolkitEntry {
    pub fn new(
        backend: Arc<dyn Backend>,
        name: impl Into<String>,
        description: impl Into<String>,
        version: impl Into<String>,
        limits: Limits,
        toolkit: Arc<dyn Toolkit>,
    ) -> Self {
        ToolkitEntry {
            backend,
            name: name.into(),
            description: description.into(),
            category: None,
            health: None,
            fallback: Default::default(),
            version: version.into(),
            slots: Semaphore::new(limits.max_concurrency as usize),
            waiting: AtomicU64::new(0),
            limits,
            toolkit,
        }
    }
}

/// A tool in the catalog.
pub struct ToolEntry {
    pub id: String,
    pub toolkit: Arc<ToolkitEntry>,
    pub descriptor: ToolDescriptor,
    pub validator: jsonschema::Validator,
    /// Its status and statistics (kept across versions and restarts).
    pub record: Arc<ToolRecord>,
}

impl ToolEntry {
    /// What `GET /tools` calls its category: the manifest's `category`,
    /// else the toolkit's name.
    pub fn category(&self) -> &str {
        self.toolkit
            .category
            .as_deref()
            .unwrap_or(&self.toolkit.name)
    }
}

/// Why a toolkit could not be registered.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error(
        "invalid plugin name `{0}`: use lowercase letters, digits and `-`, starting with a letter"
    )]
    InvalidPluginName(String),
    #[error("invalid tool id `{0}`: tool ids must match ^[a-zA-Z0-9_-]{{1,64}}$")]
    InvalidToolId(String),
    #[error("plugin `{plugin}` lists tool `{tool}` twice")]
    DuplicateTool { plugin: String, tool: String },
    /// Tool ids are `<plugin>_<tool>` and plugin names hold no `_`, so ids of
    /// different toolkits never clash; a name taken by another backend does.
    #[error("the name `{name}` is already used by a {other} toolkit")]
    NameTaken { name: String, other: String },
    #[error("the input schema of tool `{tool}` is not a valid JSON Schema: {message}")]
    BadSchema { tool: String, message: String },
    #[error("plugin `{0}` has no tools")]
    NoTools(String),
}

#[derive(Default)]
struct Snapshot {
    tools: BTreeMap<String, Arc<ToolEntry>>,
    toolkits: BTreeMap<String, Arc<ToolkitEntry>>,
}

/// The registry.
pub struct Catalog {
    snapshot: ArcSwap<Snapshot>,
    /// Serialises writers; readers never take it.
    write: Mutex<()>,
    records: Mutex<HashMap<String, Arc<ToolRecord>>>,
    /// Where records are saved (none: in memory only).
    registry: OnceLock<Arc<Registry>>,
    changes: watch::Sender<u64>,
    /// Toolkits on their way in (a plugin on disk still compiling, with no
    /// version serving yet): their tools are not listed, but a call to one
    /// waits for it instead of getting `not_found`.
    pending: Mutex<HashSet<String>>,
    /// Bumped when a toolkit stops being pending (the tool list itself may
    /// not change, so `changes` is not).
    pending_done: watch::Sender<u64>,
    /// Pinned tool definitions of the toolkits defined elsewhere
    /// ([`Toolkit::pins_definitions`]); none: nothing pinned.
    pins: OnceLock<Arc<Pins>>,
}

impl Default for Catalog {
    fn default() -> Self {
        Catalog {
            snapshot: ArcSwap::from_pointee(Snapshot::default()),
            write: Mutex::new(()),
            records: Mutex::new(HashMap::new()),
            registry: OnceLock::new(),
            changes: watch::channel(0).0,
            pending: Mutex::new(HashSet::new()),
            pending_done: watch::channel(0).0,
            pins: OnceLock::new(),
        }
    }
}

impl Catalog {
    pub fn new() -> Self {
        Self::default()
    }

    /// Add `toolkit` with `tools`, replacing a toolkit of the same name in one
    /// atomic step. On error nothing changes.
    pub fn register(
        &self,
        toolkit: ToolkitEntry,
        tools: Vec<ToolDescriptor>,
    ) -> Result<(), CatalogError> {
        if !tool::is_valid_plugin_name(&toolkit.name) {
            return Err(CatalogError::InvalidPluginName(toolkit.name));
        }
        if tools.is_empty() {
            return Err(CatalogError::NoTools(toolkit.name));
        }
        let toolkit = Arc::new(toolkit);
        let mut entries = BTreeMap::new();
        for mut descriptor in tools {
            crate::schema::normalize_input(&mut descriptor.input_schema);
            if let Some(output) = &mut descriptor.output_schema {
                crate::schema::normalize(output);
            }
            let id = tool::tool_id(&toolkit.name, &descriptor.name);
            if !tool::is_valid_tool_id(&id) || descriptor.name.is_empty() {
                return Err(CatalogError::InvalidToolId(id));
            }
            let validator = jsonschema::validator_for(&descriptor.input_schema).map_err(|e| {
                CatalogError::BadSchema {
                    tool: descriptor.name.clone(),
                    message: e.to_string(),
                }
            })?;
            let name = descriptor.name.clone();
            let entry = ToolEntry {
                id: id.clone(),
                toolkit: toolkit.clone(),
                descriptor,
                validator,
                record: self.record(&id),
            };
            if entries.insert(id, Arc::new(entry)).is_some() {
                return Err(CatalogError::DuplicateTool {
                    plugin: toolkit.name.clone(),
                    tool: name,
                });
            }
        }

        let _guard = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.snapshot.load();
        if let Some(other) = current.toolkits.get(&toolkit.name)
            && other.backend.name() != toolkit.backend.name()
        {
            return Err(CatalogError::NameTaken {
                name: toolkit.name.clone(),
                other: other.backend.name().to_owned(),
            });
        }
        let mut next = Snapshot {
            tools: current
                .tools
                .iter()
                .filter(|(_, t)| t.toolkit.name != toolkit.name)
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            toolkits: current.toolkits.clone(),
        };
        if toolkit.toolkit.pins_definitions()
            && let Some(pins) = self.pins.get()
        {
            let definitions: Vec<(String, serde_json::Value)> = entries
                .values()
                .map(|t| (t.id.clone(), crate::pins::definition(&t.descriptor)))
                .collect();
            let judged = pins.judge(&toolkit.name, &definitions);
            self.apply_pins(judged);
        }
        if let Some(registry) = self.registry.get() {
            for t in entries.values() {
                registry.write(Write::Tool(ToolMeta {
                    tool_id: t.id.clone(),
                    toolkit: toolkit.name.clone(),
                    name: t.descriptor.name.clone(),
                    description: t.descriptor.description.clone(),
                    category: t.category().to_owned(),
                    backend: toolkit.backend.name().to_owned(),
                    version: toolkit.version.clone(),
                    input_schema: t.descriptor.input_schema.to_string(),
                }));
            }
        }
        next.tools.extend(entries);
        next.toolkits.insert(toolkit.name.clone(), toolkit);
        self.snapshot.store(Arc::new(next));
        self.changes.send_modify(|g| *g += 1);
        Ok(())
    }

    /// Remove toolkit `name` and its tools. Returns whether it was there.
    pub fn remove(&self, name: &str) -> bool {
        self.remove_if(name, |_| true)
    }

    /// Remove toolkit `name` if it runs on `backend` (a wasm plugin's file
    /// going away never unloads a Docker toolkit of the same name).
    pub fn remove_backend(&self, name: &str, backend: &str) -> bool {
        self.remove_if(name, |t| t.backend.name() == backend)
    }

    fn remove_if(&self, name: &str, keep_going: impl Fn(&ToolkitEntry) -> bool) -> bool {
        let _guard = self.write.lock().unwrap_or_else(|e| e.into_inner());
        let current = self.snapshot.load();
        if !current.toolkits.get(name).is_some_and(|t| keep_going(t)) {
            return false;
        }
        let mut next = Snapshot {
            tools: current.tools.clone(),
            toolkits: current.toolkits.clone(),
        };
        next.tools.retain(|_, t| t.toolkit.name != name);
        next.toolkits.remove(name);
        self.snapshot.store(Arc::new(next));
        self.changes.send_modify(|g| *g += 1);
        true
    }

    /// The tool with id `id`.
    pub fn get(&self, id: &str) -> Option<Arc<ToolEntry>> {
        self.snapshot.load().tools.get(id).cloned()
    }

    /// The tools that serve (status `active`), sorted by id: what every
    /// surface lists.
    pub fn tools(&self) -> Vec<Arc<ToolEntry>> {
        self.snapshot
            .load()
            .tools
            .values()
            .filter(|t| t.record.status().serves())
            .cloned()
            .collect()
    }

    /// Every tool whatever its status, sorted by id (admins' view).
    pub fn all_tools(&self) -> Vec<Arc<ToolEntry>> {
        self.snapshot.load().tools.values().cloned().collect()
    }

    /// Tool `id` if it is listed (status `active`): discovery by name.
    pub fn listed(&self, id: &str) -> Option<Arc<ToolEntry>> {
        self.get(id).filter(|t| t.record.status().serves())
    }

    /// The backend whose toolkit holds `name`, if one does.
    pub fn holder_of(&self, name: &str) -> Option<&'static str> {
        self.snapshot
            .load()
            .toolkits
            .get(name)
            .map(|t| t.backend.name())
    }

    /// Every toolkit, sorted by name.
    pub fn toolkits(&self) -> Vec<Arc<ToolkitEntry>> {
        self.snapshot.load().toolkits.values().cloned().collect()
    }

    /// Mark toolkit `name` as on its way in (`true`) or no longer (`false`,
    /// whether it registered or failed). Waiting calls are woken either way.
    pub fn set_pending(&self, name: &str, pending: bool) {
        let changed = {
            let mut set = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if pending {
                set.insert(name.to_owned())
            } else {
                set.remove(name)
            }
        };
        if changed && !pending {
            self.pending_done.send_modify(|g| *g += 1);
        }
    }

    /// Whether tool `id` is in the catalog or its toolkit on its way in.
    pub fn may_have(&self, id: &str) -> bool {
        self.get(id).is_some() || self.is_pending(tool::toolkit_of(id))
    }

    /// Whether toolkit `name` is on its way in.
    pub fn is_pending(&self, name: &str) -> bool {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains(name)
    }

    /// The tool `id`, waiting while its toolkit is on its way in, up to
    /// `limit`. `Err(true)`: still on its way when `limit` passed;
    /// `Err(false)`: no such tool.
    pub async fn get_or_wait(&self, id: &str, limit: Duration) -> Result<Arc<ToolEntry>, bool> {
        let toolkit = tool::toolkit_of(id);
        let mut changes = self.changes.subscribe();
        let mut done = self.pending_done.subscribe();
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(tool) = self.get(id) {
                return Ok(tool);
            }
            if !self.is_pending(toolkit) {
                return Err(false);
            }
            let woken = async {
                tokio::select! {
                    r = changes.changed() => r,
                    r = done.changed() => r,
                }
            };
            match tokio::time::timeout_at(deadline, woken).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) => return Err(false),
                Err(_) => return Err(self.is_pending(toolkit)),
            }
        }
    }

    /// A receiver that changes whenever the tool list does (for MCP
    /// `notifications/tools/list_changed` and similar).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// The record of tool id `id` (made, `active`, for a new id).
    pub fn record(&self, id: &str) -> Arc<ToolRecord> {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        records.entry(id.to_owned()).or_default().clone()
    }

    /// Save records in `registry` from now on, starting from what it held.
    /// Before any toolkit is registered.
    pub fn attach_registry(&self, registry: Arc<Registry>, saved: Saved) {
        let mut records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        let mut statuses: HashMap<String, ToolStatus> = saved.statuses.into_iter().collect();
        for (id, row) in saved.stats {
            let status = statuses.remove(&id).unwrap_or(ToolStatus::Active);
            let stats = ToolStats::restore(&row);
            records.insert(id, Arc::new(ToolRecord::new(stats, status)));
        }
        for (id, status) in statuses {
            records.insert(id, Arc::new(ToolRecord::new(ToolStats::default(), status)));
        }
        for (id, body) in saved.fallbacks {
            let record = records.entry(id).or_default();
            record.set_fallback(serde_json::from_str(&body).ok().flatten());
        }
        let _ = self.registry.set(registry);
    }

    /// The registry records are saved in, if any.
    pub fn registry(&self) -> Option<&Arc<Registry>> {
        self.registry.get()
    }

    /// Hand statistics changed since the last flush to the registry.
    pub fn flush_stats(&self) {
        let Some(registry) = self.registry.get() else {
            return;
        };
        let records: Vec<(String, Arc<ToolRecord>)> = self
            .records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(id, r)| (id.clone(), r.clone()))
            .collect();
        for (id, record) in records {
            if let Some((delta, counted)) = record.stats.delta() {
                registry.write(Write::Stats {
                    tool_id: id,
                    delta,
                    counted,
                });
            }
        }
        registry.refresh();
    }

    /// The registry's statistics totals (every replica's calls), for the
    /// tools known here.
    pub fn stored_stats(&self, rows: Vec<(String, StatsRow, Option<StatsRow>)>) {
        let records = self.records.lock().unwrap_or_else(|e| e.into_inner());
        for (id, total, counted) in rows {
            if let Some(record) = records.get(&id) {
                record.stats.stored(total, counted);
            }
        }
    }

    /// Pin the definitions of toolkits defined elsewhere from now on.
    /// Before any toolkit is registered.
    pub fn attach_pins(&self, pins: Arc<Pins>) {
        let _ = self.pins.set(pins);
    }

    /// The pinned definitions, if they are kept.
    pub fn pins(&self) -> Option<&Arc<Pins>> {
        self.pins.get()
    }

    /// Approve toolkit `toolkit`'s held definitions (those of `tools`, if
    /// given): pinned, saved and served. The ids approved.
    pub fn approve(&self, toolkit: &str, tools: Option<&[String]>) -> Vec<String> {
        let Some(pins) = self.pins.get() else {
            return Vec::new();
        };
        let approved = pins.approve(toolkit, tools);
        let ids = approved.iter().map(|(id, _)| id.clone()).collect();
        self.apply_pins(Judged {
            pinned: approved.clone(),
            restored: approved.into_iter().map(|(id, _)| id).collect(),
            staged: Vec::new(),
        });
        self.changes.send_modify(|g| *g += 1);
        ids
    }

    /// Hold, serve again and save what pinning decided.
    fn apply_pins(&self, judged: Judged) {
        for id in &judged.staged {
            let record = self.record(id);
            if record.status() != ToolStatus::Staging {
                tracing::warn!(tool = %id, "a mounted tool's definition changed or is new: held in staging until an admin approves it");
                self.save_status(id, &record, ToolStatus::Staging);
            }
        }
        for id in &judged.restored {
            let record = self.record(id);
            if record.status() == ToolStatus::Staging {
                self.save_status(id, &record, ToolStatus::Active);
            }
        }
        if let Some(registry) = self.registry.get() {
            for (id, pin) in judged.pinned {
                registry.write(Write::Pin(crate::registry::PinRow {
                    tool_id: id,
                    toolkit: pin.toolkit,
                    digest: pin.digest,
                    definition: pin.definition.to_string(),
                }));
            }
        }
    }

    fn save_status(&self, id: &str, record: &ToolRecord, status: ToolStatus) {
        record.set_status(status);
        if let Some(registry) = self.registry.get() {
            registry.write(Write::Status(id.to_owned(), status));
        }
    }

    /// Tool `id`'s status as another replica set it (already saved there):
    /// applied here, and every surface's list changes if it did.
    pub fn follow_status(&self, id: &str, status: ToolStatus) {
        let record = self.record(id);
        if record.status() != status {
            record.set_status(status);
            self.changes.send_modify(|g| *g += 1);
        }
    }

    /// Set tool `id`'s fallbacks (none: its manifest's again), saved in the
    /// registry (checked by the caller: [`crate::dispatch::Dispatcher::check_fallbacks`]).
    pub fn set_fallback(&self, id: &str, fallback: Option<Vec<String>>) {
        self.record(id).set_fallback(fallback.clone());
        if let Some(registry) = self.registry.get() {
            let body = serde_json::to_string(&fallback).unwrap_or_default();
            registry.write(Write::Fallback(id.to_owned(), body));
        }
    }

    /// Another replica set tool `id`'s fallbacks (JSON).
    pub fn follow_fallback(&self, id: &str, body: &str) {
        self.record(id)
            .set_fallback(serde_json::from_str(body).ok().flatten());
    }

    /// Set the status of tool `id` (saved, and every surface's list
    /// changes); the status it had. A status set before the tool is
    /// registered (a build task's) applies when it is.
    pub fn set_status(&self, id: &str, status: ToolStatus) -> ToolStatus {
        let record = self.record(id);
        let was = record.status();
        record.set_status(status);
        if let Some(registry) = self.registry.get() {
            registry.write(Write::Status(id.to_owned(), status));
        }
        if was != status {
            self.changes.send_modify(|g| *g += 1);
        }
        was
    }
}

#[cfg(test)]
#[path = "catalog_tests.rs"]
mod tests;
