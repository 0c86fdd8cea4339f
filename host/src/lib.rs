//! toolhost: a tool server for LLM agents.
//!
//! Three crates, each depending only on those below it:
//!
//! - this one (`toolhost`): the configuration file composed of every part's
//!   section ([`config`]), the server that builds the backends and serves
//!   the surfaces ([`server`]), and the command line (`main.rs`);
//! - [`surfaces`] (`toolhost-surfaces`): the HTTP surfaces (native REST,
//!   XAgent's ToolServer protocol, MCP, the admin routes and the console),
//!   thin adapters over dispatch;
//! - `toolhost-core`, re-exported here: the backend contract, dispatch, the
//!   backends and the stores beside them.

pub use toolhost_core::*;
pub use toolhost_surfaces as surfaces;

pub mod config;
pub mod server;
pub mod traces;
