# Two commands set everything up on a fresh machine (Python 3.11 + pip):
#   make demo   - create .venv, install, move replicas under a KIP-73 throttle while a
#                 producer runs (3 brokers), read everything back, verify (docs/demo.md)
#   make test   - create .venv, install, lint, run the whole test suite
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# The exact versions, with their hashes, that development and CI install: the [dev] extra
# (analysis included) resolved by pip-compile. A plain pip requirements file, so a fresh machine
# with nothing but pip installs it; `make lock` re-resolves it after pyproject.toml changes.
LOCK := requirements-dev.lock
PIP_TOOLS := pip-tools==7.6.2

.PHONY: setup bytecode demo test test-fast mutants lint bench clean lock

# The lock's packages (hash-checked: pip refuses a file whose hash is not in the lock, and a
# dependency the lock does not name), then minikafka itself, editable, taking nothing more.
$(STAMP): pyproject.toml $(LOCK)
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --require-hashes -r $(LOCK)
	$(PY) -m pip install -q --no-deps -e .
	$(PY) -m pip check
	touch $(STAMP)

# Re-resolve the lock from pyproject.toml, keeping every pin it already has that still fits
# (`make lock PIP_COMPILE_FLAGS=--upgrade` for the newest of everything). pip-tools runs from a
# venv of its own, so it never enters the lock or the project's venv.
lock:
	test -x .lock-venv/bin/pip-compile || \
		(python3 -m venv .lock-venv && .lock-venv/bin/pip install -q $(PIP_TOOLS))
	CUSTOM_COMPILE_COMMAND="make lock" .lock-venv/bin/pip-compile -q --generate-hashes \
		--extra dev --strip-extras --no-emit-index-url --no-emit-find-links \
		$(PIP_COMPILE_FLAGS) -o $(LOCK) pyproject.toml

setup: $(STAMP) bytecode

# minikafka's own bytecode, as pip writes it for an installed (non-editable) package: a node
# process then starts without compiling its 130 modules (about 0.2 s of a 0.7 s import, where
# PYTHONDONTWRITEBYTECODE is set). Only changed modules are compiled again.
bytecode: $(STAMP)
	$(PY) -m compileall -q minikafka cluster

demo: $(STAMP) bytecode
	$(VENV)/bin/minikafka demo

lint: $(STAMP)
	$(VENV)/bin/ruff check .

# The whole suite: unit, shell, integration and Spark tests, then the KIP-73 system tests in
# both quota modes and the experiments (quick profile; `--profile full` for more data). Each on
# two pytest-xdist workers, a test module per worker (--dist loadfile: a module's fixtures and
# order hold). Two clusters then run at once: their moves are throttle-bound, and the verdicts
# held on 2 cores (sessions of 11-28: the same ratios as one at a time). Progress lines of the
# system tests show without -n.
test: $(STAMP) bytecode lint
	$(VENV)/bin/pytest -q -n 2 --dist loadfile
	$(VENV)/bin/pytest -q -n 2 --dist loadfile systemtests --profile quick --quota-mode both

# The KIP-73 verdicts against deliberate bugs (systemtests/test_mutants.py): about 14 minutes.
mutants: $(STAMP) bytecode
	$(VENV)/bin/pytest -q systemtests -m mutants

test-fast: $(STAMP)
	$(VENV)/bin/pytest -q -m "not integration and not spark"

bench: $(STAMP) bytecode
	$(PY) benchmarks/cluster_bench.py

clean:
	rm -rf .minikafka .pytest_cache .ruff_cache .hypothesis .lock-venv
