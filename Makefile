# The two commands a newcomer runs: `make run` and `make test`. Both set everything up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint setup clean browser

setup: $(STAMP)

# torch first, pinned: the CPU build lies on the build machines' disk; an unpinned torch
# (asked for by transformers) would pull a multi-GB CUDA build.
# The C source too: an edited kernel is rebuilt by the editable install.
# On a terminal pip shows what it fetches and builds, with progress bars; elsewhere (CI, logs) it is quiet.
$(STAMP): pyproject.toml setup.py extproc/models/_lexical_kernel.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install $$([ -t 1 ] || echo --quiet) torch==2.13.0
	$(BIN)/pip install $$([ -t 1 ] || echo --quiet) -e '.[test]'
	touch $(STAMP)

# The console's browser test drives Debian's Chromium (Playwright's own browser download cannot
# work here); installed when missing and we are root, as on the build machines and CI.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || echo "chromium missing and not root: the console browser test will skip (fail under CI=true)"

test: $(STAMP) browser
	$(BIN)/ruff check extproc tests
	$(BIN)/mypy extproc
	$(BIN)/pytest -q

lint: $(STAMP)
	$(BIN)/ruff check extproc tests
	$(BIN)/mypy extproc

# Envoy (127.0.0.1:8801, the checked-in envoy/envoy.yaml), the ext_proc server (127.0.0.1:50051)
# and one demo upstream per policy model, in the foreground; Ctrl-C stops them all.
run: $(STAMP)
	$(BIN)/extproc stack --policy policies/default.yaml --envoy-config envoy/envoy.yaml

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
