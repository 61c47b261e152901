# Every target sets itself up: on a fresh machine `make test` alone creates .venv and runs the tests.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
EXTRAS := dev,torch,agents,repos

.PHONY: install test test-fast pilot rollout lint bench clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ".[$(EXTRAS)]"
	touch $(STAMP)

install: $(STAMP)

## The tests, slow real-training tests included (they fit CI's budget).
test: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 tests

## Only the fast tests.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not slow" tests

## The main job on its default config: the 42-run Patch World pilot sweep and its report.
pilot: $(STAMP)
	$(BIN)/verigap pilot

## The careless engineer on 2000 held-out programs.
rollout: $(STAMP)
	$(BIN)/verigap patchworld rollout --policy careless --n 2000

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

bench: $(STAMP)
	$(BIN)/python benchmarks/patchworld_env.py
	$(BIN)/python benchmarks/pilot.py

clean:
	rm -rf $(VENV) runs .pytest_cache
