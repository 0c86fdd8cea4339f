//! The admin token: who may change the plugins directory through the API.

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::auth::{Presented, Token, bearer};
use super::error::ApiError;

/// The configured admin token.
pub type AdminToken = Token;

/// Allow an admin request: a token must be configured and presented as
/// `Authorization: Bearer <token>`.
pub fn check(token: Option<&AdminToken>, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = token else {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            "the admin API is disabled: start the server with an admin token \
             (TOOLHOST_ADMIN_TOKEN or [auth] admin_token)",
        ));
    };
    match bearer(headers).map(Presented::new) {
        Some(p) if token.matches(&p) => Ok(()),
        Some(_) => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "wrong admin token",
        )),
        None => Err(ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "this route needs `Authorization: Bearer <admin token>`",
        )),
    }
}

/// A layer for routes that are all admin-only: [`check`] before the
/// handler (and before its body is read).
pub async fn required(
    State(state): State<super::AppState>,
    request: Request,
    next: Next,
) -> Response {
    match check(state.admin_token.as_ref(), request.headers()) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderValue, header};

    fn with_auth(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn tokens() {
        let t = AdminToken::new("s3cret-s3cret-s3cret");
        assert_eq!(
            check(None, &with_auth("Bearer x")).unwrap_err().status,
            StatusCode::FORBIDDEN
        );
        assert_eq!(
            check(Some(&t), &HeaderMap::new()).unwrap_err().status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            check(Some(&t), &with_auth("Bearer s3cret"))
                .unwrap_err()
                .status,
            StatusCode::UNAUTHORIZED
        );
        assert_eq!(
            check(Some(&t), &with_auth("Basic s3cret-s3cret-s3cret"))
                .unwrap_err()
                .status,
            StatusCode::UNAUTHORIZED
        );
        assert!(check(Some(&t), &with_auth("Bearer s3cret-s3cret-s3cret")).is_ok());
    }
}
