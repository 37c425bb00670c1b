# Tessera developer entry points. Every target creates .venv (python3.11) when it is missing and
# installs what it needs; a stamp file per install set keeps repeated runs fast until
# pyproject.toml changes.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
TORCH_VERSION := 2.13.0
AZURITE_VERSION := 3.37.0
PYTEST_ARGS ?=

.PHONY: demo test test-all lint docs bench install clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# The compiled decode of image columns (C, built by the editable install with the package:
# setup.py); a change to it reinstalls.
KERNEL := setup.py src/tessera/images/_kernel.c

# The library with the torch extra (`make demo` trains on crops) and the viewer's (a newcomer
# looks at the demo's data with `tessera view`). torch is installed first, pinned, so that
# nothing that depends on it pulls another build.
$(VENV)/.installed-demo: pyproject.toml $(KERNEL) | $(BIN)/python
	$(BIN)/python -m pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/python -m pip install --quiet -e '.[torch,view]'
	touch $@

# Everything (all extras, dev tools, peers). torch is installed first, pinned, so that
# nothing that depends on it pulls another build. Azurite (Microsoft's Azure Blob emulator,
# a Node.js program) goes into .venv/azurite where npm exists, for the Azure tests; without
# npm those tests are skipped and say why. The viewer's browser tests drive Debian's
# chromium (Playwright cannot download a browser here): installed with apt where apt runs as
# root; elsewhere those tests are skipped and say why.
$(VENV)/.installed-all: pyproject.toml Makefile $(KERNEL) | $(BIN)/python
	$(BIN)/python -m pip install --quiet torch==$(TORCH_VERSION)
	$(BIN)/python -m pip install --quiet -e '.[all]'
	if ! command -v chromium >/dev/null && command -v apt-get >/dev/null \
		&& [ "$$(id -u)" = 0 ]; then \
		apt-get install -y -q chromium >/dev/null 2>&1 \
			|| (apt-get update -q >/dev/null 2>&1 && apt-get install -y -q chromium >/dev/null 2>&1) \
			|| echo "chromium could not be installed: the viewer's browser tests will be skipped"; \
	fi
	if command -v npm >/dev/null; then \
		npm install --prefix $(VENV)/azurite --no-audit --no-fund --silent \
			azurite@$(AZURITE_VERSION); \
	else echo "npm not found: the Azure (Azurite) tests will be skipped"; fi
	touch $(VENV)/.installed-demo $@

install: $(VENV)/.installed-all

demo: $(VENV)/.installed-demo
	$(BIN)/python -m tessera.demo

test: $(VENV)/.installed-all
	$(BIN)/python -m pytest $(PYTEST_ARGS)

test-all: $(VENV)/.installed-all
	$(BIN)/python -m pytest -m '' $(PYTEST_ARGS)

# The documentation site (MkDocs with Material; the API reference from the docstrings by
# mkdocstrings) into build/site, every warning an error: a broken link, a missing page, a
# reference that does not resolve.
docs: $(VENV)/.installed-all
	$(BIN)/python -m doctest mkdocs_ext/rst_docstrings.py mkdocs_ext/cli_reference.py \
		mkdocs_ext/config_reference.py
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

lint: $(VENV)/.installed-all
	$(BIN)/ruff check src tests benchmarks examples
	$(BIN)/mypy
	$(BIN)/lint-imports

bench: $(VENV)/.installed-all
	$(BIN)/python benchmarks/link_check.py
	$(BIN)/python benchmarks/array_engine.py --no-cold
	$(BIN)/python benchmarks/hyperslab.py
	$(BIN)/python benchmarks/pushdown_load.py --requests 100
	$(BIN)/python benchmarks/dataloader.py --quick
	$(BIN)/python benchmarks/evaluation.py
	$(BIN)/python benchmarks/images.py --quick
	$(BIN)/python benchmarks/tensor_tables.py --quick
	$(BIN)/python benchmarks/frozen_split.py --quick
	$(BIN)/python benchmarks/frozen_checks.py --quick
	$(BIN)/python benchmarks/throughput.py --quick
	$(BIN)/python benchmarks/chroma.py --images 128 --reps 2
	$(BIN)/python benchmarks/floors.py --side 2048 --reps 3
	$(BIN)/python benchmarks/per_call.py --quick
	$(BIN)/python benchmarks/fleet.py --side 1024
	$(BIN)/python benchmarks/streaming.py --side 2048 --reps 1 --windows 128 8
	$(BIN)/python benchmarks/loaders.py --samples 512 --reps 1
	$(BIN)/python benchmarks/growth.py --quick
	$(BIN)/python benchmarks/whole_reads.py --quick --reps 3

clean:
	rm -rf $(VENV) build dist src/*.egg-info .pytest_cache .mypy_cache .ruff_cache demo-store benchmarks/out
	rm -f src/tessera/images/_kernel.*.so
