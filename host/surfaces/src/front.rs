//! The checks every request passes before its route, in one service: the
//! browser guard ([`super::guard`]), the caller's token
//! ([`super::auth::admit`]), the declared body size and the body's
//! deadline, a body sent where none is read read first ([`super::body`]);
//! and after it, XAgent's error shape
//! ([`super::xagent::detail`]) and the audit of refusals
//! ([`super::observe::audit`]). Each check is its module's; only the order
//! is here.
//!
//! One hand-written service rather than a `middleware::from_fn` layer per
//! check: each of those boxes the request's future and clones the whole
//! stack under it, about a microsecond a request at six layers (GET
//! /health under `toolhost-bench invoke`, docs/benchmarks.md).

use std::convert::Infallible;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tracing::Instrument;
use tracing::field::Empty;

use axum::extract::Request;
use axum::response::Response;
use futures::future::BoxFuture;
use tower::{Layer, Service};

use super::auth::{self, CallerAuth, IsPublic};
use super::guard::{self, Guard};
use super::{body, observe, xagent};

/// What the checks need.
pub struct Checks {
    pub guard: Guard,
    /// The caller tokens, if any are configured, and the paths they do not
    /// guard.
    pub callers: Option<(Arc<CallerAuth>, IsPublic)>,
    /// `[server] max_body_kb`, in bytes.
    pub max_body_bytes: usize,
    /// `[server] body_timeout_ms`.
    pub body_timeout: Duration,
}

/// The layer of [`Front`].
#[derive(Clone)]
pub struct FrontLayer(Arc<Checks>);

impl FrontLayer {
    pub fn new(checks: Checks) -> Self {
        FrontLayer(Arc::new(checks))
    }
}

impl<S> Layer<S> for FrontLayer {
    type Service = Front<S>;
    fn layer(&self, inner: S) -> Front<S> {
        Front {
            inner,
            checks: self.0.clone(),
        }
    }
}

/// The service that runs [`Checks`] around `S` (the routing table).
#[derive(Clone)]
pub struct Front<S> {
    inner: S,
    checks: Arc<Checks>,
}

impl<S> Service<Request> for Front<S>
where
    S: Service<Request, Response = Response, Error = Infallible> + Clone + Send + 'static,
    S::Future: Send + 'static,
{
    type Response = Response;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Response, Infallible>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request) -> Self::Future {
        // The service made ready is the one called; a clone stays for the next.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        let checks = self.checks.clone();
        Box::pin(async move {
            Ok(observe::traced(request, |request| serve(&checks, inner, request)).await)
        })
    }
}

async fn serve<S>(checks: &Checks, inner: S, request: Request) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let method = request.method().clone();
    let uri = request.uri().clone();
    let mut response = match checks.guard.admit(&request) {
        Err(answer) => *answer,
        Ok(origin) => {
            let mut response = admitted(checks, inner, request).await;
            if let Some(origin) = origin {
                guard::expose(&mut response, origin);
            }
            response
        }
    };
    if xagent::reshapes(uri.path()) {
        response = xagent::detail(response).await;
    }
    observe::audit(&method, uri.path(), &response);
    response
}

/// A request the guard let through: its caller, then its body's checks,
/// then its route.
async fn admitted<S>(checks: &Checks, mut inner: S, request: Request) -> Response
where
    S: Service<Request, Response = Response, Error = Infallible>,
{
    let (request, caller) = match &checks.callers {
        None => (request, None),
        Some((callers, is_public)) => {
            let span =
                toolhost_core::trace_span!("auth", "enduser.id" = Empty, otel.status_code = Empty);
            match auth::admit(callers, *is_public, request)
                .instrument(span.clone())
                .await
            {
                Ok(admitted) => {
                    if let Some(caller) = &admitted.1 {
                        span.record("enduser.id", caller.name());
                    }
                    admitted
                }
                Err(answer) => {
                    span.record("otel.status_code", "ERROR");
                    return answer;
                }
            }
        }
    };
    let mut response = match body::declared_over(&request, checks.max_body_bytes) {
        Some(declared) => body::refuse_declared(request, declared, checks.max_body_bytes).await,
        None => {
            let unasked = body::brings_unasked(&request);
            let request = body::with_deadline(request, checks.body_timeout);
            let request = if unasked {
                body::read_unasked(request, checks.max_body_bytes).await
            } else {
                Ok(request)
            };
            match request {
                Ok(request) => match inner.call(request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                },
                Err(refusal) => refusal,
            }
        }
    };
    if let Some(caller) = caller {
        auth::named_refusal(&mut response, caller);
    }
    response
}
