# golive: two entry points that work on a fresh machine.
#   make demo   set up golive and the bundled local vLLM (CPU) target, run golive against it
#   make test   lint, type-check and run the whole suite (the real local target included)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit target tools apt clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,gpu,ray,k8s]'
	touch $(STAMP)

# The engine venv and converted models live in ~/.cache/golive/target (or
# $GOLIVE_TARGET_CACHE), keyed by their pinned versions; built once (~5 min), then reused.
target: $(STAMP)
	$(BIN)/golive target setup

# Debian tools the tests use: headless Chromium renders report.html; promtool checks the
# generated alerting rules. Installed once when missing (root), else named.
APT := DEBIAN_FRONTEND=noninteractive apt-get install -y -q
tools:
	@command -v chromium >/dev/null || $(MAKE) --no-print-directory apt PKG=chromium
	@command -v promtool >/dev/null || $(MAKE) --no-print-directory apt PKG="--no-install-recommends prometheus"

apt:
	@if [ "$$(id -u)" != 0 ]; then echo "missing: sudo apt-get install $(PKG)"; exit 1; fi
	$(APT) $(PKG) >/dev/null || { apt-get update -q >/dev/null && $(APT) $(PKG) >/dev/null; }

# golive's exit code says the outcome (0 go-live, 10-13 the others); the run completed for
# any of them. Only usage (2) and golive's own errors (3) fail make.
demo: target
	@$(BIN)/golive demo; code=$$?; \
	if [ $$code -eq 0 ] || { [ $$code -ge 10 ] && [ $$code -le 13 ]; }; then \
	  echo "golive demo completed (exit $$code: the verdict's outcome)"; \
	else exit $$code; fi

lint: $(STAMP)
	$(BIN)/ruff check src tests bench compat
	$(BIN)/ruff format --check src tests bench compat

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -m "not target" -q

# -n auto: one worker per core; the real-vLLM tier (and the Ray cluster tests) stay on one
# worker, in order, on one server (tests/conftest.py), beside the pure tiers; the integration
# tier (golive's own client timed against fakes) runs after it, in a second pass. Both passes
# always run; the ten slowest tests of the first are printed.
test: lint typecheck target tools
	@rc=0; \
	$(BIN)/pytest -q -n auto --dist loadgroup --durations=10 -m "not client_timed" || rc=$$?; \
	$(BIN)/pytest -q -n auto --durations=5 -m client_timed || rc=$$?; \
	exit $$rc

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache src/*.egg-info
