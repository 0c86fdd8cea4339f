//! The tool registry: what the catalog knows of each tool id beyond its
//! current toolkit (its status in the lifecycle and its call statistics),
//! kept in an embedded SQLite database under the data directory so it
//! survives restarts and crashes.
//!
//! The call path only touches atomics ([`ToolStats::record`]); a flusher
//! task hands changed statistics to the writer thread every
//! `[registry] flush_ms`, which commits what has queued in one transaction
//! ([`store`]). A status change is written before it is acknowledged.

pub mod replicas;
pub mod stats;
pub mod store;
mod writer;

use std::path::Path;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Mutex, mpsc};

use serde::{Deserialize, Serialize};

pub use replicas::Replicas;
pub use stats::{StatsRow, StatsView, ToolStats};
use store::Store;
pub use store::{AuditRow, Followed, PinRow, Saved, StoreError, ToolMeta, Write};
use writer::Job;
pub use writer::StatsHook;

/// Where a tool is in its lifecycle: `building → staging → active ⇄
/// inactive`. Only active tools are listed and callable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolStatus {
    /// Being built by a task: not served yet.
    Building,
    /// Loaded, being tested: hidden, calls refused.
    Staging,
    Active,
    /// Taken out of service by an admin: hidden, calls refused.
    Inactive,
}

impl ToolStatus {
    pub const ALL: [ToolStatus; 4] = [
        ToolStatus::Building,
        ToolStatus::Staging,
        ToolStatus::Active,
        ToolStatus::Inactive,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Building => "building",
            ToolStatus::Staging => "staging",
            ToolStatus::Active => "active",
            ToolStatus::Inactive => "inactive",
        }
    }

    pub fn parse(s: &str) -> Option<ToolStatus> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Whether a tool of this status is listed and callable.
    pub fn serves(self) -> bool {
        self == ToolStatus::Active
    }

    /// Whether an admin may move a tool from this status to `to` (the same
    /// status is a no-op; `building` is the builder's to leave).
    pub fn may_become(self, to: ToolStatus) -> bool {
        use ToolStatus::*;
        self == to
            || matches!(
                (self, to),
                (Staging, Active) | (Staging, Inactive) | (Active, Inactive) | (Inactive, Active)
            )
    }

    fn from_u8(n: u8) -> ToolStatus {
        Self::ALL
            .get(n as usize)
            .copied()
            .unwrap_or(ToolStatus::Active)
    }

    fn to_u8(self) -> u8 {
        Self::ALL.iter().position(|s| *s == self).unwrap_or(2) as u8
    }
}

/// What the catalog keeps of a tool id across its toolkit's versions.
pub struct ToolRecord {
    pub stats: ToolStats,
    status: AtomicU8,
    /// The last health look found it degraded ([`crate::health`]): its
    /// calls go to its fallbacks first.
    degraded: std::sync::atomic::AtomicBool,
    /// Its fallbacks as set through the registry (`PUT
    /// /tools/{id}/fallback`); none: its manifest's.
    fallback: arc_swap::ArcSwapOption<Vec<String>>,
}

impl Default for ToolRecord {
    fn default() -> Self {
        ToolRecord::new(ToolStats::default(), ToolStatus::Active)
    }
}

impl ToolRecord {
    pub fn new(stats: ToolStats, status: ToolStatus) -> Self {
        ToolRecord {
            stats,
            status: AtomicU8::new(status.to_u8()),
            degraded: Default::default(),
            fallback: Default::default(),
        }
    }

    /// Its fallbacks as set through the registry, if they were (read on
    /// every call: no lock).
    pub fn fallback(&self) -> Option<Arc<Vec<String>>> {
        self.fallback.load_full()
    }

    /// Whether fallbacks were set through the registry, and some.
    pub fn has_fallback(&self) -> bool {
        self.fallback.load().as_ref().is_some_and(|f| !f.is_empty())
    }

    pub(crate) fn set_fallback(&self, fallback: Option<Vec<String>>) {
        self.fallback.store(fallback.map(Arc::new));
    }

    pub fn is_degraded(&self) -> bool {
        self.degraded.load(Ordering::Relaxed)
    }

    pub(crate) fn set_degraded(&self, degraded: bool) {
        self.degraded.store(degraded, Ordering::Relaxed);
    }

    pub fn status(&self) -> ToolStatus {
        ToolStatus::from_u8(self.status.load(Ordering::Relaxed))
    }

    pub(crate) fn set_status(&self, status: ToolStatus) {
        self.status.store(status.to_u8(), Ordering::Relaxed);
    }
}

