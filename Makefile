# Two commands from a fresh clone (Python 3.11 is all they need):
#   make demo   installs into .venv, then runs the SVM multiverse sweep
#   make test   installs into .venv, then builds the docs and runs the whole test suite
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PIP_VERSION := 26.3

# Each Python process these recipes start (and what those start: sweeps, Ray workers, writers, the
# sweeper commands of the tests, thousands in make test) writes the bytecode of a module it is the first
# to import, in .venv and in __pycache__/ beside our modules (ignored by git), and later ones read it.
# CI images set PYTHONDONTWRITEBYTECODE=1, under which each process compiled from source every module
# not compiled before; the install compiled all 16,300 modules of .venv for them (22 s of both cores
# here), of which make test imports 8,160 (14.5 CPU-s to compile). An empty value is Python's default.
# NOTE: docs/decisions/0066-bytecode-on-first-import.md
export PYTHONDONTWRITEBYTECODE :=

.PHONY: install system-deps demo docs bytecode lint lint-imports test test-unit test-integration test-parallel \
	test-serial bench lock clean

# The lock pins every package, so its two halves install side by side with --no-deps (pip check
# confirms nothing is missing): torch's CUDA wheels, I/O-bound (44 s here), beside the other 172
# packages (35 s). One pip took both in turn.
HEAVY_WHEELS := ^(torch|torchvision|triton|nvidia-[a-z0-9-]+)==

# pip compiles every module it installs to bytecode, on one core (~55 CPU-s here, half the install):
# --no-compile. Python writes a module's bytecode the first time a process imports it instead (below).

$(STAMP): requirements.lock pyproject.toml
	$(PYTHON) -c 'import sys; assert sys.version_info[:2] == (3, 11), "Python 3.11 is required, found " + sys.version'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet pip==$(PIP_VERSION)
	grep -i -E "$(HEAVY_WHEELS)" requirements.lock > $(VENV)/heavy.lock
	grep -v -i -E "$(HEAVY_WHEELS)" requirements.lock > $(VENV)/light.lock
	$(BIN)/python -m pip install --quiet --no-compile --no-deps -r $(VENV)/heavy.lock & heavy=$$!; \
	$(BIN)/python -m pip install --quiet --no-compile --no-deps -r $(VENV)/light.lock; light=$$?; \
	wait $$heavy && [ $$light -eq 0 ]
	$(BIN)/python -m pip check
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

install: $(STAMP)

# Hydra overrides for the demo's sweep: make demo OVERRIDES='hydra.sweeper.num_trials=64'
demo: $(STAMP)
	$(BIN)/python experiments/svm.py --multirun hydra/sweeper=multiverse $(OVERRIDES)

# The docs site (mkdocs.yml, docs/) into site/. --strict: a broken link, anchor or API reference,
# or a config field without its comment (docs/settings.md is generated from them), fails it.
# Serve it while writing: .venv/bin/mkdocs serve. NO_MKDOCS_2_WARNING hides the end-of-life banner
# Material prints on every build (a print, not a warning).
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir site

# The steps that use one core each run side by side: the install (pip, I/O-bound) beside system-deps (apt,
# when PostgreSQL or Chromium is missing: 29 s here, mostly download), then docs, bytecode and lint (mkdocs
# 4 s, mypy's first run 13 s), then the two test phases.
# --output-sync keeps each step's output in one block (GNU make 4; macOS's make 3.81 has no such option).
SYNC := $(if $(filter output-sync,$(.FEATURES)),--output-sync=target)
test:
	@$(MAKE) --no-print-directory -j2 $(SYNC) $(STAMP) system-deps
	@$(MAKE) --no-print-directory -j3 $(SYNC) docs bytecode lint
	@$(MAKE) --no-print-directory test-parallel test-serial

# The bytecode of what collecting the tests imports, written once before the two pytest workers start
# (else each compiles the same modules at once), with pytest's rewritten test modules: pytest reads those
# from __pycache__/, so each collection after this one skips rewriting their asserts (~5 CPU-s).
bytecode: $(STAMP)
	@$(BIN)/python -m pytest --collect-only -q -p no:cacheprovider > /dev/null

# pytest exits 5 when it collects no test: that is a failure here, said out loud.
define run_pytest
	$(BIN)/python -m pytest $(1); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no test for: $(1)"; exit 1; fi; exit $$rc
endef

# The layers' import contracts ([tool.importlinter] in pyproject.toml).
lint-imports: $(STAMP)
	$(BIN)/lint-imports --no-cache

# ruff and mypy as configured in pyproject.toml ([tool.ruff], [tool.mypy]), then the layers.
lint: lint-imports
	$(BIN)/ruff check sweeper hydra_plugins experiments bench tests
	$(BIN)/mypy

# The unit tests alone, or the integration tests alone (then those marked serial).
test-unit: lint-imports
	@$(call run_pytest,-m "not integration" -q -n 2)

# PostgreSQL and Chromium for the cluster tests, from apt when absent (scripts/install-test-services.sh).
system-deps:
	@bash scripts/install-test-services.sh

# Two pytest-xdist workers (2 cores: the tests wait on Ray, servers and subprocesses part of the time),
# a module's tests on one worker (--dist loadscope: its module fixtures start once), then the tests
# marked serial alone.
test-integration: $(STAMP) system-deps
	@$(call run_pytest,-m "integration and not serial" -q -n 2 --dist loadscope --no-loadscope-reorder --durations=25)
	@$(MAKE) --no-print-directory test-serial

# make test: unit and integration tests in one run of two workers. The integration tests wait on
# Ray, servers and subprocesses part of the time; the longest modules start first (tests/conftest.py's
# LONGEST_FIRST, kept in that order by --no-loadscope-reorder), and the unit tests (collected last)
# fill the gaps and the end of the run, where the last long integration test would leave a core idle.
test-parallel: $(STAMP) system-deps
	@$(call run_pytest,-m "not serial" -q -n 2 --dist loadscope --no-loadscope-reorder --durations=25)

# Only tests/integration is collected (the unit tests' collection, ~7 s, selected none of them).
test-serial: $(STAMP) system-deps
	@$(call run_pytest,tests/integration -m "integration and serial" -q --durations=5)

BENCH_STAMP := $(VENV)/.installed-bench

# The bench extra (BoTorch) goes into the same .venv, pinned by requirements-bench.lock.
$(BENCH_STAMP): $(STAMP) requirements-bench.lock
	$(BIN)/python -m pip install --quiet --no-deps -r requirements-bench.lock
	$(BIN)/python -m pip check
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench all

# Re-pin every dependency from the current .venv (after changing pyproject.toml); the bench
# extra's packages stay in requirements-bench.lock.
lock:
	$(BIN)/python -m pip freeze --all --exclude-editable | grep -v -E '^(multiverse-sweeper|pip)==' \
		| grep -v -i -E "^($$(sed -n 's/==.*//p' requirements-bench.lock | paste -sd'|' -))(==| @ )" > requirements.lock

clean:
	rm -rf $(VENV) multirun outputs mlruns.db mlruns mlartifacts .pytest_cache test-artifacts site
