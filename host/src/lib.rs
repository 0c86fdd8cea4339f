//! toolhost: a tool server for LLM agents.
//!
//! Layers, each depending only on those below it:
//!
//! - [`api`]: axum routers (native REST now; XAgent and MCP adapters later),
//!   thin adapters over dispatch.
//! - [`dispatch`]: the one entry point `(session, tool id, input) -> result`.
//! - backends: [`wasm`] (components in-process) and [`docker`] (heavy tools in
//!   containers), peers behind [`catalog::Toolkit`].
//! - [`plugins`]: the plugins directory kept in step with the catalog (hot
//!   loading, compile cache, admin uploads).
//! - [`catalog`] and [`sessions`]: the registry of tools and the per-session
//!   workspaces; [`tool`]: the shared core types; [`schema`]: tool schemas
//!   normalised as agent frameworks accept them.

pub mod api;
pub mod backend;
pub mod catalog;
pub mod componentize;
pub mod config;
pub mod dispatch;
pub mod docker;
pub mod metrics;
pub mod plugins;
pub mod scaffold;
pub mod schema;
pub mod server;
pub mod sessions;
pub mod tool;
pub mod wasm;