/// The registry database's writer. Dropping it commits what is queued and
/// closes the file.
pub struct Registry {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    writer: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// On PostgreSQL: where the other replicas' changes are followed
    /// (url, password).
    shared: Option<(String, Option<String>)>,
    stats_hook: Arc<Mutex<Option<StatsHook>>>,
    replicas: Arc<Replicas>,
}

impl Registry {
    /// Open `<data>/registry.db` and what it holds.
    pub fn open(data: &Path) -> Result<(Arc<Registry>, Saved), StoreError> {
        Self::open_with(data, &RegistryConfig::default(), &Default::default())
    }

    /// Open the registry `config` names (its `url`, else
    /// `<data>/registry.db`) and what it holds.
    pub fn open_with(
        data: &Path,
        config: &RegistryConfig,
        secrets: &crate::credentials::Secrets,
    ) -> Result<(Arc<Registry>, Saved), StoreError> {
        let mut replicas = Replicas::alone();
        let mut shared = None;
        let (store, saved, path) = match &config.url {
            Some(url) => {
                let password = match &config.password_secret {
                    Some(name) => Some(
                        secrets
                            .get(name)
                            .map_err(|e| StoreError::Open(store::postgres_shown(url), e))?,
                    ),
                    None => None,
                };
                let shown = store::postgres_shown(url);
                replicas = Replicas::shared(&shown);
                let replica = replicas.id().to_owned();
                shared = Some((url.clone(), password.clone()));
                // The synchronous client runs a runtime of its own: opened
                // off any async runtime, on a thread of its own.
                let url = url.clone();
                let at = shown.clone();
                let opened = std::thread::spawn(move || {
                    let mut store = Store::Postgres(Box::new(store::PostgresStore::open(
                        &url,
                        password.as_deref(),
                        &replica,
                    )?));
                    let saved = store.load().map_err(|e| StoreError::Open(at, e))?;
                    Ok::<_, StoreError>((store, saved))
                })
                .join()
                .map_err(|_| {
                    StoreError::Open(shown.clone(), "the opening thread failed".into())
                })??;
                (opened.0, opened.1, shown)
            }
            None => {
                let path = data.join("registry.db");
                let shown = path.display().to_string();
                let mut store = Store::Sqlite(store::SqliteStore::open(&path)?);
                let saved = store
                    .load()
                    .map_err(|e| StoreError::Corrupt(shown.clone(), e))?;
                (store, saved, shown)
            }
        };
        let (tx, rx) = mpsc::channel::<Job>();
        let stats_hook = Arc::new(Mutex::new(None));
        let hook = stats_hook.clone();
        let replicas = Arc::new(replicas);
        let alive = replicas.clone();
        let writer = std::thread::Builder::new()
            .name("toolhost-registry".into())
            .spawn(move || writer::run(store, rx, hook, alive))
            .map_err(|e| StoreError::Open(path.clone(), e.to_string()))?;
        Ok((
            Arc::new(Registry {
                jobs: Mutex::new(Some(tx)),
                writer: Mutex::new(Some(writer)),
                shared,
                stats_hook,
                replicas,
            }),
            saved,
        ))
    }

    /// Follow the changes other replicas make (on PostgreSQL; a private
    /// SQLite file has none): `on` for each status change and task saved or
    /// forgotten, within about a second of its commit, and for every saved
    /// status and task whenever the database connection is made again.
    pub fn follow(&self, on: impl Fn(Followed) + Send + 'static) {
        if let Some((url, password)) = self.shared.clone()
            && let Err(e) =
                store::follow(url, password, self.replicas.id().to_owned(), Box::new(on))
        {
            tracing::error!("cannot follow the other replicas: {e}");
        }
    }

    /// Hold task `id` for this process: whether no other live replica holds
    /// it (then this one does).
    pub async fn hold_task(&self, id: &str) -> Result<bool, String> {
        let id = id.to_owned();
        self.read(move |store| store.hold_task(&id)).await
    }

    /// Add an entry to the audit log (written with the next commit; kept
    /// and tried again while the database is away).
    pub fn audit(&self, actor: &str, action: &str, args: serde_json::Value, outcome: &str) {
        self.write(Write::Audit(AuditRow {
            at: crate::tasks::now_ms() as i64,
            replica: self.replicas.id().to_owned(),
            actor: actor.to_owned(),
            action: action.to_owned(),
            args,
            outcome: outcome.to_owned(),
        }));
    }

