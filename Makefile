# Tessera developer entry points. Every target creates .venv (python3.11) when it is missing and
# installs what it needs; a stamp file per install set keeps repeated runs fast until
# pyproject.toml changes.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION := 2.13.0
PYTEST_ARGS ?=

.PHONY: demo test test-all lint bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The library with the torch extra: what `make demo` needs (it trains on crops). torch is
# installed first, pinned, so that nothing that depends on it pulls another build.
$(VENV)/.installed-demo: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/python -m pip install --quiet -e '.[torch]'
	touch $@

# Everything (all extras, dev tools, peers). torch is installed first, pinned, so that
# nothing that depends on it pulls another build.
$(VENV)/.installed-all: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/python -m pip install --quiet -e '.[all]'
	touch $(VENV)/.installed-demo $@

install: $(VENV)/.installed-all

demo: $(VENV)/.installed-demo
	$(BIN)/python -m tessera.demo

test: $(VENV)/.installed-all
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-all: $(VENV)/.installed-all
	$(BIN)/python -m pytest -m '' $(PYTEST_ARGS)

lint: $(VENV)/.installed-all
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

bench: $(VENV)/.installed-all
	$(BIN)/python benchmarks/link_check.py
	$(BIN)/python benchmarks/array_engine.py --no-cold
	$(BIN)/python benchmarks/hyperslab.py
	$(BIN)/python benchmarks/pushdown_load.py --requests 100
	$(BIN)/python benchmarks/dataloader.py --quick
	$(BIN)/python benchmarks/evaluation.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache demo-store benchmarks/out
