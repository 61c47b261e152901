# Every target sets itself up: on a fresh machine `make test` alone creates .venv, installs what
# the tests need (Python packages, and bubblewrap, chromium and chromium-driver through apt when
# run as root) and runs the tests. Each job installs only what it needs: `make pilot` needs only the core.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
CORE_STAMP := $(VENV)/.installed-core
TEST_STAMP := $(VENV)/.installed-test
TEST_EXTRAS := dev,torch,agents,repos,llm

.PHONY: install system-deps test test-fast pilot rollout results docs site lint format bench clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

## The core package alone (NumPy, Gymnasium, plotting): enough for the Patch World jobs.
$(CORE_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

## Everything the test suite imports.
$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q -e ".[$(TEST_EXTRAS)]"
	touch $@ $(CORE_STAMP)

install: $(TEST_STAMP)

## System packages the tests need (.ci/system-packages); installs them when root, else says how.
system-deps:
	.ci/system-deps

## The tests, slow real-training tests included (they fit CI's budget).
test: system-deps $(TEST_STAMP)
	$(BIN)/python -m pytest -q -n 2 tests || { rc=$$?; [ $$rc -ne 5 ] || echo "error: pytest collected no tests"; exit $$rc; }

## Only the fast tests.
test-fast: system-deps $(TEST_STAMP)
	$(BIN)/python -m pytest -q -n 2 -m "not slow" tests

## The main job on its default config: the 42-run Patch World pilot sweep, its report, and
## results/patchworld/pilot.json.
pilot: $(CORE_STAMP)
	$(BIN)/verigap pilot

## The careless engineer on 2000 held-out programs (writes results/patchworld/careless.json).
rollout: $(CORE_STAMP)
	$(BIN)/verigap patchworld rollout --policy careless --n 2000 --save results/patchworld/careless.json

## Regenerate the tables in README.md and docs/ from results/ (`make docs` after new results).
docs: $(CORE_STAMP)
	$(BIN)/verigap docs

## One static site from results/ (and runs/ where present): site/index.html.
site: $(CORE_STAMP)
	$(BIN)/verigap site

## Lint and the formatter's check (what CI runs); `make format` rewrites in place.
lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

format: $(TEST_STAMP)
	$(BIN)/ruff format src tests benchmarks

bench: $(TEST_STAMP)
	$(BIN)/python benchmarks/patchworld_env.py
	$(BIN)/python benchmarks/pilot.py

clean:
	rm -rf $(VENV) runs site .pytest_cache
