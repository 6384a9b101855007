PYTHON ?= python3

.PHONY: install test test-unit test-integration lint demo bench

install:
	$(PYTHON) -m pip install -e '.[test]'

# Everything CI runs. Integration tests need a Docker daemon (.ci/dockerd-up starts one).
test:
	$(PYTHON) -m pytest tests -q

test-unit:
	$(PYTHON) -m pytest tests/unit -q

test-integration:
	$(PYTHON) -m pytest tests/integration -q

lint:
	$(PYTHON) -m ruff check builder tests bench

demo:
	$(PYTHON) -m builder demo
