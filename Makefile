# fairground: the two commands users need are `make bench` and `make test`.
# Everything a fresh machine lacks is installed from here (see `deps`).

CARGO   ?= cargo
PROFILE ?= standard

.PHONY: build static test fmt lint deps bench

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
bench: deps static
	$(STATIC_BIN) run --profile $(PROFILE) $(BENCH_FLAGS)

## fmt: format the code
fmt:
	$(CARGO) fmt --all

## lint: clippy with warnings as errors
lint:
	$(CARGO) clippy --locked --all-targets -- -D warnings

## deps: host packages fairground needs (Debian), installed once
deps:
	@bash scripts/install-deps.sh
