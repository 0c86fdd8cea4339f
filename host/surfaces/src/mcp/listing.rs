//! `tools/list`'s tools, made once per catalog entry and kept while the
//! entry lives: a list of 10,000 tools clones them (their schemas are
//! shared) instead of turning each into JSON and back on every request
//! (docs/benchmarks.md#costs-that-stay-flat).

use std::sync::{Arc, LazyLock};

use rmcp::model::Tool;
use serde_json::Value;

use super::tasks;
use crate::formats;
use crate::made::PerEntry;
use toolhost_core::catalog::ToolEntry;

/// Each tool's MCP tool.
static MADE: LazyLock<PerEntry<Tool>> = LazyLock::new(PerEntry::default);

/// The MCP tools of `entries`, in order; an entry whose definition MCP
/// cannot carry is left out (logged).
pub fn tools_of(entries: &[&Arc<ToolEntry>]) -> Vec<Tool> {
    MADE.of(entries.iter().copied(), make)
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
