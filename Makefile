# Two entry points, both self-contained on a fresh machine (see README.md):
#   make run   -- set up .venv and run the whole workflow (CPU interpreter without a GPU)
#   make test  -- set up .venv and run the test suite
PYTHON ?= python3
VENV ?= .venv
CORES ?= 1
BIN := $(VENV)/bin

.PHONY: run test setup clean

$(BIN)/snakemake: pyproject.toml env/requirements-ci.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -r env/requirements-ci.txt
	$(BIN)/pip install --quiet --no-deps -e .
	touch $@

setup: $(BIN)/snakemake

run: setup
	$(BIN)/snakemake --cores $(CORES)

test: setup
	$(BIN)/pytest -q

clean:
	rm -rf results logs .snakemake
