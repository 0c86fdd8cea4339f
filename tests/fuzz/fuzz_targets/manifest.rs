//! The plugin manifest parser and what is derived from it: limits and the
//! outbound HTTP policy. Any text: an error or a manifest, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use toolhost::tool::Limits;
use toolhost::wasm::http::HttpPolicy;
use toolhost::wasm::manifest::Manifest;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(manifest) = Manifest::parse(text) {
        let _ = manifest.limits(&Limits::default(), 512);
        if let Ok(policy) = HttpPolicy::parse(&manifest.http.allow, &manifest.http.methods) {
            for (method, scheme, host, port) in [
                ("GET", "https", "example.com", None),
                ("POST", "http", "127.0.0.1", Some(8080)),
                ("GET", "https", "a.b.example.com", Some(443)),
            ] {
                let _ = policy.refusal(method, scheme, host, port);
            }
        }
    }
    // Docker toolkit manifests share the plugins directory.
    let _ = toolhost::nodes::manifest::parse("fuzz", std::path::Path::new("/nonexistent"), text);
});
