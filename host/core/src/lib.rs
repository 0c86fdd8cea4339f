//! toolhost's core: the contract every backend implements, dispatch, the
//! backends themselves, and the stores beside them. The HTTP surfaces
//! (`toolhost-surfaces`) render what this crate answers; the `toolhost`
//! crate composes both into the server.
//!
//! Layers, each depending only on those below it:
//!
//! - [`dispatch`]: the one entry point `(session, tool id, input) -> result`.
//! - backends: [`wasm`] (components in-process), [`nodes`] (heavy tools in
//!   containers), [`httpapi`] (HTTP APIs described by OpenAPI) and
//!   [`mcpserver`] (MCP servers, through rmcp's client), peers
//!   behind [`backend::Backend`] and [`catalog::Toolkit`]; [`outbound`]: the
//!   outbound HTTP allow-list they share.
//! - [`plugins`]: the plugins directory kept in step with the catalog (hot
//!   loading, compile cache, admin uploads).
//! - [`catalog`] and [`sessions`]: the registry of tools and the per-session
//!   workspaces; [`tool`]: the shared core types; [`content`]: what a call
//!   answers, item by item; [`schema`]: tool schemas
//!   normalised as agent frameworks accept them.

pub mod backend;
pub mod builder;
pub mod callers;
pub mod catalog;
pub mod componentize;
pub mod content;
pub mod credentials;
pub mod declared;
pub mod dispatch;
pub mod events;
pub mod health;
pub mod httpapi;
pub mod input;
pub mod interpreter;
pub mod mcpserver;
pub mod metrics;
pub mod mock;
pub mod nodes;
pub mod oci;
pub mod outbound;
pub mod pins;
pub mod plugins;
pub mod quiet;
pub mod registry;
pub mod scaffold;
pub mod schema;
pub mod sessions;
pub mod system;
pub mod tasks;
pub mod telemetry;
pub mod text;
pub mod tool;
pub mod trust;
pub mod wasm;
