# distcheck: `make check-local` (the main job) and `make test` (the tests).
# Both create .venv when missing and install the package with all extras, pinned by constraints.txt.

VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.distcheck-installed
# `make test`: every test but the slow ones not marked ci (CI has 20 minutes on 2 cores); `make test-all`: every test
PYTEST_ARGS ?= -m "not slow or ci"
CHECK_ARGS ?=

.PHONY: install test test-all check-local lint clean

install: $(STAMP)

EXAMPLE := examples/autograd-functions

$(STAMP): pyproject.toml constraints.txt $(EXAMPLE)/pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -c constraints.txt -e '.[all]'
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e $(EXAMPLE)
	touch $(STAMP)

# pytest exits 5 when it collects no test: that is not a failure; every other status is.
test: $(STAMP)
	$(PY) -m pytest $(PYTEST_ARGS); status=$$?; if [ $$status -eq 5 ]; then status=0; fi; exit $$status

test-all: $(STAMP)
	$(MAKE) test PYTEST_ARGS=

check-local: $(STAMP)
	$(PY) -m distcheck run --suite torch-opinfo --checks grad,gradgrad $(CHECK_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check distcheck tests benchmarks cluster examples
	$(VENV)/bin/ruff format --check distcheck tests benchmarks cluster examples

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache
