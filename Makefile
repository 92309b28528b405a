# penguin-harness — `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python
export CARGO_TARGET_DIR ?= $(CURDIR)/target
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help
help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk -F ':.*?## ' '{printf "  %-12s %s\n", $$1, $$2}'

$(VENV)/.ready: requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install --quiet --upgrade pip
	$(VPY) -m pip install --quiet -r requirements-dev.txt
	touch $@

.PHONY: venv
venv: $(VENV)/.ready ## create .venv with the dev/test tools from PyPI

.PHONY: build
build: $(VENV)/.ready ## build the extension into the venv (maturin develop)
	VIRTUAL_ENV=$(CURDIR)/$(VENV) PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/maturin develop --quiet

.PHONY: build-release
build-release: $(VENV)/.ready ## build the optimized extension into the venv (benchmarks)
	VIRTUAL_ENV=$(CURDIR)/$(VENV) PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(VENV)/bin/maturin develop --release --quiet

.PHONY: test-rust
test-rust: ## cargo test of the core and the integration suite
	cargo test --workspace --exclude penguin-harness-python

.PHONY: test-py
test-py: build ## pytest against the built extension
	@set +e; $(VPY) -m pytest tests_py; rc=$$?; \
	if [ $$rc -eq 5 ]; then \
	  if ls tests_py/test_*.py >/dev/null 2>&1; then echo "pytest collected no tests although tests_py has test files" >&2; exit 1; \
	  else echo "tests_py has no tests"; exit 0; fi; \
	fi; exit $$rc

.PHONY: test
test: test-rust test-py ## run every test (Rust and Python)

.PHONY: lint
lint: $(VENV)/.ready build ## fmt, clippy -D warnings, ruff, mypy --strict, stubtest, no pyo3 in the core
	cargo fmt --all --check
	cargo clippy --workspace --all-targets -- -D warnings
	@if cargo tree -p penguin-harness-core -e normal,build | grep -q pyo3; then echo "pyo3 found in the core's dependency tree" >&2; exit 1; fi
	$(VENV)/bin/ruff check python tests_py bench
	$(VENV)/bin/ruff format --check python tests_py bench
	$(VENV)/bin/mypy
	$(VPY) -m mypy.stubtest penguin_harness._core

.PHONY: fmt
fmt: $(VENV)/.ready ## format Rust and Python
	cargo fmt --all
	$(VENV)/bin/ruff format python tests_py bench

.PHONY: bench
bench: build-release ## benchmarks on an optimized build (numbers, never assertions)
	cargo bench -p penguin-harness-tests --bench engine --bench exec
	$(VPY) bench/python_iter.py

.PHONY: clean
clean: ## remove build outputs
	cargo clean
	rm -rf $(VENV) python/penguin_harness/*.so
