//! `tools/list`'s tools, made once per catalog entry and kept while the
//! entry lives: a list of 10,000 tools clones them (their schemas are
//! shared) instead of turning each into JSON and back on every request
//! (docs/benchmarks.md#costs-that-stay-flat). For the lists answered
//! directly ([`super::direct`]) each tool is kept as the JSON rmcp writes of
//! it, once per protocol shape: a list is those bytes joined.

use std::sync::{Arc, LazyLock};

use rmcp::model::{ListToolsResult, ServerResult, Tool};
use serde_json::Value;

use super::tasks;
use crate::formats;
use crate::made::PerEntry;
use toolhost_core::callers::Caller;
use toolhost_core::catalog::ToolEntry;

/// Each tool's MCP tool.
static MADE: LazyLock<PerEntry<Tool>> = LazyLock::new(PerEntry::default);

/// A tool's MCP tool as JSON: as sent on 2026-07-28, and to a peer of an
/// older version (the same bytes when they do not differ).
type Written = (Arc<[u8]>, Arc<[u8]>);

static WRITTEN: LazyLock<PerEntry<Written>> = LazyLock::new(PerEntry::default);

/// The MCP tools of the `catalog` entries `who` may see, in order; an
/// entry whose definition MCP cannot carry is left out (logged).
pub fn tools_of(catalog: &[Arc<ToolEntry>], who: &Caller) -> Vec<Tool> {
    MADE.of(allowed(catalog, who).into_iter(), make)
}

/// The same tools as JSON, each written as rmcp writes it in a `tools/list`
/// result, for a `legacy` peer (a protocol version before 2026-07-28) or not.
pub fn json_of(catalog: &[Arc<ToolEntry>], who: &Caller, legacy: bool) -> Vec<Arc<[u8]>> {
    WRITTEN
        .of(allowed(catalog, who).into_iter(), write)
        .into_iter()
        .map(|(current, older)| if legacy { older } else { current })
        .collect()
}

/// The entries of `catalog` that `who`'s policy lets it see.
fn allowed<'a>(catalog: &'a [Arc<ToolEntry>], who: &Caller) -> Vec<&'a Arc<ToolEntry>> {
    catalog
        .iter()
        .filter(|t| who.policy().allows_tool(&t.id))
        .collect()
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

/// An entry's tool as JSON, and as rmcp's handler shapes it for an older
/// peer (its own rule, applied to a list of this one tool).
fn write(entry: &ToolEntry) -> Option<Written> {
    let tool = make(entry)?;
    let current: Arc<[u8]> = serde_json::to_vec(&tool).ok()?.into();
    let mut result = ServerResult::ListToolsResult(ListToolsResult::with_all_items(vec![tool]));
    result.strip_non_object_output_for_legacy_peer();
    let ServerResult::ListToolsResult(mut stripped) = result else {
        return None;
    };
    let older = serde_json::to_vec(&stripped.tools.pop()?).ok()?;
    let older = if *older == *current {
        current.clone()
    } else {
        older.into()
    };
    Some((current, older))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::made::testing::{register, tool};
    use toolhost_core::catalog::Catalog;

    /// An older peer's JSON leaves out a non-object output schema, as
    /// rmcp's handler does; an object one is kept, in the same bytes.
    #[test]
    fn older_peers_get_object_output_schemas_only() {
        let catalog = Catalog::new();
        let tools = vec![
            tool("list", "d", Some(serde_json::json!({"type": "array"}))),
            tool("obj", "d", Some(serde_json::json!({"type": "object"}))),
        ];
        register(&catalog, "", tools);
        let entries = catalog.tools();
        let anyone = Caller::anonymous();
        let parse = |b: &Arc<[u8]>| serde_json::from_slice::<Value>(b).unwrap();
        let current = json_of(&entries, &anyone, false);
        let older = json_of(&entries, &anyone, true);
        let at = |name: &str| entries.iter().position(|t| t.id.ends_with(name)).unwrap();
        let (list, obj) = (at("list"), at("obj"));
        assert_eq!(parse(&current[list])["outputSchema"]["type"], "array");
        assert!(parse(&older[list]).get("outputSchema").is_none());
        assert_eq!(parse(&older[obj])["outputSchema"]["type"], "object");
        assert!(Arc::ptr_eq(&current[obj], &older[obj]));
        // As rmcp writes the tool (`tools_of`, what its handler lists).
        assert_eq!(
            parse(&current[list]),
            serde_json::to_value(&tools_of(&entries, &anyone)[list]).unwrap()
        );
    }
}
