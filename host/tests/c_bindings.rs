//! The C SDK's generated bindings (`sdk/c/gen/`: `plugin.h`, `plugin.c`,
//! `plugin_component_type.o`) are checked in so C authors need no Rust tool;
//! this test regenerates them from `wit/` with the pinned `wit-bindgen-c` and
//! fails when the checked-in files differ. `TOOLHOST_BLESS=1 cargo test -p
//! toolhost --test c_bindings` rewrites them after a WIT change.

use std::path::Path;

#[test]
fn the_checked_in_c_bindings_match_the_wit_package() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut resolve = wit_parser::Resolve::default();
    let (package, _) = resolve.push_dir(repo.join("wit")).expect("parse wit/");
    let world = resolve
        .select_world(&[package], Some("plugin"))
        .expect("world plugin");
    let mut files = wit_bindgen_core::Files::default();
    wit_bindgen_c::Opts::default()
        .build()
        .generate(&mut resolve, world, &mut files)
        .expect("generate C bindings");

    let gen_dir = repo.join("sdk/c/gen");
    let bless = std::env::var_os("TOOLHOST_BLESS").is_some();
    let mut stale = Vec::new();
    for (name, contents) in files.iter() {
        let path = gen_dir.join(name);
        if bless {
            std::fs::create_dir_all(&gen_dir).unwrap();
            std::fs::write(&path, contents).unwrap();
        } else if std::fs::read(&path).ok().as_deref() != Some(contents) {
            stale.push(name.to_string());
        }
    }
    assert!(
        stale.is_empty(),
        "sdk/c/gen is out of date with wit/ ({stale:?}): run \
         `TOOLHOST_BLESS=1 cargo test -p toolhost --test c_bindings`"
    );
}
