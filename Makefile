# A newcomer needs two commands: `make test` and `make demo`. Both set up what they need
# (.ci/setup: Debian packages when root, a venv in .venv, a Docker engine).
VENV ?= .venv
PY := $(VENV)/bin/python
export VENV

.PHONY: setup test test-random test-unit test-integration lint demo install mutate bench bench-tools bench-real

setup:
	.ci/setup

# Everything CI runs, in file order (-p no:randomly: pytest-randomly is installed but off);
# the 30 slowest tests are listed at the end (where the suite's time goes). Two workers
# (pytest-xdist), a whole module to a worker (--dist loadfile: a module's one cold build and
# the tests on it stay in one process): half of an integration module's time is waits
# (downloads, container starts, fsync), which the other worker fills. The modules go out
# costliest first (tests/helpers_order.py; --no-loadscope-reorder keeps xdist from putting
# the modules with the most tests first instead). TEST_WORKERS=1 runs the suite in one
# worker; more workers share the same cores with each build's jobs.
TEST_WORKERS ?= 2
test: setup
	$(PY) -m pytest tests -q -p no:randomly -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --durations=30

# The same suite shuffled (pytest-randomly): an order dependence between tests fails here.
# The seed is printed first: replay that order with `make test-random SEED=<n>`;
# TESTS=tests/unit shuffles the unit tests only. The same workers as `make test`: the module
# order and the order of the tests in each module are shuffled (one seed for all workers;
# --no-loadscope-reorder: the shuffled module order is the one the workers get).
TESTS ?= tests
ifeq ($(SEED),)
SEED := $(shell od -An -N4 -tu4 /dev/urandom | tr -d ' ')
endif
test-random: setup
	@echo "random order, seed $(SEED) (replay: make test-random SEED=$(SEED))"
	$(PY) -m pytest $(TESTS) -q -p randomly -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder --randomly-seed=$(SEED)

test-unit: setup
	$(PY) -m pytest tests/unit -q

test-integration: setup
	$(PY) -m pytest tests/integration -q

# Mutation testing (mutmut 3, the dev extra) of the modules [tool.mutmut] in pyproject.toml
# lists, against their unit tests; scores and every surviving mutant explained: docs/testing.md.
# Not part of CI (about 9 minutes for the current list on 2 cores; MUTATE="builder.validate*" runs one module).
mutate: setup
	$(PY) -m pip install -q -e '.[dev]'
	rm -rf mutants
	$(VENV)/bin/mutmut run $(MUTATE)
	$(VENV)/bin/mutmut results

# Benchmarks (not tests): ratios measured in one run, median of rounds with the spread.
# bench-tools installs the host tools they compare against (root: Debian packages).
BENCH_TOOLS := redis-server ccache cmake ninja
bench-tools:
	@missing=""; for t in $(BENCH_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y redis-server ccache cmake ninja-build; \
	  else echo "missing:$$missing; run as root or: sudo apt-get install -y redis-server ccache cmake ninja-build"; exit 2; fi; \
	fi

bench: setup bench-tools
	$(PY) bench/pipeline.py $(if $(ROUNDS),--rounds $(ROUNDS))

# A real extension (torch-spline-conv from PyPI) by builder and by host pip, cold and warm:
# about 10 minutes a round on 2 cores (needs the torch 2.13.0 cp311 wheel in PIP_FIND_LINKS).
bench-real: setup bench-tools
	$(PY) bench/real.py $(if $(ROUNDS),--rounds $(ROUNDS))

lint: setup
	$(PY) -m ruff check builder tests bench

# The whole pipeline on the bundled example repos; results stay in .builder-demo.
demo: setup
	$(PY) -m builder demo --workdir $(CURDIR)/.builder-demo

# Kept for muscle memory: the venv is the install.
install: setup
