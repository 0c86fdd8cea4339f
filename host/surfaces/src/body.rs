//! A JSON body extractor whose every failure is an [`ApiError`] in our shape:
//! 413 over the size limit, 400 for malformed JSON, 422 for a wrong shape.
//! A body typed as anything but JSON is refused (415): `text/plain` and form
//! bodies are what a web page may send to any server without asking first
//! (see [`super::guard`]). An untyped body is read as JSON.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use futures::StreamExt;
use serde::de::DeserializeOwned;

use super::error::ApiError;

pub struct JsonBody<T>(pub T);

impl<S, T> FromRequest<S> for JsonBody<T>
where
    S: Send + Sync,
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        json_typed(req.headers())?;
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(|rejection| read_error(rejection.status(), &rejection))?;
        parse(&bytes).map(JsonBody)
    }
}

/// Refuse a body whose `Content-Type` is given and is not JSON
/// (`application/json`, or any `…/…+json`): 415.
pub fn json_typed(headers: &axum::http::HeaderMap) -> Result<(), ApiError> {
    let Some(value) = headers.get(axum::http::header::CONTENT_TYPE) else {
        return Ok(());
    };
    let essence = value
        .to_str()
        .unwrap_or_default()
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    if essence == "application/json" || (essence.contains('/') && essence.ends_with("+json")) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "invalid_input",
        format!(
            "the request body must be JSON: send `Content-Type: application/json` (got `{}`)",
            value.to_str().unwrap_or("?")
        ),
    ))
}

/// `response` to a request refused before its body was read: with
/// `Connection: close` when it has one, so that a client does not send its
/// next request on a connection the server will not read on.
pub fn close_unread(request: &axum::http::HeaderMap, mut response: Response) -> Response {
    use axum::http::{HeaderValue, header};
    let has_body = request
        .get(header::CONTENT_LENGTH)
        .is_some_and(|v| v.as_bytes() != b"0")
        || request.contains_key(header::TRANSFER_ENCODING);
    if has_body {
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
    }
    response
}

/// A whole body of at most `limit` bytes, its failures as [`JsonBody`]'s.
pub async fn read_bytes(body: Body, limit: usize) -> Result<Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let status = if caused_by::<http_body_util::LengthLimitError>(&e) {
            StatusCode::PAYLOAD_TOO_LARGE
        } else {
            StatusCode::BAD_REQUEST
        };
        read_error(status, &e)
    })
}

/// A body that could not be read: 408 when its time ran out, 413 over the
/// size limit, else `status`.
fn read_error(status: StatusCode, error: &(dyn std::error::Error + 'static)) -> ApiError {
    if is_deadline(error) {
        ApiError::new(
            StatusCode::REQUEST_TIMEOUT,
            "invalid_input",
            "the request body did not arrive in time",
        )
    } else if status == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            status,
            "invalid_input",
            "the request body is over the size limit",
        )
    } else {
        ApiError::new(
            status,
            "invalid_input",
            format!("cannot read the request body: {error}"),
        )
    }
}

/// The error a body gives when its time is up.
#[derive(Debug)]
struct BodyDeadline(Duration);

impl std::fmt::Display for BodyDeadline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the request body took longer than {} ms",
            self.0.as_millis()
        )
    }
}

impl std::error::Error for BodyDeadline {}

fn is_deadline(error: &(dyn std::error::Error + 'static)) -> bool {
    caused_by::<BodyDeadline>(error)
}

/// Whether `error`, or an error in its chain of sources, is an `E`.
fn caused_by<E: std::error::Error + 'static>(error: &(dyn std::error::Error + 'static)) -> bool {
    let mut next = Some(error);
    while let Some(e) = next {
        if e.is::<E>() {
            return true;
        }
        next = e.source();
    }
    false
}

