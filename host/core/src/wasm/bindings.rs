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
