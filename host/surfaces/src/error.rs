//! One error type for every native route: a status per kind, a JSON body in the
//! shape of a failed invoke, details logged rather than leaked.

use axum::Json;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use toolhost_core::tool::{CallError, ErrorKind};

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub kind: &'static str,
    pub message: String,
    pub details: Vec<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            kind,
            message: message.into(),
            details: Vec::new(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid_input", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// The JSON body: `{"status":"error","result":null,"error":{...}}`.
    pub fn body(&self) -> serde_json::Value {
        let mut error = json!({"kind": self.kind, "message": self.message});
        if !self.details.is_empty() {
            error["details"] = json!(self.details);
        }
        json!({"status": "error", "result": null, "error": error})
    }
}

/// The HTTP status of each call error kind ([`ErrorKind::status`]).
pub fn status_of(kind: ErrorKind) -> StatusCode {
    StatusCode::from_u16(kind.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// The one rendering of a call error for clients, used by every surface
/// (native, XAgent, MCP), which only reshape it: the kind, the message (an
/// internal error's detail, such as a path or an engine message, is logged
/// and never sent), the schema violations, and the native status.
impl From<CallError> for ApiError {
    fn from(e: CallError) -> Self {
        let kind = e.kind();
        let message = match &e {
            CallError::Internal(detail) => {
                tracing::error!(error = %detail, "internal error");
                "internal error; see the server log".to_owned()
            }
            other => other.to_string(),
        };
        let details = match e {
            CallError::InvalidInput { details, .. } => details,
            _ => Vec::new(),
        };
        ApiError {
            status: status_of(kind),
            kind: kind.as_str(),
            message,
            details,
        }
    }
}

/// A session that cannot be opened, for clients of every surface: a bad id
/// is the caller's (400), too many sessions a retry later (503), a workspace
/// that cannot be made the server's (500, detail logged).
impl From<toolhost_core::sessions::SessionError> for ApiError {
    fn from(e: toolhost_core::sessions::SessionError) -> Self {
        use toolhost_core::sessions::SessionError;
        match e {
            SessionError::InvalidId => ApiError::bad_request(e.to_string()),
            SessionError::TooMany(_) => {
                ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "overloaded", e.to_string())
            }
            SessionError::CallerTooMany(_) => ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                "quota_exceeded",
                e.to_string(),
            ),
            SessionError::Workspace(_) => CallError::Internal(e.to_string()).into(),
            SessionError::Unknown(_) => ApiError::not_found(e.to_string()),
        }
    }
}

impl ApiError {
    /// The message with the kind in front and one schema violation a line
    /// when there are several (`[invalid_input] ...`), for surfaces that
    /// carry errors as text (MCP).
    pub fn text(&self) -> String {
        let mut text = format!("[{}] {}", self.kind, self.message);
        if self.details.len() > 1 {
            for d in &self.details {
                text.push_str("\n- ");
                text.push_str(d);
            }
        }
        text
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut response = (self.status, Json(self.body())).into_response();
        if self.status == StatusCode::TOO_MANY_REQUESTS
            || self.status == StatusCode::SERVICE_UNAVAILABLE
        {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        // A body over the limit or too slow was left unread: the connection
        // is closed after this answer, and the client is told so, lest it
        // send its next request on it (reqwest's pool did, and got
        // `IncompleteMessage`).
        if self.status == StatusCode::PAYLOAD_TOO_LARGE
            || self.status == StatusCode::REQUEST_TIMEOUT
        {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_of_unread_bodies_close_the_connection() {
        for (status, close) in [
            (StatusCode::PAYLOAD_TOO_LARGE, true),
            (StatusCode::REQUEST_TIMEOUT, true),
            (StatusCode::UNPROCESSABLE_ENTITY, false),
        ] {
            let r = ApiError::new(status, "invalid_input", "x").into_response();
            assert_eq!(
                r.headers()
                    .get(header::CONNECTION)
                    .is_some_and(|v| v == "close"),
                close,
                "{status}"
            );
        }
    }

    #[test]
    fn internal_details_are_never_rendered() {
        let e = ApiError::from(CallError::Internal("/srv/data/x: engine said y".into()));
        assert_eq!(e.status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(e.kind, "internal");
        assert!(!e.message.contains("/srv"), "{}", e.message);
        assert!(!e.text().contains("engine said"), "{}", e.text());
        let e = ApiError::from(CallError::InvalidInput {
            message: "bad".into(),
            details: vec!["/a: x".into(), "/b: y".into()],
        });
        assert_eq!(e.text(), "[invalid_input] bad\n- /a: x\n- /b: y");
    }
}
