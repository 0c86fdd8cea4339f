//! Fallbacks (seed 004's `fallback_strategy`): a tool whose toolkit's
//! manifest names fallbacks (`[fallback]`, [`crate::health::declared`]) is
//! served by the first of them that can when it cannot itself: its call
//! failed for want of its backend (`backend_unavailable`, `timeout`,
//! `node_lost`), or the last health look found it `degraded` (then it is
//! not tried first, only after its fallbacks). The input goes to a fallback
//! as its schema describes it ([`crate::health::declared::map_input`]; the
//! schemas were checked to agree when the toolkit loaded); the answer names
//! the tool that served ([`super::CallOutput::served_by`]).

use std::sync::Arc;

use serde_json::Value;

use super::{CallOptions, CallOutput, Dispatcher};
use crate::catalog::ToolEntry;
use crate::health::declared::{map_input, schema_disagreement};
use crate::sessions::Session;
use crate::tool::{CallError, ErrorKind};

/// Errors that send a call on to the next fallback.
fn falls_back(kind: ErrorKind) -> bool {
    matches!(
        kind,
        ErrorKind::BackendUnavailable | ErrorKind::Timeout | ErrorKind::NodeLost
    )
}

/// Errors of a fallback that pass the call on to the next (it is not there,
/// not active, or not this caller's).
fn skips(kind: ErrorKind) -> bool {
    falls_back(kind)
        || matches!(
            kind,
            ErrorKind::NotFound | ErrorKind::NotActive | ErrorKind::Forbidden
        )
}

/// Tool `t`'s fallbacks, in order (none made, no lock taken, for a tool
/// without: the call's fast path).
fn listed(t: &ToolEntry) -> Vec<String> {
    if !t.record.has_fallback() && !t.toolkit.fallback.contains_key(&t.descriptor.name) {
        return Vec::new();
    }
    match t.record.fallback() {
        Some(set) => set.as_ref().clone(),
        None => t
            .toolkit
            .fallback
            .get(&t.descriptor.name)
            .cloned()
            .unwrap_or_default(),
    }
}

impl Dispatcher {
    /// Tool `id`'s fallbacks, in order: as set through the registry, else
    /// its manifest's.
    pub fn fallbacks_of(&self, id: &str) -> Vec<String> {
        self.catalog.get(id).map(|t| listed(&t)).unwrap_or_default()
    }

    /// Why `fallbacks` cannot be tool `id`'s, if they cannot: each must be a
    /// tool there now, not `id` itself, taking `id`'s input.
    pub fn check_fallbacks(&self, id: &str, fallbacks: &[String]) -> Result<(), String> {
        let tool = self
            .catalog
            .get(id)
            .ok_or_else(|| format!("no tool `{id}`"))?;
        for f in fallbacks {
            if f == id {
                return Err(format!("`{id}` cannot fall back to itself"));
            }
            let other = self
                .catalog
                .get(f)
                .ok_or_else(|| format!("unknown fallback `{f}`: no such tool"))?;
            if let Some(why) = schema_disagreement(
                &tool.descriptor.input_schema,
                &other.descriptor.input_schema,
            ) {
                return Err(format!("`{f}` cannot take `{id}`'s input: {why}"));
            }
        }
        Ok(())
    }

    /// Run tool `tool_id` on `input` for `session`; when it cannot serve,
    /// its fallbacks in order.
    pub async fn dispatch(
        &self,
        session: &Arc<Session>,
        tool_id: &str,
        input: Value,
        options: CallOptions,
    ) -> Result<CallOutput, CallError> {
        let tool = match options.no_fallback {
            true => None,
            false => self.catalog.get(tool_id),
        };
        let fallbacks = tool.as_deref().map(listed).unwrap_or_default();
        let Some(tool) = tool.filter(|_| !fallbacks.is_empty()) else {
            return self.dispatch_one(session, tool_id, input, options).await;
        };
        let degraded = tool.record.is_degraded();
        let mut failed = None;
        if !degraded {
            match self
                .dispatch_one(session, tool_id, input.clone(), options.clone())
                .await
            {
                Err(e) if falls_back(e.kind()) => failed = Some(e),
                done => return done,
            }
        }
        for id in &fallbacks {
            let Some(other) = self.catalog.get(id).filter(|t| !t.record.is_degraded()) else {
                continue;
            };
            // Checked when the toolkit loaded, if the fallback was there then.
            if let Some(why) = schema_disagreement(
                &tool.descriptor.input_schema,
                &other.descriptor.input_schema,
            ) {
                tracing::warn!(tool = tool_id, fallback = %id, %why, "a fallback that cannot take the tool's input is skipped");
                continue;
            }
            let mapped = map_input(&input, &other.descriptor.input_schema);
            let options = CallOptions {
                no_fallback: true,
                ..options.clone()
            };
            match self.dispatch_one(session, id, mapped, options).await {
                Ok(mut out) => {
                    tracing::info!(tool = tool_id, served_by = %id, degraded, "a fallback served the call");
                    out.served_by = Some(id.clone());
                    return Ok(out);
                }
                Err(e) if skips(e.kind()) => {
                    tracing::info!(tool = tool_id, fallback = %id, kind = %e.kind(), "the fallback could not serve either");
                }
                Err(e) => return Err(e),
            }
        }
        match failed {
            Some(e) => Err(e),
            // Degraded, and no fallback could serve: the tool itself.
            None => self.dispatch_one(session, tool_id, input, options).await,
        }
    }
}