    /// The latest `limit` entries of the audit log (every replica's on a
    /// shared database), newest first, once what is queued is written.
    pub async fn audit_log(&self, limit: usize) -> Result<Vec<AuditRow>, String> {
        self.read(move |store| store.audit_log(limit)).await
    }

    /// Run `f` on the store once what is queued before is written.
    async fn read<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, String> + Send + 'static,
    ) -> Result<T, String> {
        self.ask(|reply| {
            Job::Read(Box::new(move |store: Result<&mut Store, &str>| {
                let _ = reply.send(store.map_err(str::to_owned).and_then(f));
            }))
        })
        .await
    }

    /// Send the job `make` gives the reply channel of, and wait for its
    /// answer.
    async fn ask<T>(
        &self,
        make: impl FnOnce(tokio::sync::oneshot::Sender<Result<T, String>>) -> Job,
    ) -> Result<T, String> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        if !self.send(make(tx)) {
            return Err("the registry is closed".into());
        }
        rx.await
            .unwrap_or_else(|_| Err("the registry writer stopped".into()))
    }

    /// This process among the replicas sharing the registry.
    pub fn replicas(&self) -> &Arc<Replicas> {
        &self.replicas
    }

    /// Give the statistics totals to `hook` after each commit that added
    /// to them and, on a shared database, at each [`Registry::refresh`].
    pub fn on_stats(&self, hook: StatsHook) {
        *self.stats_hook.lock().unwrap_or_else(|e| e.into_inner()) = Some(hook);
    }

    /// Read the statistics totals again (other replicas add to them).
    pub fn refresh(&self) {
        self.send(Job::Refresh);
    }

    fn send(&self, job: Job) -> bool {
        let jobs = self.jobs.lock().unwrap_or_else(|e| e.into_inner());
        jobs.as_ref().is_some_and(|tx| tx.send(job).is_ok())
    }

    /// Queue `write`; never waits.
    pub fn write(&self, write: Write) {
        self.send(Job::Write(write));
    }

    /// Wait until everything queued so far is on disk.
    pub async fn sync(&self) -> Result<(), String> {
        self.ask(Job::Sync).await
    }

    /// Commit what is queued and close the file (at shutdown).
    pub fn close(&self) {
        drop(self.jobs.lock().unwrap_or_else(|e| e.into_inner()).take());
        if let Some(writer) = self.writer.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = writer.join();
        }
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.close();
    }
}

/// The tool registry: `<data>/registry.db`, or the PostgreSQL database of
/// `url` (`postgres://user:password@host:port/db`; replicas share it).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistryConfig {
    /// How often changed call statistics are written, ms: what a crash can
    /// lose at most. Statuses are written before they are acknowledged.
    pub flush_ms: u64,
    /// A PostgreSQL database instead of the embedded SQLite file; TLS with
    /// `?sslmode=require` (and `&sslrootcert=<PEM>` for a private CA).
    pub url: Option<String>,
    /// The secret holding its password (`[secrets]`, else
    /// `TOOLHOST_SECRET_<name>`), so the URL needs none.
    pub password_secret: Option<String>,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            flush_ms: 1000,
            url: None,
            password_secret: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admins_move_tools_along_the_lifecycle_only() {
        use ToolStatus::*;
        assert!(Active.may_become(Inactive) && Inactive.may_become(Active));
        assert!(Staging.may_become(Active));
        assert!(!Active.may_become(Staging) && !Active.may_become(Building));
        assert!(!Building.may_become(Active));
        for s in ToolStatus::ALL {
            assert_eq!(ToolStatus::parse(s.as_str()), Some(s));
            assert_eq!(ToolStatus::from_u8(s.to_u8()), s);
        }
        assert_eq!(ToolStatus::parse("retired"), None);
    }

    #[tokio::test]
    async fn queued_writes_are_on_disk_after_sync_and_after_close() {
        let dir = tempfile::tempdir().unwrap();
        let (registry, saved) = Registry::open(dir.path()).unwrap();
        assert!(saved.statuses.is_empty());
        registry.write(Write::Status("a_b".into(), ToolStatus::Inactive));
        registry.sync().await.unwrap();
        registry.write(Write::Status("a_c".into(), ToolStatus::Staging));
        drop(registry);
        let (_registry, saved) = Registry::open(dir.path()).unwrap();
        let mut statuses = saved.statuses;
        statuses.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            statuses,
            vec![
                ("a_b".to_owned(), ToolStatus::Inactive),
                ("a_c".to_owned(), ToolStatus::Staging)
            ]
        );
    }
}
