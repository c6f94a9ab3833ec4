# The README's two commands: `make run` (the manager, on a local control plane when no
# KUBECONFIG is set) and `make test` (unit + integration + e2e). Every target creates the
# virtual environment it needs, so both work on a fresh clone.
SHELL := bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
LOCAL_DIR ?= .local/cluster
PYTEST_ARGS ?=

.PHONY: venv test test-unit test-integration test-e2e lint run cluster-up cluster-down \
        build-assets bench bench-framework clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,lint]'
	touch $(STAMP)

venv: $(STAMP)

# Control-plane binaries are built once from Go modules and cached outside the repo.
build-assets: $(STAMP)
	$(PY) -c 'from manager.envtest import assets; assets.ensure(assets.FULL); print(assets.assets_dir())'

test: $(STAMP) build-assets
	$(PY) -m pytest test -m "unit or integration or e2e" $(PYTEST_ARGS)

test-unit: $(STAMP)
	$(PY) -m pytest test -m unit $(PYTEST_ARGS)

test-integration: $(STAMP)
	$(PY) -m pytest test -m integration $(PYTEST_ARGS)

test-e2e: $(STAMP)
	$(PY) -m pytest test -m e2e $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check manager trainer webhooks test
	$(VENV)/bin/ruff format --check manager trainer webhooks test
	$(VENV)/bin/mypy manager trainer webhooks

run: $(STAMP)
	$(PY) -m trainer.local_run --dir $(LOCAL_DIR)

cluster-up: $(STAMP)
	$(PY) -m manager.envtest up --dir $(LOCAL_DIR) --full --crds config/crd

cluster-down: $(STAMP)
	$(PY) -m manager.envtest down --dir $(LOCAL_DIR)

bench: $(STAMP)
	$(PY) -m pytest test/bench -m bench -s $(PYTEST_ARGS)

# Workqueue ops/s and informer events/s to a no-op reconcile (in-process), then informer
# throughput and memory per cached Pod at 10k Pods against a real kube-apiserver.
bench-framework: $(STAMP) build-assets
	$(PY) -m pytest test/bench/test_framework_core_bench.py -m bench -s $(PYTEST_ARGS)
	$(PY) test/bench/bench_cache.py --pods 10000

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# CRDs are generated from the API models (trainer/api); a unit test fails when they are stale.
.PHONY: manifests
manifests: $(STAMP)
	$(PY) -m trainer.api.crdgen config/crd/bases
	$(PY) -m trainer.api.crdgen --feature-gates=TrainJobStatus=true config/progress/crd
	$(PY) -m trainer.api.crdgen --feature-gates=TrainJobState=true config/state/crd
