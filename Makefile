# golive: two entry points that work on a fresh machine.
#   make demo   set up golive and the bundled local vLLM (CPU) target, run golive against it
#   make test   lint, type-check and run the whole suite (the real local target included)

PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test lint typecheck unit target browser clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,gpu]'
	touch $(STAMP)

# The engine venv and converted models live in ~/.cache/golive/target (or
# $GOLIVE_TARGET_CACHE), keyed by their pinned versions; built once (~5 min), then reused.
target: $(STAMP)
	$(BIN)/golive target setup

# Headless Chromium renders report.html in the report test (Debian's package).
browser:
	@command -v chromium >/dev/null || { \
	  if [ "$$(id -u)" = 0 ]; then \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null \
	    || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; \
	  else echo "chromium missing: sudo apt-get install chromium (the report test needs it)"; exit 1; fi; }

demo: target
	$(BIN)/golive demo

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/pytest -m "not target" -q

test: lint typecheck target browser
	$(BIN)/pytest -q --durations=10

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache src/*.egg-info
