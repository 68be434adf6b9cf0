# `make demo` (set-up, then the main job) and `make test` (set-up, then every test but the slow ones);
# `make test-fast` and `make test-<track>` for a developer's edit-test loop (no set-up step).
SHELL := /bin/bash
VENV := .venv
KVDS := $(VENV)/bin/kvds
PYTEST := $(VENV)/bin/python -m pytest
TRACKS := core io ebpf vm qemu policy net remote e2e

.PHONY: setup demo test test-fast test-slow clean $(addprefix test-,$(TRACKS))

setup:
	bash harness/setup/setup.sh

demo: setup
	$(KVDS) run --quick

test: setup
	$(PYTEST) -q -rs -m "not slow" tests

# Every test that boots no QEMU guest (the `guest` marker, set by tests/conftest.py) and is not slow.
test-fast:
	$(PYTEST) -q -m "not slow and not guest" tests

# One track's tests (tests/<track>/), guest tests included, slow ones not: make test-io, make test-qemu, ...
$(addprefix test-,$(TRACKS)): test-%:
	$(PYTEST) -q -rs -m "not slow" tests/$*

# Guest-lab experiments and benchmarks under TCG + KASAN (each a minute or more).
test-slow: setup
	$(PYTEST) -q -rs -m slow tests

clean:
	rm -rf $(VENV) build *.egg-info