/// The `Content-Length` of a request that declares more than `max` bytes,
/// which is then refused without being handled ([`refuse_declared`]): its
/// body is never buffered, and a client declaring a gigabyte and sending
/// nothing is not waited for until `body_timeout_ms`. The upload routes
/// (`PUT /plugins/{name}`, XAgent's `/upload_file`, `PUT
/// /sessions/{id}/files/{path}`) have larger limits of their own and check
/// them themselves.
pub fn declared_over(request: &Request, max: usize) -> Option<u64> {
    use axum::http::header;
    let declared = request
        .headers()
        .get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .parse::<u64>()
        .ok()?;
    if declared <= max as u64 {
        return None;
    }
    let path = request.uri().path();
    let upload = path.starts_with("/plugins/")
        || path == "/upload_file"
        || (request.method() == axum::http::Method::PUT
            && path.starts_with("/sessions/")
            && path.contains("/files/"));
    (!upload).then_some(declared)
}

/// The refusal of a request [`declared_over`] `max` (413, and the
/// connection closed).
///
/// Before the answer, what the client is sending is read and dropped for a
/// short while ([`linger`]): a server that closes on a client still writing
/// makes the client's write fail (a broken pipe, a reset) before it reads
/// the 413, and the client sees a network error instead of the reason
/// (RFC 9112 §9.6).
pub async fn refuse_declared(request: Request, declared: u64, max: usize) -> Response {
    let (parts, body) = request.into_parts();
    linger(body, LINGER_BYTES, LINGER_TIME).await;
    close_unread(
        &parts.headers,
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_input",
            format!(
                "the request body is {declared} bytes, over the limit of {max} (`[server] max_body_kb`)"
            ),
        )
        .into_response(),
    )
}

/// How much of a refused body is read and dropped before the answer.
const LINGER_BYTES: u64 = 16 << 20;
/// How long a refused body is read and dropped before the answer.
const LINGER_TIME: Duration = Duration::from_secs(1);

/// Read and drop `body` until it ends, `bytes` were read or `time` passed,
/// whichever comes first; returns what was read. Memory stays at one chunk.
async fn linger(body: Body, bytes: u64, time: Duration) -> u64 {
    linger_rest(&mut body.into_data_stream(), bytes, time).await
}

/// Read and drop what is left of a refused body, as [`linger`] does, before
/// its refusal is sent (with `Connection: close`, [`close_unread`]).
pub async fn drain_refused(chunks: &mut axum::body::BodyDataStream) {
    linger_rest(chunks, LINGER_BYTES, LINGER_TIME).await;
}

async fn linger_rest(chunks: &mut axum::body::BodyDataStream, bytes: u64, time: Duration) -> u64 {
    let mut read = 0u64;
    let _ = tokio::time::timeout(time, async {
        while read < bytes {
            match chunks.next().await {
                Some(Ok(chunk)) => read += chunk.len() as u64,
                _ => break,
            }
        }
    })
    .await;
    read
}

/// Whether `request` is of a method whose routes read no body (`GET`,
/// `HEAD`, `DELETE`, `OPTIONS`) and brings one anyway, or one of unknown
/// length (chunked): see [`read_unasked`].
pub fn brings_unasked(request: &Request) -> bool {
    use axum::body::HttpBody as _;
    use axum::http::Method;
    matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::DELETE | Method::OPTIONS
    ) && !request.body().is_end_stream()
}

