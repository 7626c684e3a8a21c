# One-command set-up: `make demo` runs the demo, `make test` installs everything and runs the whole suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.trainsleuth-installed

.PHONY: install demo test lint bench clean

$(STAMP): pyproject.toml constraints.txt package.json package-lock.json
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,torch]'
	# Test-only MCP clients written elsewhere (Inspector CLI, conformance suite) for tests/test_e2e_*.py.
	npm ci --no-audit --no-fund
	touch $(STAMP)

install: $(STAMP)

demo: install
	$(BIN)/trainsleuth demo

lint: install
	$(BIN)/ruff check trainsleuth tests benchmarks examples
	$(BIN)/ruff format --check trainsleuth tests benchmarks examples
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

bench: install
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) build dist .pytest_cache .mypy_cache .ruff_cache
