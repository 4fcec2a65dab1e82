# fairground: the two commands users need are `make bench` and `make test`.
# Everything a fresh machine lacks is installed from here (see `deps`).

CARGO   ?= cargo
PROFILE ?= standard

.PHONY: build test fmt lint deps

## build: the release binary (target/release/fairground)
build:
	$(CARGO) build --release --locked

## test: format check, clippy, and the whole test suite, Docker tests included
test: deps
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --locked --all-targets -- -D warnings
	$(CARGO) test --locked --all-targets -- --test-threads=1

## fmt: format the code
fmt:
	$(CARGO) fmt --all

## lint: clippy with warnings as errors
lint:
	$(CARGO) clippy --locked --all-targets -- -D warnings

## deps: host packages fairground needs (Debian), installed once
deps:
	@bash scripts/install-deps.sh
