# The two commands: `make demo` (set-up, then the main job) and `make test` (set-up, then every test).
SHELL := /bin/bash
VENV := .venv
KVDS := $(VENV)/bin/kvds

.PHONY: setup demo test test-slow clean

setup:
	bash harness/setup/setup.sh

demo: setup
	$(KVDS) run --quick

test: setup
	$(VENV)/bin/python -m pytest -q -rs -m "not slow" tests

# Guest-lab experiments that take ~10 minutes each under TCG + KASAN.
test-slow: setup
	$(VENV)/bin/python -m pytest -q -rs -m slow tests

clean:
	rm -rf $(VENV) build *.egg-info
