//! `tools/list`'s tools, made once per catalog entry and kept while the
//! entry lives: a list of 10,000 tools clones them (their schemas are
//! shared) instead of turning each into JSON and back on every request
//! (docs/benchmarks.md#costs-that-stay-flat).

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};

use rmcp::model::Tool;
use serde_json::Value;

use super::tasks;
use crate::formats;
use toolhost_core::catalog::ToolEntry;

/// An MCP tool and the entry it was made from.
type Made = (Weak<ToolEntry>, Tool);

/// Each tool id's MCP tool.
static MADE: LazyLock<Mutex<HashMap<String, Made>>> = LazyLock::new(Mutex::default);

/// The MCP tools of `entries`, in order; an entry whose definition MCP
/// cannot carry is left out (logged).
pub fn tools_of(entries: &[&Arc<ToolEntry>]) -> Vec<Tool> {
    let mut made = MADE.lock().unwrap_or_else(|e| e.into_inner());
    let tools = entries
        .iter()
        .filter_map(|entry| {
            // The same entry, alive: its address is its own.
            if let Some((from, tool)) = made.get(&entry.id)
                && from.upgrade().is_some_and(|e| Arc::ptr_eq(&e, entry))
            {
                return Some(tool.clone());
            }
            let tool = make(entry)?;
            made.insert(entry.id.clone(), (Arc::downgrade(entry), tool.clone()));
            Some(tool)
        })
        .collect();
    // Entries gone (a toolkit replaced or removed) are forgotten once they
    // outnumber the living.
    if made.len() > 2 * entries.len() + 64 {
        made.retain(|_, (from, _)| from.strong_count() > 0);
    }
    tools
}

fn make(entry: &ToolEntry) -> Option<Tool> {
    let mut listed = formats::mcp(entry);
    listed["name"] = Value::String(tasks::listed_name(entry));
    match serde_json::from_value::<Tool>(listed) {
        Ok(tool) => Some(tool),
        Err(e) => {
            tracing::warn!(tool = %entry.id, error = %e, "MCP: tool left out of tools/list");
            None
        }
    }
}