/// `request` with its body read whole first ([`brings_unasked`]), at most
/// `max` bytes and within its deadline ([`with_deadline`]): else the
/// refusal. A route that answers without reading a body makes hyper close
/// the connection under its answer when the body has not ended yet, and a
/// client still sending it (hyper's own client: a `DELETE` whose empty body
/// is chunked and ends a moment later, as plugins built with the SDK before
/// 2026-11-30 sent) loses the answer (`IncompleteMessage`). Read first, the
/// answer comes after the body's end, on a connection kept alive.
pub async fn read_unasked(request: Request, max: usize) -> Result<Request, Response> {
    let (parts, body) = request.into_parts();
    let mut chunks = body.into_data_stream();
    let mut bytes = Vec::new();
    while let Some(chunk) = chunks.next().await {
        let refusal = match chunk {
            Ok(chunk) if bytes.len() + chunk.len() <= max => {
                bytes.extend_from_slice(&chunk);
                continue;
            }
            // Over the limit: answered once the client is done sending
            // (as [`refuse_declared`] does).
            Ok(_) => {
                drain_refused(&mut chunks).await;
                ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "invalid_input",
                    format!(
                        "the request body is over the limit of {max} bytes (`[server] max_body_kb`); \
                         this request needs none"
                    ),
                )
            }
            Err(e) => read_error(StatusCode::BAD_REQUEST, &e),
        };
        return Err(close_unread(&parts.headers, refusal.into_response()));
    }
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

/// `request` with a body that must arrive whole within `total` of now (a
/// slow-loris body ends with 408; the connection and its task are freed). A
/// deadline for the whole body, not per chunk, so a client trickling a byte
/// at a time cannot hold the server.
pub fn with_deadline(request: Request, total: Duration) -> Request {
    let deadline = tokio::time::Instant::now() + total;
    request.map(|body| {
        let chunks = body.into_data_stream();
        let timed = futures::stream::unfold(Some(chunks), move |chunks| async move {
            let mut chunks = chunks?;
            match tokio::time::timeout_at(deadline, chunks.next()).await {
                Ok(Some(chunk)) => Some((chunk, Some(chunks))),
                Ok(None) => None,
                Err(_) => Some((Err(axum::Error::new(BodyDeadline(total))), None)),
            }
        });
        Body::from_stream(timed)
    })
}

/// Parse a body; an empty body reads as `{}`.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let bytes = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        bytes
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    // serde_json refuses nesting deeper than 128 by default: no stack overflow.
    let value = T::deserialize(&mut de).and_then(|v| de.end().map(|()| v));
    value.map_err(|e| {
        use serde_json::error::Category;
        match e.classify() {
            Category::Data => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "invalid_input",
                format!("the request body has the wrong shape: {e}"),
            ),
            _ => ApiError::bad_request(format!("the request body is not valid JSON: {e}")),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct B {
        a: Option<u32>,
    }

    #[test]
    fn statuses() {
        assert!(parse::<B>(b"").is_ok());
        assert_eq!(
            parse::<B>(b"{").unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            parse::<B>(b"{} x").unwrap_err().status,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            parse::<B>(br#"{"a":"x"}"#).unwrap_err().status,
            StatusCode::UNPROCESSABLE_ENTITY
        );
        assert_eq!(
            parse::<B>(br#"{"b":1}"#).unwrap_err().status,
            StatusCode::UNPROCESSABLE_ENTITY
        );
        let deep = "[".repeat(100_000);
        assert_eq!(
            parse::<serde_json::Value>(deep.as_bytes())
                .unwrap_err()
                .status,
            StatusCode::BAD_REQUEST
        );
    }

    #[tokio::test]
    async fn a_refused_body_is_drained_within_its_bounds() {
        let whole = Body::from(vec![0u8; 100_000]);
        assert_eq!(
            linger(whole, 1 << 20, Duration::from_secs(5)).await,
            100_000
        );

        let chunks = futures::stream::iter(
            (0..64).map(|_| Ok::<_, std::io::Error>(Bytes::from(vec![0u8; 1024]))),
        );
        let read = linger(Body::from_stream(chunks), 4096, Duration::from_secs(5)).await;
        assert!((4096..8192).contains(&read), "read {read}");

        // A client that declares a body and never sends it is not waited for.
        let never = futures::stream::pending::<Result<Bytes, std::io::Error>>();
        let read = linger(Body::from_stream(never), 4096, Duration::from_millis(100)).await;
        assert_eq!(read, 0);
    }
}
