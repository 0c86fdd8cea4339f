//! The HTTP client of a remote server's connection: reqwest's, reading one
//! more answer as the session being gone.
//!
//! A server that has forgotten a session (it restarted, or dropped it) must
//! answer 404; rmcp's transport then makes a new session (`initialize`
//! again) and sends the request once more, so the call goes through. Some
//! servers answer 400 with a JSON-RPC error that has no id instead
//! (server-everything 2026.8.31: "No valid session ID provided"); rmcp passes
//! that on as a message no request waits for, and the call would hang until
//! its time limit. Such an answer to a request sent in a session is read
//! here as the 404 it means. Either way the log says the session was made
//! again.
//!
//! A call in flight when the server goes away has its answer stream cut;
//! rmcp tries to resume it (`Last-Event-ID`) and, when it cannot, the call
//! would wait until its time limit. A resumption that fails is told to the
//! connection's calls ([`SessionAware::lost`]): they end at once with a clear
//! error.

use std::collections::HashMap;
use std::sync::Arc;

use axum::http::{HeaderName, HeaderValue};
use futures::stream::BoxStream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use sse_stream::Sse;

type Answer = Result<StreamableHttpPostResponse, StreamableHttpError<reqwest::Error>>;

/// reqwest's client for rmcp, with [`forgotten`] read as a 404, telling
/// when a cut stream cannot be resumed.
#[derive(Clone)]
pub struct SessionAware {
    client: reqwest::Client,
    /// Counts the cut streams that could not be resumed.
    lost: Arc<tokio::sync::watch::Sender<u64>>,
}

impl SessionAware {
    pub fn new(client: reqwest::Client) -> Self {
        SessionAware {
            client,
            lost: Arc::new(tokio::sync::watch::channel(0).0),
        }
    }

    /// Changes each time a cut answer stream could not be resumed: the calls
    /// waiting on the connection then will get no answer.
    pub fn lost(&self) -> tokio::sync::watch::Receiver<u64> {
        self.lost.subscribe()
    }

    /// `result` of resuming a stream after `last_event_id`: a failure is told.
    fn resumed<T, E: std::fmt::Display>(
        &self,
        uri: &str,
        resuming: bool,
        result: Result<T, E>,
    ) -> Result<T, E> {
        if let (true, Err(e)) = (resuming, &result) {
            tracing::info!(server = uri, error = %e, "MCP server: a cut answer stream cannot be resumed (did the server restart?); the calls in flight end");
            self.lost.send_modify(|n| *n += 1);
        }
        result
    }
}

/// `answer`, or the session-expired error rmcp recovers from when it is a
/// server's way of saying it does not know the session a request was sent in.
fn forgotten(uri: &str, in_session: bool, answer: Answer) -> Answer {
    match answer {
        Ok(StreamableHttpPostResponse::Json(ServerJsonRpcMessage::Error(e), _))
            if in_session && e.id.is_none() =>
        {
            tracing::info!(server = uri, error = %e.error.message, "MCP server: it does not know our session (an error without an id); making a new session");
            Err(StreamableHttpError::SessionExpired)
        }
        Err(StreamableHttpError::SessionExpired) => {
            tracing::info!(
                server = uri,
                "MCP server: our session expired (404); making a new session"
            );
            Err(StreamableHttpError::SessionExpired)
        }
        other => other,
    }
}

fn in_session(message: &ClientJsonRpcMessage, session: &Option<Arc<str>>) -> bool {
    session.is_some() && matches!(message, ClientJsonRpcMessage::Request(_))
}

impl StreamableHttpClient for SessionAware {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Answer {
        let within = in_session(&message, &session_id);
        let answer = self
            .client
            .post_message(
                uri.clone(),
                message,
                session_id,
                auth_header,
                custom_headers,
            )
            .await;
        forgotten(&uri, within, answer)
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Answer {
        let within = in_session(&message, &session_id);
        let answer = self
            .client
            .post_message_with_response_limits(
                uri.clone(),
                message,
                session_id,
                auth_header,
                custom_headers,
                limits,
            )
            .await;
        forgotten(&uri, within, answer)
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        self.client
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let resuming = session_id.is_some() && last_event_id.is_some();
        let result = self
            .client
            .get_stream(
                uri.clone(),
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
            )
            .await;
        self.resumed(&uri, resuming, result)
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, StreamableHttpError<Self::Error>> {
        let resuming = session_id.is_some() && last_event_id.is_some();
        let result = self
            .client
            .get_stream_with_max_sse_event_size(
                uri.clone(),
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await;
        self.resumed(&uri, resuming, result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, JsonRpcVersion2_0, NumberOrString};

    fn error(id: Option<NumberOrString>) -> Answer {
        Ok(StreamableHttpPostResponse::Json(
            ServerJsonRpcMessage::Error(JsonRpcError {
                jsonrpc: JsonRpcVersion2_0,
                id,
                error: ErrorData::new(ErrorCode(-32000), "Bad Request: No valid session ID", None),
            }),
            None,
        ))
    }

    #[test]
    fn an_error_without_an_id_in_a_session_means_the_session_is_gone() {
        let gone = forgotten("u", true, error(None));
        assert!(matches!(gone, Err(StreamableHttpError::SessionExpired)));
        // Outside a session (initialize), or an error answering the request:
        // passed on as it is.
        assert!(forgotten("u", false, error(None)).is_ok());
        assert!(forgotten("u", true, error(Some(NumberOrString::Number(3)))).is_ok());
    }
}
