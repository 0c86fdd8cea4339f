#!/bin/sh
# rustc with clippy's lints, every warning an error: what `make test` builds
# the workspace's own crates with (cargo's build.rustc-workspace-wrapper, so
# dependencies are built by plain rustc). The test build is then the clippy
# pass too, instead of a second, check-only build of every crate. Cargo runs
# `<this> <rustc> <args...>`; clippy-driver takes the same arguments.
CLIPPY_ARGS=-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__ exec clippy-driver "$@"
