# Two commands set everything up on a fresh machine (Python 3.11 + pip):
#   make demo   - create .venv, install, run a 3-broker cluster, produce, consume, verify
#   make test   - create .venv, install, lint, run the whole test suite
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/minikafka demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The whole suite: unit, shell, integration and Spark tests, then the KIP-73 system tests in
# both quota modes and the experiments (quick profile; `--profile full` for more data).
test: $(STAMP) lint
	$(VENV)/bin/pytest -q
	$(VENV)/bin/pytest -q systemtests --profile quick --quota-mode both

test-fast: $(STAMP)
	$(VENV)/bin/pytest -q -m "not integration and not spark"

bench: $(STAMP)
	$(PY) benchmarks/cluster_bench.py

clean:
	rm -rf .minikafka .pytest_cache .ruff_cache .hypothesis
