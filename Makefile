# The two commands a new user runs: `make demo` and `make test`. Everything else serves them.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
# A working Python 3.8 (pyenv's shim exists even when 3.8 is not selected, so try each candidate).
PY38 ?= $(shell for p in python3.8 $$HOME/.pyenv/versions/3.8*/bin/python3.8; do \
	$$p -c 'import sys; assert sys.version_info[:2] == (3, 8)' >/dev/null 2>&1 && echo $$p && break; done)
STAMP := $(VENV)/.installed
# A working Python 3.9, the oldest the daemon and dyno support (found as PY38 is).
PY39 ?= $(shell for p in python3.9 $$HOME/.pyenv/versions/3.9*/bin/python3.9; do \
	$$p -c 'import sys; assert sys.version_info[:2] == (3, 9)' >/dev/null 2>&1 && echo $$p && break; done)
VENV39 := .venv39
STAMP39 := $(VENV39)/.installed

.PHONY: demo test setup check test-py38 test-py39 peers lint proto bench venv clean

$(STAMP): pyproject.toml plugin/pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e plugin -e '.[test,dev]'
	touch $(STAMP)

venv: $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: $(STAMP) test-py38 test-py39 peers
	$(PY) -m pytest -q --durations=12  # the slowest, to see how near each comes to the 60 s timeout

# Everything the tests fetch from the network, once: the venvs (.venv, .venv39) and the peers. After it
# `make test` runs offline (it runs these first, each a no-op once made).
setup: $(STAMP) peers
	@if [ -n "$(PY39)" ]; then $(MAKE) --no-print-directory $(STAMP39); fi

# Published code the tests run against (msserviceprofiler, torch-npu, msprof-analyze, MindSpore), fetched
# once into .peers/ before any test runs, so no test downloads; reused by later runs (tests/peers.py).
peers: $(STAMP)
	$(PY) tests/peers.py

# The edit loop: unit and contract tests, without those marked torch (a real PyTorch training process)
# or slow (tests/conftest.py says which and why); about 3 minutes on two cores. `make test` runs them all.
check: $(STAMP)
	$(PY) -m pytest -q -m "not torch and not slow"

# The plugin must keep working on Python 3.8: run its standard-library tests there.
test-py38:
	@if [ -z "$(PY38)" ]; then \
		if [ -n "$$CI" ]; then echo "python3.8 is required in CI for the plugin's tests"; exit 1; fi; \
		echo "python3.8 not found: skipping the plugin's 3.8 tests"; \
	else \
		$(PY38) -m compileall -q plugin/msmonitor_plugin plugin/msmonitor_contract && \
		PYTHONPATH=plugin $(PY38) -m unittest discover -s tests/plugin -q; \
	fi

# Set-up (the network): Python 3.9 with the runtime dependencies the wheels declare, no extras, no tools.
$(STAMP39): pyproject.toml plugin/pyproject.toml
	rm -rf $(VENV39)
	$(PY39) -m venv $(VENV39)
	$(VENV39)/bin/pip install -q --upgrade pip
	$(VENV39)/bin/pip install -q ./plugin .
	touch $(STAMP39)

# The daemon and dyno as operators install them, on Python 3.9: this checkout's two wheels, built and
# installed offline at each run, then tests/py39_smoke.py (imports, daemon, dyno, mutual TLS; seconds).
test-py39: $(STAMP)
	@if [ -z "$(PY39)" ]; then \
		if [ -n "$$CI" ]; then echo "python3.9 is required in CI for the daemon's and dyno's 3.9 test"; exit 1; fi; \
		echo "python3.9 not found: skipping the daemon's and dyno's 3.9 test"; \
	else \
		$(MAKE) --no-print-directory $(STAMP39) && \
		rm -rf $(VENV39)/wheels && \
		$(PY) -m pip wheel -q --no-deps --no-build-isolation -w $(VENV39)/wheels ./plugin . && \
		$(VENV39)/bin/pip install -q --no-deps --no-index --force-reinstall $(VENV39)/wheels/*.whl && \
		$(VENV39)/bin/python tests/py39_smoke.py; \
	fi

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy -p dynolog -p dyno -p dynocerts -p dynoproto -p msmonitor_plugin -p msmonitor_contract
	$(VENV)/bin/mypy --python-version 3.8 -p msmonitor_plugin -p msmonitor_contract

proto: $(STAMP)
	$(PY) scripts/gen_proto.py

bench: $(STAMP)
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) $(VENV39) build .pytest_cache .mypy_cache .ruff_cache
