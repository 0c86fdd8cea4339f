# toolhost — the two commands: `make run` (serve the example plugins) and
# `make test` (everything CI runs). See README.md.

CARGO        ?= cargo
BIND         ?= 127.0.0.1:8001
WASM_TARGET  := wasm32-wasip2
WASM_OUT     := target/$(WASM_TARGET)/plugin
# Example plugins served by `make run`, and test fixtures (never served).
PLUGINS      := calc files
FIXTURES     := hostile wrong-version
GUESTS       := $(PLUGINS) $(FIXTURES)
# Python plugins (componentize-py, via sdk/python/build.sh).
PY_PLUGINS   := textstats python
# Docker toolkits (a folder each: manifest + in-container driver).
TOOLKITS     := shell notebook browser

.PHONY: run test py-unit plugins fixtures guests wasm-target build lint bench clean docker node-image driver-test

## Serve the example plugins on $(BIND) (release build). The heavy tools need the
## Docker engine and the node image: built here when missing (once, ~2 min);
## without them the server still serves the wasm tools.
run: plugins
	@$(MAKE) --no-print-directory node-image || echo "warning: no Docker engine or node image: shell/notebook/browser tools will answer 503"
	$(CARGO) run --release -p toolhost -- serve --bind $(BIND) --plugins target/plugins --data target/data

## Everything: format check, clippy (host and guests), unit, router and end-to-end
## tests, with the Docker engine started and the node image built when missing.
test: wasm-target plugins fixtures node-image
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --target $(WASM_TARGET) $(GUESTS:%=-p %) -p toolhost-sdk -- -D warnings
	$(CARGO) build -p toolhost
	$(CARGO) test --workspace
	@$(MAKE) --no-print-directory py-unit
	python3 plugins/node/test_drivers.py

wasm-target:
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

guests: wasm-target
	$(CARGO) build --target $(WASM_TARGET) --profile plugin $(GUESTS:%=-p %)

## Every example component + manifest into target/plugins/ (Rust and Python
## components, Docker toolkit folders).
plugins: guests
	@mkdir -p target/plugins
	@for p in $(PLUGINS); do \
	  cp $(WASM_OUT)/$$(echo $$p | tr - _).wasm target/plugins/$$p.wasm && \
	  cp plugins/$$p/$$p.toml target/plugins/$$p.toml || exit 1; \
	done
	@for p in $(PY_PLUGINS); do sdk/python/build.sh plugins/$$p target/plugins || exit 1; done
	@for t in $(TOOLKITS); do \
	  mkdir -p target/plugins/$$t && \
	  cp plugins/$$t/$$t.toml plugins/$$t/driver.py target/plugins/$$t/ || exit 1; \
	done
	@ls -l target/plugins

## Test fixtures into target/fixtures/ (kept out of the served examples).
fixtures: guests
	@mkdir -p target/fixtures
	@for p in $(FIXTURES); do \
	  cp $(WASM_OUT)/$$(echo $$p | tr - _).wasm target/fixtures/$$p.wasm || exit 1; \
	  if [ -f tests/fixtures/$$p/$$p.toml ]; then cp tests/fixtures/$$p/$$p.toml target/fixtures/; fi; \
	done

## Unit tests of the Python SDK and the Python plugins, on plain CPython.
py-unit:
	PYTHONPATH=sdk/python python3 -m unittest discover -s sdk/python/tests
	@for p in $(PY_PLUGINS); do \
	  PYTHONPATH=sdk/python:plugins/$$p python3 -m unittest discover -s plugins/$$p/tests || exit 1; \
	done

build:
	$(CARGO) build --release -p toolhost

## Start the Docker engine when none answers (installs docker.io if needed).
docker:
	plugins/node/ensure-docker.sh

## The node image toolhost-node:latest (debootstrap + docker import; skipped
## when the image of the current recipe exists).
node-image: docker
	plugins/node/build-image.sh

## Driver-level tests: each in-container driver in the real image, over stdio.
driver-test: node-image
	python3 plugins/node/test_drivers.py

## Benchmarks (release build, loopback only, bounded in time).
bench: plugins build
	$(CARGO) run --release -p toolhost-bench

clean:
	$(CARGO) clean
