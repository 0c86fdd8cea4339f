//! Host bindings of the WIT package `toolhost:plugin@0.1.0`, world
//! `plugin-host`: the `plugin` world, `toolhost:input/ask@0.1.0` and
//! `toolhost:workspace/changes@0.1.0`, provided to every plugin (those of
//! plain `plugin` just do not import them).

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "plugin-host",
    exports: { default: async },
    imports: {
        "toolhost:input/ask.ask": async | trappable,
        "toolhost:workspace/changes.token": async,
    },
});

/// The package version this host accepts.
pub const WIT_VERSION: &str = "0.1.0";
/// The export a plugin must provide, looked up by this exact name; other
/// exports (componentize-py and jco add some) are ignored.
pub const TOOLKIT_EXPORT: &str = "toolhost:plugin/toolkit@0.1.0";
/// Prefix of the toolkit export in any version, to name a wrong one.
pub const TOOLKIT_EXPORT_PREFIX: &str = "toolhost:plugin/toolkit@";

/// The world's bindings under the names the backend uses.
pub use PluginHost as Plugin;
pub use PluginHostPre as PluginPre;

/// A linker of all a plugin may import (WASI, wasi:http for plugins whose
/// manifest grants hosts, checked on every request by `http::PolicyHooks`,
/// and the world's own interfaces), for `engine`.
pub fn linker(
    engine: &wasmtime::Engine,
) -> anyhow::Result<wasmtime::component::Linker<super::state::CallState>> {
    use super::state::CallState;
    let mut linker = wasmtime::component::Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(|e| anyhow::anyhow!("{e:#}"))?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker)
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    Plugin::add_to_linker::<CallState, wasmtime::component::HasSelf<CallState>>(&mut linker, |s| s)
        .map_err(|e| anyhow::anyhow!("{e:#}"))?;
    Ok(linker)
}
