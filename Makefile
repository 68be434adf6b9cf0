# `make demo` (set-up, then the main job) and `make test` (set-up, then every test but the slow ones);
# `make test-fast` and `make test-<track>` for a developer's edit-test loop (no set-up step).
SHELL := /bin/bash
VENV := .venv
KVDS := $(VENV)/bin/kvds
PYTEST := $(VENV)/bin/python -m pytest
TRACKS := core io ebpf vm qemu policy net remote e2e

.PHONY: setup demo test test-fast test-slow screenshot clean $(addprefix test-,$(TRACKS))

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

# The HTML report's top (its first table: the e2e factorial table) as a PNG from headless chromium, which this target
# installs when missing (Debian's package): make screenshot RUN=<run or suite id> PNG=<file>. Not part of `make test`.
RUN ?= latest
PNG ?= report-first-table.png
screenshot:
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)
	out=$$(mktemp -d) && $(KVDS) report $(RUN) --out $$out >/dev/null && \
	chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1100 \
		--screenshot=$(abspath $(PNG)) file://$$out/report.html; status=$$?; rm -rf $$out; exit $$status

clean:
	rm -rf $(VENV) build *.egg-info
