# The two commands a new user runs: `make demo` and `make test`. Everything else serves them.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
PY38 ?= $(shell command -v python3.8 2>/dev/null)
STAMP := $(VENV)/.installed

.PHONY: demo test test-py38 lint proto bench venv clean

$(STAMP): pyproject.toml plugin/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e plugin -e '.[test,dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: $(STAMP) test-py38
	$(PY) -m pytest -q

# The plugin must keep working on Python 3.8: run its standard-library tests there.
test-py38:
	@if [ -z "$(PY38)" ]; then \
		if [ -n "$$CI" ]; then echo "python3.8 is required in CI for the plugin's tests"; exit 1; fi; \
		echo "python3.8 not found: skipping the plugin's 3.8 tests"; \
	else \
		PYTHONPATH=plugin $(PY38) -m unittest discover -s tests/plugin38 -t . -q; \
	fi

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	mkdir -p build/typecheck
	ln -sfn ../../daemon build/typecheck/dynolog
	ln -sfn ../../client build/typecheck/dyno
	ln -sfn ../../protos build/typecheck/dynoproto
	ln -sfn ../../certs build/typecheck/dynocerts
	ln -sfn ../../plugin/msmonitor_plugin build/typecheck/msmonitor_plugin
	$(VENV)/bin/mypy -p dynolog -p dyno -p dynocerts -p dynoproto -p msmonitor_plugin
	$(VENV)/bin/mypy --python-version 3.8 -p msmonitor_plugin

proto: $(STAMP)
	$(PY) scripts/gen_proto.py

bench: $(STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) build .pytest_cache .mypy_cache .ruff_cache
