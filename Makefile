# Two commands for a fresh machine: `make demo` runs palace on the example palace, `make test` runs the tests.
# `make check` runs every test but the slow ones: the loop between edits (CI runs `make test`).
# Each creates .venv and installs what it needs (llama-cpp-python compiles once, ~5 min; pip caches the wheel).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
EXAMPLE := example-palace

.PHONY: demo test check install models bench docs clean

$(BIN)/palace: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[models,mcp,lsp,dev]'
	touch $(BIN)/palace

install: $(BIN)/palace

models: install
	$(BIN)/palace models install

demo: models
	$(BIN)/palace --palace $(EXAMPLE) index --wait
	$(BIN)/palace --palace $(EXAMPLE) recall "our coordinator crashed after every participant voted yes and now they all hold locks: what is going on?"
	$(BIN)/palace --palace $(EXAMPLE) recall "why should retries wait a random amount of time?" --format prompt
	$(BIN)/palace --palace $(EXAMPLE) lint
	$(BIN)/palace --palace $(EXAMPLE) bench retrieval

test: install
	$(BIN)/python -m pytest -q

check: install
	$(BIN)/python -m pytest -q -m "not slow"

docs: install
	$(BIN)/cog -r docs/cli.md

clean:
	rm -rf $(VENV) $(EXAMPLE)/.palace .pytest_cache
