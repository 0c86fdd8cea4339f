//! The MCP backend's side of the backend contract: loading a toolkit's
//! manifest, its server's problems and checks, restarts, and sessions'
//! servers released with their sessions.

use std::time::Duration;

use super::{FLOOD_SHOWN, LIST_CHANGED_EVERY, McpBackend, STABLE};
use crate::backend::{Backend, BackendFuture, EntryFile, Loaded, Refresh};

impl Backend for McpBackend {
    fn name(&self) -> &'static str {
        "mcp"
    }

    fn folder_kind(&self) -> Option<&'static str> {
        Some("mcp")
    }

    fn load<'a>(
        &'a self,
        name: &'a str,
        files: Vec<EntryFile>,
        _report: &'a (dyn Fn(&'static str) + Sync),
    ) -> BackendFuture<'a, Result<Loaded, String>> {
        Box::pin(async move { self.load_manifest(name, &files).await })
    }

    fn unloaded(&self, name: &str, replaced: bool) {
        if !replaced && let Some((_, conn)) = self.lock().remove(name) {
            conn.service.cancellation_token().cancel();
        }
        // Sessions' servers of the old version go; the next call makes new ones.
        if let Some(me) = self.me.upgrade() {
            let name = name.to_owned();
            tokio::spawn(async move { me.close_sessions(|(toolkit, _)| *toolkit == name).await });
        }
    }

    fn problem(&self, name: &str) -> Option<crate::backend::Problem> {
        let restarts = self.restarts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((count, why, at)) = restarts.get(name)
            && *count > 0
            && at.elapsed() < STABLE
        {
            return Some(crate::backend::Problem::unavailable(format!(
                "degraded: its server exited and was restarted {count} time(s) in a row (last words: {why})"
            )));
        }
        drop(restarts);
        let floods = self.floods.lock().unwrap_or_else(|e| e.into_inner());
        let (count, at) = floods.get(name)?;
        (at.elapsed() < FLOOD_SHOWN).then(|| {
            crate::backend::Problem::unavailable(format!(
                "degraded: its server sent {count} tools/list_changed notifications within {} ms; \
                 toolhost reloads its tool list at most once per {} ms (calls are served)",
                LIST_CHANGED_EVERY.as_millis(),
                LIST_CHANGED_EVERY.as_millis()
            ))
        })
    }

    fn probe<'a>(&'a self, name: &'a str) -> BackendFuture<'a, Option<crate::backend::Checked>> {
        Box::pin(async move {
            let conn = self.lock().get(name).map(|(_, c)| c.clone())?;
            let (ok, detail) = if !conn.is_usable() {
                (false, "its server's connection is gone".to_owned())
            } else {
                let ping = rmcp::model::ClientRequest::PingRequest(Default::default());
                let asked = conn.service.peer().send_request(ping);
                match tokio::time::timeout(Duration::from_secs(5), asked).await {
                    Ok(Ok(_)) => (true, "ping answered".to_owned()),
                    Ok(Err(e)) => (false, format!("ping failed: {e}")),
                    Err(_) => (false, "ping not answered within 5 s".to_owned()),
                }
            };
            Some(crate::backend::Checked {
                ok,
                detail,
                container_id: conn.container_id(),
            })
        })
    }

    fn restart(&self, name: &str) {
        // Reloaded with a new connection (not counted as the server's own
        // restart: it did not exit).
        if let Some((_, conn)) = self.lock().remove(name) {
            conn.broken
                .store(true, std::sync::atomic::Ordering::Release);
            conn.service.cancellation_token().cancel();
            if let Some(refresh) = self.refresh.get() {
                refresh.entry(name);
            }
        }
    }

    fn attach(&self, refresh: Refresh) {
        let _ = self.refresh.set(refresh);
    }

    fn shutdown(&self) -> BackendFuture<'_, ()> {
        Box::pin(async move {
            let all: Vec<_> = self.lock().drain().map(|(_, (_, c))| c).collect();
            futures::future::join_all(all.iter().map(|c| c.close())).await;
            self.close_sessions(|_| true).await;
        })
    }
}

impl crate::sessions::SessionResources for McpBackend {
    fn release_session(
        &self,
        id: &str,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + '_>> {
        let id = id.to_owned();
        Box::pin(async move { self.close_sessions(|(_, session)| *session == id).await })
    }
}
