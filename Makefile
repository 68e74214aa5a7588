# ssdlab chores: one entry point for developers and CI (`make help` lists the targets).
#
# Every target does its own setup on a fresh machine: a virtual environment in .venv with the
# exact tools of requirements-dev.lock, then the Rust extension built into it. Stamp files in
# .venv make the setup steps no-ops when nothing they depend on changed.

SHELL := bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help
MAKEFLAGS += --no-builtin-rules

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOCK := requirements-dev.lock
VENV_STAMP := $(VENV)/.installed
BUILD_STAMP := $(VENV)/.built
PROPTEST_CASES ?= 256

# What the extension is built from: a change to any of these rebuilds it (cargo then decides what
# actually needs compiling). Python sources are installed in editable mode and need no rebuild.
RUST_INPUTS := Cargo.toml $(wildcard Cargo.lock) $(shell find crates presets \
	\( -name '*.rs' -o -name 'Cargo.toml' -o -name '*.toml' \) -not -path '*/target/*' 2>/dev/null)

# cargo sees the interpreter maturin builds for, so PyO3's build script configures the same
# Python for every cargo command and does not rerun between them. The Rust test binary of the
# bindings crate links libpython; it needs the library directory to start.
PY_LIBDIR := $(shell $(PYTHON) -c 'import sysconfig; print(sysconfig.get_config_var("LIBDIR") or "")' 2>/dev/null)
CARGO_ENV := PYO3_PYTHON=$(CURDIR)/$(BIN)/python LD_LIBRARY_PATH=$(PY_LIBDIR)$${LD_LIBRARY_PATH:+:$$LD_LIBRARY_PATH}

.PHONY: help venv build demo test-deps test bench lint fmt fuzz-smoke clean

help: ## list the targets
	@echo "usage: make TARGET"
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

venv: $(VENV_STAMP) ## create .venv and install the pinned tools of requirements-dev.lock

$(VENV_STAMP): $(LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r $(LOCK)
	@touch $@

build: $(BUILD_STAMP) ## build the Rust extension (release) and install ssdlab into .venv

$(BUILD_STAMP): $(VENV_STAMP) pyproject.toml $(RUST_INPUTS)
	@pkg-config --exists openssl 2>/dev/null || { echo "error: OpenSSL's headers are missing" \
		"(the TLS of ssdlab-nbd needs them): run make test-deps, or apt-get install" \
		"libssl-dev pkg-config" >&2; exit 1; }
	VIRTUAL_ENV=$(CURDIR)/$(VENV) $(BIN)/maturin develop --release --quiet
	@touch $@

demo: build ## build, then run the demo: hinted vs unhinted placement on a small TLC device
	$(BIN)/ssdlab demo

test-deps: ## install build deps (libssl-dev) and the NBD clients the tests drive (as root)
	bash scripts/install-test-deps.sh

# test-deps first: building needs OpenSSL's headers, which it installs on a fresh machine. The
# Rust tests build with the `checked` profile: release speed, but an overflow or a broken
# debug assertion fails the test instead of wrapping silently.
test: test-deps build ## build, then run every Rust and Python test
	$(CARGO_ENV) cargo test --workspace --profile checked
	@$(BIN)/pytest || { status=$$?; \
		if [ $$status -eq 5 ]; then echo "error: pytest collected no tests" >&2; fi; \
		exit $$status; }

bench: test-deps build ## build, then run the simulator, workload, NBD, sweep, OLTP and Python benchmarks
	$(CARGO_ENV) cargo run --release -p ssdlab-benches --bin simspeed -- --ftl-alone
	$(CARGO_ENV) cargo run --release -p ssdlab-benches --bin simspeed -- --op 0.28
	$(CARGO_ENV) cargo run --release -p ssdlab-benches --bin simspeed -- --scheduler fcfs
	$(CARGO_ENV) cargo run --release -p ssdlab-benches --bin devicebench
	$(CARGO_ENV) cargo run --release -p ssdlab-benches --bin groupspeed
	$(CARGO_ENV) cargo run --release -p ssdlab-benches --bin cachebench
	$(CARGO_ENV) cargo run --release -p ssdlab-benches --bin parsespeed
	$(CARGO_ENV) cargo run --release -p ssdlab-benches --bin nativebench
	$(BIN)/python benches/nbd_fio.py
	$(BIN)/python benches/sweep_bench.py
	$(BIN)/python benches/oltp_bench.py
	$(BIN)/python benches/sqlite_bench.py
	$(BIN)/python benches/tpcc_coupling_bench.py
	@$(BIN)/pytest -m bench -q || { status=$$?; [ $$status -eq 5 ] || exit $$status; }

lint: venv test-deps ## check formatting and lints: cargo fmt, clippy (warnings are errors), ruff
	cargo fmt --all --check
	$(CARGO_ENV) cargo clippy --workspace --all-targets -- -D warnings
	$(BIN)/ruff check python tests
	$(BIN)/ruff format --check python tests

fmt: venv ## format Rust and Python sources in place (and apply ruff's safe fixes)
	cargo fmt --all
	$(BIN)/ruff check --fix python tests
	$(BIN)/ruff format python tests

fuzz-smoke: ## run the proptest fuzz tests of the parsers, the NBD server and the SQLite freelist reader (PROPTEST_CASES=256)
	PROPTEST_CASES=$(PROPTEST_CASES) cargo test --release -p ssdlab-workload props
	PROPTEST_CASES=$(PROPTEST_CASES) cargo test --release -p ssdlab-nbd props
	PROPTEST_CASES=$(PROPTEST_CASES) cargo test --release -p ssdlab-sqlite props

clean: ## remove build outputs, the virtual environment and caches
	cargo clean
	rm -rf $(VENV) .pytest_cache .ruff_cache python/ssdlab/_core*.so
	find python tests -name __pycache__ -type d -prune -exec rm -rf {} +
