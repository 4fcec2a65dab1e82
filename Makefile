# fairground: the two commands users need are `make bench` and `make test`.
# Everything a fresh machine lacks is installed from here (see `deps`).

CARGO   ?= cargo
PROFILE ?= standard

.PHONY: build static test check fmt lint deps deps-bench bench

# The statically linked fairground that goes into the FROM-scratch image.
# A separate --target dir keeps host builds from being invalidated.
STATIC_TARGET := x86_64-unknown-linux-gnu
STATIC_BIN    := target/$(STATIC_TARGET)/release/fairground
export FAIRGROUND_STATIC_BIN := $(abspath $(STATIC_BIN))

## build: the release binary (target/release/fairground)
build:
	$(CARGO) build --release --locked

## static: the static binary for fairground's own image ($(STATIC_BIN))
static:
	CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS="-C target-feature=+crt-static" \
	  $(CARGO) build --release --locked --target $(STATIC_TARGET)

## test: format check, clippy, and the whole test suite, Docker tests included
test: deps static
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets -- -D warnings
	$(CARGO) test --locked --all-targets -- --test-threads=1

## bench: run profile $(PROFILE) (default standard) with the static binary,
## building it first; BENCH_FLAGS adds options (e.g. --accept-env, --resume DIR)
bench: deps-bench static
	$(STATIC_BIN) run --profile $(PROFILE) $(BENCH_FLAGS)

## fmt: format the code
fmt:
	$(CARGO) fmt --all

## lint: clippy with warnings as errors
lint:
	$(CARGO) clippy --locked --all-targets -- -D warnings

## check: a developer's loop: format check, clippy, and the tests that need
## no Docker daemon (the library's unit tests and the in-process tests)
NO_DOCKER_TESTS := ci_example ci_outputs compare_cli frameworks_manifests history_cli \
  layering load_accounting load_bursts load_cli load_h2 load_highconc load_rate load_schema load_tls \
  preflight profile_cli report report_cli results_schema run_cli serve verify verify_protocols \
  load_ws verify_ws grpc
check:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets -- -D warnings
	$(CARGO) test --locked --lib
	$(CARGO) test --locked $(addprefix --test ,$(NO_DOCKER_TESTS)) -- --test-threads=1

## deps: host packages the tests need (Debian), installed once
deps:
	@bash scripts/install-deps.sh test

## deps-bench: only what a run needs (no browser, no independent load tools)
deps-bench:
	@bash scripts/install-deps.sh bench
