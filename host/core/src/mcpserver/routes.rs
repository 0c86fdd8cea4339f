//! What a connection routes to the calls in flight, by a key the server
//! names them with: progress by progress token (`client`), questions by the
//! id of the request toolhost sent (`asks`). An entry lives as long as its
//! guard.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::NumberOrString;

/// Entries by the server's key.
pub type Routes<T> = Arc<Mutex<HashMap<String, T>>>;

/// The map key of a token or request id.
pub fn key(id: &NumberOrString) -> String {
    match id {
        NumberOrString::Number(n) => n.to_string(),
        NumberOrString::String(s) => s.to_string(),
    }
}

/// Route what the server sends about `id` to `value` until the guard drops.
pub fn route<T>(routes: &Routes<T>, id: &NumberOrString, value: T) -> RouteGuard<T> {
    let key = key(id);
    routes
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key.clone(), value);
    RouteGuard(routes.clone(), key)
}

/// Removes its entry when dropped.
pub struct RouteGuard<T>(Routes<T>, String);

impl<T> Drop for RouteGuard<T> {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.1);
    }
}
