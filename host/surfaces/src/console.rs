//! The web console at `/ui`: plain HTML, CSS and JavaScript from `host/ui/`,
//! embedded in the binary (no CDN, no build step, works offline).
//!
//! The page is static and public (it holds no data: it asks for a token and
//! talks to the same API as any client, with the same tokens); everything it
//! shows comes from the existing routes. The one route added for it is
//! `GET /sessions` (admin token): the open sessions, which no other route
//! lists, since a session id is the key to its workspace.
//!
//! Assets are sent with their content type, an `ETag` (`Cache-Control:
//! no-cache`: a warm browser revalidates and gets a 304, and a new binary's
//! assets are never stale) and a strict Content Security Policy: scripts and
//! styles from the page's own origin only, no inline script, no `eval`, API
//! calls to the same origin, images from `data:`/`blob:` (tool results).

use std::sync::LazyLock;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::{Json, Router, routing};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use toolhost_core::callers::Caller;

use super::error::ApiError;
use crate::auth::Who;
use crate::state::AppState;

/// `(file name under /ui/, bytes, content type)`; `""` is the page.
const FILES: &[(&str, &[u8], &str)] = &[
    (
        "",
        include_bytes!("../../ui/index.html"),
        "text/html; charset=utf-8",
    ),
    (
        "app.js",
        include_bytes!("../../ui/app.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "dom.js",
        include_bytes!("../../ui/dom.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "schema.js",
        include_bytes!("../../ui/schema.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "charts.js",
        include_bytes!("../../ui/charts.js"),
        "text/javascript; charset=utf-8",
    ),
    (
        "app.css",
        include_bytes!("../../ui/app.css"),
        "text/css; charset=utf-8",
    ),
    (
        "icon.svg",
        include_bytes!("../../ui/icon.svg"),
        "image/svg+xml",
    ),
];

/// The policy of every console response.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; \
    form-action 'none'; frame-ancestors 'none'";

/// A strong validator per file: its SHA-256, shortened.
static ETAGS: LazyLock<Vec<String>> = LazyLock::new(|| {
    FILES
        .iter()
        .map(|(_, bytes, _)| {
            let digest = Sha256::digest(bytes);
            format!("\"{}\"", toolhost_core::text::hex(&digest[..12]))
        })
        .collect()
});

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/ui",
            routing::get(|| async { Redirect::permanent("/ui/") }),
        )
        .route(
            "/ui/",
            routing::get(|h: HeaderMap| async move { asset("", &h) }),
        )
        .route(
            "/ui/{file}",
            routing::get(|Path(file): Path<String>, h: HeaderMap| async move { asset(&file, &h) }),
        )
        .route("/sessions", routing::get(sessions))
        .route("/callers", routing::get(callers))
}

/// Whether `path` is one of the console's static files, served without a
/// caller token (they hold no data; the page asks for the token).
pub fn is_public(path: &str) -> bool {
    path == "/ui"
        || path
            .strip_prefix("/ui/")
            .is_some_and(|f| FILES.iter().any(|(name, _, _)| *name == f))
}

fn asset(file: &str, request: &HeaderMap) -> Response {
    let Some(i) = FILES.iter().position(|(name, _, _)| *name == file) else {
        return ApiError::not_found(format!("no console file `{file}`")).into_response();
    };
    let (_, bytes, content_type) = FILES[i];
    let etag = &ETAGS[i];
    let fresh = request
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag));
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        let mut r = bytes.into_response();
        r.headers_mut()
            .insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        r
    };
    let h = response.headers_mut();
    if let Ok(v) = HeaderValue::from_str(etag) {
        h.insert(header::ETAG, v);
    }
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// `GET /sessions`: `{"sessions":[{"id","caller","idle_s"}],
/// "idle_timeout_s", "caller"}`, most recently used first. An admin (the
/// admin token, or a caller whose policy says so) sees every caller's; any
/// other named caller its own; without caller tokens, the admin token is
/// needed.
async fn sessions(
    State(state): State<AppState>,
    Who(who): Who,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let admin = super::auth::check(state.admin_token.as_ref(), &headers, &who);
    let only = match admin {
        Ok(()) => None,
        Err(_) if !who.is_anonymous() => Some(&who),
        Err(e) => return Err(e),
    };
    let sessions = state.dispatcher.sessions();
    let secs = |d: Duration| (d.as_secs_f64() * 10.0).round() / 10.0;
    let list: Vec<Value> = sessions
        .list(only)
        .into_iter()
        .map(|(s, idle)| {
            json!({"id": s.client_id(), "caller": s.owner().name(), "idle_s": secs(idle)})
        })
        .collect();
    Ok(Json(json!({
        "sessions": list,
        "idle_timeout_s": secs(sessions.idle_timeout()),
        "caller": who.name(),
    })))
}

/// `GET /callers` (admin): every caller a token names, its policy and its
/// usage since the server started: `{"callers":[{"name","admin","tools",
/// "max_sessions","max_concurrent_calls","sessions_open","usage":{"ok",
/// "failed","refused","busy_ms","running"}}]}`.
async fn callers(
    State(state): State<AppState>,
    Who(who): Who,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    super::auth::check(state.admin_token.as_ref(), &headers, &who)?;
    let sessions = state.dispatcher.sessions();
    let row = |c: &Caller, kind: &str| {
        let policy = c.policy();
        json!({
            "name": c.name(),
            "kind": kind,
            "admin": policy.admin,
            "tools": policy.tools,
            "max_sessions": policy.max_sessions,
            "max_concurrent_calls": policy.max_concurrent_calls,
            "sessions_open": sessions.list(Some(c)).len(),
            "usage": c.usage(),
            "usage_by_tool": c.usage_by_tool(),
            "grant": c.grant(),
        })
    };
    let oauth = state
        .auth
        .as_ref()
        .map(|a| a.oauth_callers())
        .unwrap_or_default();
    let list: Vec<Value> = (state.callers.iter())
        .map(|c| {
            row(
                c,
                if c.is_anonymous() {
                    "anonymous"
                } else {
                    "token"
                },
            )
        })
        .chain(oauth.iter().map(|c| row(c, "oauth")))
        .collect();
    Ok(Json(json!({ "callers": list })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_console_files_are_public() {
        for p in [
            "/ui",
            "/ui/",
            "/ui/app.js",
            "/ui/dom.js",
            "/ui/schema.js",
            "/ui/charts.js",
            "/ui/app.css",
            "/ui/icon.svg",
        ] {
            assert!(is_public(p), "{p}");
        }
        for p in [
            "/ui/x.js",
            "/ui/../tools",
            "/tools",
            "/uix",
            "/ui/app.js/x",
            "/",
        ] {
            assert!(!is_public(p), "{p}");
        }
    }

    /// Every file is named by relative path: by the page, or imported by
    /// one of the console's modules (`from './dom.js'`).
    #[test]
    fn the_page_loads_its_files_by_relative_path_with_no_inline_script() {
        let page = std::str::from_utf8(FILES[0].1).unwrap();
        let modules: Vec<&str> = FILES
            .iter()
            .filter(|(name, _, _)| name.ends_with(".js"))
            .map(|(_, bytes, _)| std::str::from_utf8(bytes).unwrap())
            .collect();
        for (name, _, _) in &FILES[1..] {
            let imported = modules
                .iter()
                .any(|m| m.contains(&format!("from './{name}'")));
            assert!(page.contains(&format!("\"{name}\"")) || imported, "{name}");
        }
        assert!(!page.contains("<script>"), "no inline script");
        assert!(!page.contains("style=\""), "no inline style");
    }
}
