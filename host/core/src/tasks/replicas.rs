//! Tasks on a registry that replicas share: every replica sees every task
//! (another replica's saves come through [`Tasks::followed`]), and each
//! task is built by exactly one of them. The replica that makes a task is
//! its runner; before building, the worker holds it in the registry
//! ([`Tasks::hold`]: only if no other live replica does). A replica's
//! heartbeat is its lease: once it is gone ([`crate::registry::Replicas`])
//! the others offer its unfinished builds to their workers
//! ([`Tasks::take_over`]) and the first to hold one builds it again from
//! the start; the task's history says who took it over from whom.

use super::{Entry, Task, TaskStatus, Tasks};

impl Tasks {
    /// Whether the registry is shared by replicas.
    pub(super) fn shared(&self) -> bool {
        self.registry
            .as_ref()
            .is_some_and(|r| r.replicas().shared_scope().is_some())
    }

    /// This replica, the runner of the tasks it makes (on a shared
    /// registry).
    pub(super) fn me(&self) -> Option<String> {
        self.registry
            .as_ref()
            .filter(|_| self.shared())
            .map(|r| r.replicas().id().to_owned())
    }

    /// Task `body` as another replica saved it: taken as it is, its new
    /// events sent to whoever follows it here, and a build of it here
    /// stopped if it was cancelled there.
    pub fn followed(&self, body: &str) {
        let Ok(task) = serde_json::from_str::<Task>(body) else {
            tracing::debug!("a followed task does not parse; skipped");
            return;
        };
        let mut entries = self.lock();
        if let Some(entry) = entries.get_mut(&task.task_id) {
            for event in task.events.iter().skip(entry.task.events.len()) {
                let _ = entry.events.send(event.clone());
            }
            if task.status.is_final() && !entry.task.status.is_final() {
                entry.cancel.cancel();
            }
            entry.task = task;
            return;
        }
        let id = task.task_id.clone();
        entries.insert(id.clone(), Entry::new(task));
        drop(entries);
        self.order
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(id);
    }

    /// Task `id` forgotten by another replica.
    pub fn forgotten(&self, id: &str) {
        self.lock().remove(id);
        self.order
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|t| t != id);
    }

    /// Offer this replica's worker the unfinished builds of replicas that
    /// are gone (each once).
    pub fn take_over(&self) {
        let Some(registry) = self.registry.as_ref().filter(|_| self.shared()) else {
            return;
        };
        let replicas = registry.replicas();
        let orphaned: Vec<String> = self
            .lock()
            .values()
            .map(|e| &e.task)
            .filter(|t| {
                matches!(
                    t.status,
                    TaskStatus::Pending | TaskStatus::Building | TaskStatus::Testing
                ) && t.spec.buildable()
                    && t.runner.as_deref().is_some_and(|r| replicas.is_gone(r))
            })
            .map(|t| t.task_id.clone())
            .collect();
        let mut offered = self.offered.lock().unwrap_or_else(|e| e.into_inner());
        for id in orphaned {
            if offered.insert(id.clone()) {
                tracing::info!(task = %id, "a gone replica's task offered to this one");
                let _ = self.queue.send(id);
            }
        }
    }

    /// Whether this replica builds task `id` now: held in the registry
    /// (no other live replica holds it), and taken over if its runner was
    /// another. Always on a registry of its own.
    pub async fn hold(&self, id: &str) -> bool {
        let (Some(registry), Some(me)) = (&self.registry, self.me()) else {
            return true;
        };
        let held = registry.hold_task(id).await;
        self.offered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(id);
        let Some(task) = self.get(id) else {
            return false;
        };
        let mine = task.runner.as_deref() == Some(me.as_str());
        match held {
            Ok(true) => {}
            Ok(false) => return false,
            // The registry away: a task made here is still this replica's.
            Err(e) => {
                tracing::warn!(task = %id, error = %e, "cannot hold the task in the registry");
                if !mine {
                    return false;
                }
            }
        }
        if !mine {
            let from = task.runner.unwrap_or_default();
            self.update(id, |t| {
                t.runner = Some(me.clone());
                (
                    TaskStatus::Pending,
                    format!("taken over by replica {me} (replica {from} is gone): built again from the start"),
                )
            });
        }
        true
    }
}
