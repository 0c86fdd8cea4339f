//! Turn a core WebAssembly module into a plugin component, for toolchains that
//! emit core modules (C with clang and wasi-libc, which targets WASI preview 1).
//!
//! The module must carry the `component-type` custom section of the world
//! `plugin` (the C SDK links `sdk/c/gen/plugin_component_type.o` for that). Its
//! WASI preview 1 imports are bridged to WASI 0.2 by the reactor adapter of the
//! same wasmtime release as the host, embedded here, so C authors need neither
//! `wasm-tools` nor a downloaded adapter.

use anyhow::Context;
use wasi_preview1_component_adapter_provider::{
    WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME, WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
};

/// Encode `module` (a core module with the world's type section) as a
/// component, validated.
pub fn componentize(module: &[u8]) -> anyhow::Result<Vec<u8>> {
    if module.starts_with(b"\0asm") && module.get(4..8) != Some(&[1, 0, 0, 0]) {
        anyhow::bail!("the input is already a component (or not a core module)");
    }
    let component = wit_component::ComponentEncoder::default()
        .validate(true)
        .module(module)
        .context("not a core module with toolhost's world in it")?
        .adapter(
            WASI_SNAPSHOT_PREVIEW1_ADAPTER_NAME,
            WASI_SNAPSHOT_PREVIEW1_REACTOR_ADAPTER,
        )
        .context("cannot use the WASI preview 1 adapter")?
        .encode()
        .context("cannot encode the component")?;
    // A module without the world's type section encodes into a component that
    // exports nothing: say why here rather than at load time.
    let exports_toolkit = match wit_component::decode(&component)? {
        wit_component::DecodedWasm::Component(resolve, world) => {
            resolve.worlds[world].exports.keys().any(|key| {
                resolve
                    .name_world_key(key)
                    .starts_with("toolhost:plugin/toolkit@")
            })
        }
        wit_component::DecodedWasm::WitPackage(..) => false,
    };
    anyhow::ensure!(
        exports_toolkit,
        "the module does not export toolhost's `toolkit` interface: link sdk/c/gen/plugin_component_type.o (the world `plugin`) and define the tools"
    );
    Ok(component)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_and_components_are_refused_with_a_reason() {
        let err = componentize(b"not wasm").unwrap_err();
        assert!(format!("{err:#}").contains("core module"), "{err:#}");
        // A component's header (layer 1) is refused before encoding.
        let err = componentize(b"\0asm\x0d\0\x01\0").unwrap_err();
        assert!(err.to_string().contains("already a component"), "{err}");
    }

    #[test]
    fn a_module_without_the_world_is_refused() {
        // The empty core module: valid, but it has no component-type section.
        let err = componentize(b"\0asm\x01\0\0\0").unwrap_err();
        assert!(format!("{err:#}").contains("toolkit"), "{err:#}");
    }
}
