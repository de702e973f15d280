# Two entry points, both self-contained on a fresh machine (see README.md):
#   make run   -- set up .venv and run the whole workflow (CPU interpreter without a GPU)
#   make test  -- set up .venv, run the lint checks (make lint), then the test suite
#   make container-e2e -- build the pinned image and run the workflow in it under a real Apptainer (root,
#                         several GB, tens of minutes; docs/container.md)
PYTHON ?= python3
VENV ?= .venv
CORES ?= 1
BIN := $(VENV)/bin

.PHONY: run test lint format setup clean container-e2e

$(BIN)/snakemake: pyproject.toml env/requirements-ci.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r env/requirements-ci.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

setup: $(BIN)/snakemake

run: setup
	$(BIN)/snakemake --cores $(CORES)

# ruff (lint, import order, format) for Python and snakefmt for the workflow rules; `make format` fixes
lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile workflow/rules

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
	$(BIN)/snakefmt Snakefile workflow/rules

test: lint
	$(BIN)/pytest -q

container-e2e: setup
	KERNELSCOPE_CONTAINER_E2E=1 $(BIN)/pytest -q tests/test_container_e2e.py

clean:
	rm -rf results logs .snakemake
