# One-command set-up: `make demo` runs the demo, `make test` installs everything and runs the whole suite.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.trainsleuth-installed

.PHONY: install demo test lint bench clean

NPM_STAMP := node_modules/.trainsleuth-installed

$(STAMP): pyproject.toml constraints.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -c constraints.txt -e '.[dev,torch]'
	touch $(STAMP)

# Test-only MCP clients written elsewhere (Inspector CLI, conformance suite) for tests/test_e2e_*.py.
# Only the tests need them, so `make demo` works without npm.
$(NPM_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund
	touch $(NPM_STAMP)

install: $(STAMP)

demo: install
	$(BIN)/trainsleuth demo

lint: install
	$(BIN)/ruff check trainsleuth tests benchmarks examples
	$(BIN)/ruff format --check trainsleuth tests benchmarks examples
	$(BIN)/mypy

test: lint $(NPM_STAMP)
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

bench: install
	$(BIN)/python -m benchmarks

clean:
	rm -rf $(VENV) node_modules build dist .pytest_cache .mypy_cache .ruff_cache
