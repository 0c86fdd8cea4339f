//! Direct answers to plain `tools/list` requests: the list is each allowed
//! tool's JSON as rmcp writes it, made once per catalog entry
//! ([`super::super::listing`]), joined into rmcp's own answer to an empty
//! list, shaped for the protocol version as rmcp's handler shapes it. rmcp
//! serialized every tool of every list again (46-52 us a tool; 46 ms for
//! 1,000 tools, docs/benchmarks.md#costs-that-stay-flat).
//!
//! Answered here: an unpaged list (no cursor), with the checks of the
//! direct calls ([`Direct::meta_ok`]); a stateless request must name
//! `tools/list` in `Mcp-Method` and carry no `Mcp-Name`. Anything else is
//! rmcp's, which answers errors.

use axum::http::request::Parts;
use axum::response::Response;
use rmcp::model::{
    JsonRpcVersion2_0, ListToolsRequestMethod, ListToolsResult, PaginatedRequestParams, RequestId,
    ServerJsonRpcMessage, ServerResult,
};

use super::answer::json_bytes;
use super::{Direct, MCP_METHOD, MCP_NAME, Mode, single};
use crate::made;
use crate::mcp::listing;

/// A JSON-RPC `tools/list` request, of rmcp's types.
#[derive(serde::Deserialize)]
pub(super) struct ListMessage {
    #[expect(dead_code, reason = "checked by its type")]
    jsonrpc: JsonRpcVersion2_0,
    id: RequestId,
    #[expect(dead_code, reason = "checked by its type")]
    method: ListToolsRequestMethod,
    #[serde(default)]
    params: Option<PaginatedRequestParams>,
}

/// Where rmcp's answer to an empty list holds its tools.
const EMPTY_TOOLS: &[u8] = b"\"tools\":[]";

impl Direct {
    /// The answer to `message`, if it is one to answer here.
    pub(super) fn list(
        &self,
        parts: &Parts,
        message: ListMessage,
        mode: &Mode,
    ) -> Option<Response> {
        let params = message.params.unwrap_or_default();
        if params.cursor.is_some() || !self.meta_ok(params.meta.as_ref(), mode) {
            return None;
        }
        if matches!(mode, Mode::Stateless)
            && (single(&parts.headers, &MCP_METHOD) != Some("tools/list")
                || parts.headers.contains_key(&MCP_NAME))
        {
            return None;
        }
        let legacy = matches!(mode, Mode::Session(_));
        let who = crate::auth::caller_of(&parts.extensions);
        let catalog = self.state.dispatcher.catalog().tools();
        let pieces = listing::json_of(&catalog, &who, legacy);
        let mut result = ServerResult::ListToolsResult(ListToolsResult::with_all_items(vec![]));
        if legacy {
            result.strip_result_type_for_legacy_peer();
        } else {
            result.fill_missing_cache_hints();
        }
        let empty = serde_json::to_vec(&ServerJsonRpcMessage::response(result, message.id)).ok()?;
        Some(json_bytes(splice(&empty, &pieces)?))
    }
}

/// `answer`, its empty list of tools replaced by `pieces` joined. A JSON
/// string cannot hold [`EMPTY_TOOLS`] (its quotes would be escaped), so the
/// one place is the result's `tools`.
fn splice(answer: &[u8], pieces: &[std::sync::Arc<[u8]>]) -> Option<Vec<u8>> {
    let at = answer
        .windows(EMPTY_TOOLS.len())
        .rposition(|w| w == EMPTY_TOOLS)?;
    let open = at + EMPTY_TOOLS.len() - 2; // at `[]`
    let mut body = Vec::with_capacity(answer.len() - 2 + made::joined_len(pieces));
    body.extend_from_slice(&answer[..open]);
    made::join_into(&mut body, pieces);
    body.extend_from_slice(&answer[open + 2..]);
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_pieces_go_where_the_empty_list_was() {
        let answer = br#"{"jsonrpc":"2.0","id":"\"tools\":[]","result":{"tools":[],"ttlMs":0}}"#;
        let pieces: Vec<Arc<[u8]>> = vec![Arc::from(&b"{\"a\":1}"[..]), Arc::from(&b"{}"[..])];
        let body = splice(answer, &pieces).unwrap();
        let value: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            value,
            serde_json::json!({"jsonrpc": "2.0", "id": "\"tools\":[]",
                               "result": {"tools": [{"a": 1}, {}], "ttlMs": 0}})
        );
        assert_eq!(body.capacity(), body.len());
        assert!(splice(br#"{"result":{}}"#, &pieces).is_none());
    }
}
