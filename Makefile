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

.PHONY: run test plugins fixtures guests wasm-target build lint bench clean

## Serve the example plugins on $(BIND) (release build).
run: plugins
	$(CARGO) run --release -p toolhost -- serve --bind $(BIND) --plugins target/plugins --data target/data

## Everything: format check, clippy (host and guests), unit, router and end-to-end tests.
test: wasm-target plugins fixtures
	$(CARGO) fmt --all --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings
	$(CARGO) clippy --target $(WASM_TARGET) $(GUESTS:%=-p %) -p toolhost-sdk -- -D warnings
	$(CARGO) build -p toolhost
	$(CARGO) test --workspace

wasm-target:
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)

guests: wasm-target
	$(CARGO) build --target $(WASM_TARGET) --profile plugin $(GUESTS:%=-p %)

## Every example component + manifest into target/plugins/.
plugins: guests
	@mkdir -p target/plugins
	@for p in $(PLUGINS); do \
	  cp $(WASM_OUT)/$$(echo $$p | tr - _).wasm target/plugins/$$p.wasm && \
	  cp plugins/$$p/$$p.toml target/plugins/$$p.toml || exit 1; \
	done
	@ls -l target/plugins

## Test fixtures into target/fixtures/ (kept out of the served examples).
fixtures: guests
	@mkdir -p target/fixtures
	@for p in $(FIXTURES); do \
	  cp $(WASM_OUT)/$$(echo $$p | tr - _).wasm target/fixtures/$$p.wasm || exit 1; \
	  if [ -f tests/fixtures/$$p/$$p.toml ]; then cp tests/fixtures/$$p/$$p.toml target/fixtures/; fi; \
	done

build:
	$(CARGO) build --release -p toolhost

## Benchmarks (release build, loopback only, bounded in time).
bench: plugins build
	$(CARGO) run --release -p toolhost-bench

clean:
	$(CARGO) clean
