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
# The API level (docs/levels.md) `make run`, `make install`/`uninstall`, `make cluster-up`,
# `make deploy`/`undeploy`, `make conformance`, `make build-originals`, `make build-kueue` and
# `make test-upstream-e2e` work at: v2.3 (the default: config/default = config/overlays/v2.3, its
# CRDs, webhooks, RBAC, kubeflow-trainer-public, Trainer v2.3.0's runtimes) or v2.1
# (config/overlays/v2.1, config/runtimes); the manager runs with --api-level=$(LEVEL).
LEVEL ?= v2.3
# The level's manifests as trainer/levels names them (ApiLevel: manifests, runtimes, CRD files).
LEVEL_PATHS = $(PY) -m trainer.install --level '$(LEVEL)' paths
# `make run` ports on 127.0.0.1 (override them to run two at once) and, with KUBECONFIG set,
# the address the cluster calls the webhooks at (empty: webhooks are not registered).
WEBHOOK_HOST ?=
WEBHOOK_PORT ?= 9443
METRICS_PORT ?= 8443
HEALTH_PORT ?= 8081
# The controller-manager image `make deploy` runs (built by `make docker-build`).
IMG ?= trainer-controller-manager-py:latest
DEPLOY_TIMEOUT ?= 300s
# The kubectl of the control-plane asset cache (built once like the other binaries; it has
# kustomize built in). Override with KUBECTL=kubectl to use your own.
KUBECTL ?= $(shell $(PY) -c 'from manager.envtest import assets; print(assets.ensure(["kubectl"])["kubectl"])')

.PHONY: venv test test-unit test-integration test-e2e test-repeat test-chaos test-fuzz test-realnode test-k8s-matrix lint run cluster-up cluster-down \
        build-assets bench bench-burst bench-admission bench-kueue bench-framework bench-mirror bench-floor bench-report bench-scale clean install uninstall deploy undeploy \
        conformance build-originals spec-coverage test-upstream-e2e build-upstream-e2e test-kueue build-kueue \
        conformance-kueue

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,lint]'
	touch $(STAMP)

venv: $(STAMP)

# Control-plane binaries are built once from Go modules and cached outside the repo.
build-assets: $(STAMP)
	$(PY) -c 'from manager.envtest import assets; assets.ensure(assets.FULL); print(assets.assets_dir())'

# The unit and integration tiers in one pytest process and the e2e tier in another, side by side
# (test/tiers.py): the e2e tier waits on local clusters much of the time.
test: $(STAMP) build-assets
	$(PY) test/tiers.py -m "not kueue_full and not realnode and not k8s_v1_34" $(PYTEST_ARGS)

test-unit: $(STAMP)
	$(PY) -m pytest test -m unit $(PYTEST_ARGS)

test-integration: $(STAMP)
	$(PY) -m pytest test -m integration $(PYTEST_ARGS)

test-e2e: $(STAMP)
	$(PY) -m pytest test -m e2e $(PYTEST_ARGS)

# A flake detector: the tests TESTS (pytest ids) run N times with a busy-loop CPU hog on every
# core (nice 19, always killed at the end, Ctrl-C included); fails on any failed run and prints
# the failure rate with each failed run's number and failed test ids (test/repeat.py).
TESTS ?=
N ?= 10
test-repeat: $(STAMP)
	@test -n "$(TESTS)" || { echo 'make test-repeat: name the tests, e.g. TESTS="test/unit/test_x.py::test_y" N=20' >&2; exit 2; }
	$(PY) test/repeat.py --runs $(N) -- $(TESTS) $(PYTEST_ARGS)

# The full chaos run (docs/reliability.md), once per API level (one cluster each): 500 TrainJobs
# under kube-apiserver kills, etcd compaction, leader SIGKILLs and proxy faults; figures to
# $(CHAOS_OUT) with the level before the suffix (chaos-v2_1.json, chaos-v2_3.json). CHAOS_<PARAM>
# overrides a parameter of test/chaos/harness.py Params (e.g. CHAOS_TRAINJOBS=200, CHAOS_SEED=7);
# CHAOS_LEVELS=v2.3 runs one level.
CHAOS_OUT ?= chaos-results/chaos.json
test-chaos: $(STAMP) build-assets
	CHAOS_OUT=$(CHAOS_OUT) $(PY) -m pytest test/chaos -m chaos -s $(PYTEST_ARGS)

# Admission and reconciler fuzzing in full: FUZZ_EXAMPLES generated AdmissionReviews
# against the running manager's webhook server (`make test` runs a reduced count), then the
# admitted objects written to a real API server. FUZZ_SEED=<n> draws a different sequence.
FUZZ_EXAMPLES ?= 10000
FUZZ_OBJECTS ?= 400
test-fuzz: $(STAMP) build-assets
	FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) FUZZ_OBJECTS=$(FUZZ_OBJECTS) $(PY) -m pytest test/integration/fuzz -s $(PYTEST_ARGS)

# mypy is strict on manager/, trainer/ and webhooks/ (pyproject [tool.mypy]);
# lint-imports checks the layering contracts of pyproject's [tool.importlinter].
lint: $(STAMP)
	$(VENV)/bin/ruff check manager trainer webhooks test
	$(VENV)/bin/ruff format --check manager trainer webhooks test
	$(VENV)/bin/mypy manager trainer webhooks
	$(VENV)/bin/lint-imports

# How many catalogue scenarios of docs/behaviour the tests' `# spec:` markers cover, per area;
# fails when a marker names an id the catalogue does not have.
spec-coverage:
	$(PYTHON) test/spec_coverage.py --list

run: $(STAMP)
	$(PY) -m trainer.local_run --dir $(LOCAL_DIR) --level '$(LEVEL)' --webhook-host '$(WEBHOOK_HOST)' \
	  --webhook-port $(WEBHOOK_PORT) --metrics-port $(METRICS_PORT) --health-port $(HEALTH_PORT)

# The CRDs and the shipped ClusterTrainingRuntimes of LEVEL into the cluster of KUBECONFIG (or
# ~/.kube/config), server-side; `uninstall` deletes them again (and webhook configurations a
# `make run` left behind).
install: $(STAMP)
	$(PY) -m trainer.install install --level '$(LEVEL)'

uninstall: $(STAMP)
	$(PY) -m trainer.install uninstall --level '$(LEVEL)'

# The whole controller-manager in kubeflow-system (the level's manifests with IMG: config/default
# = config/overlays/v2.3, or config/overlays/v2.1 with LEVEL=v2.1), then the level's shipped runtimes once the Deployment is ready: their webhook
# needs a running manager.
# DEPLOY_PATCH=<file>: a kustomize patch (strategic merge, with its target's kind and name)
# applied on top, e.g. a toleration and nodeSelector for a tainted node (docs/realnode.md).
deploy: $(STAMP)
	@set -e; kubectl='$(KUBECTL)'; img='$(IMG)'; name="$$img"; tag=latest; \
	manifests=$$($(LEVEL_PATHS) manifests); runtimes=$$($(LEVEL_PATHS) runtimes); \
	case "$${img##*/}" in *:*) name="$${img%:*}"; tag="$${img##*:}";; esac; \
	overlay=.local/deploy; mkdir -p "$$overlay"; \
	printf 'apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ../../%s\nimages:\n  - name: trainer-controller-manager-py\n    newName: %s\n    newTag: "%s"\n' \
	  "$$manifests" "$$name" "$$tag" > "$$overlay/kustomization.yaml"; \
	if [ -n '$(DEPLOY_PATCH)' ]; then cp '$(DEPLOY_PATCH)' "$$overlay/deploy-patch.yaml"; \
	  printf 'patches:\n  - path: deploy-patch.yaml\n' >> "$$overlay/kustomization.yaml"; fi; \
	echo "make deploy: $$manifests with image $$name:$$tag"; \
	"$$kubectl" apply --server-side -k "$$overlay"; \
	"$$kubectl" -n kubeflow-system rollout status deployment/kubeflow-trainer-controller-manager --timeout=$(DEPLOY_TIMEOUT); \
	"$$kubectl" apply --server-side -k "$$runtimes"

# `make undeploy` removes what `make deploy` applied, the CRDs with every TrainJob, JobSet and
# runtime stored in them, and returns while TrainJobs still name a shipped runtime: the runtimes
# are marked for deletion without waiting (one in use keeps its finalizer), then the CRDs are
# deleted while the manager still runs, so it drops the in-use finalizer as the API server
# removes the TrainJobs, then the manager itself (docs/realnode.md, "make undeploy").
undeploy: $(STAMP)
	@set -e; kubectl='$(KUBECTL)'; \
	manifests=$$($(LEVEL_PATHS) manifests); runtimes=$$($(LEVEL_PATHS) runtimes); \
	crds=; for f in $$($(LEVEL_PATHS) crds); do crds="$$crds -f $$f"; done; \
	"$$kubectl" delete --ignore-not-found --wait=false -k "$$runtimes"; \
	"$$kubectl" delete --ignore-not-found --timeout=$(DEPLOY_TIMEOUT) $$crds; \
	"$$kubectl" delete --ignore-not-found -k "$$manifests"

cluster-up: $(STAMP)
	@set -e; crds=$$($(LEVEL_PATHS) crds); \
	$(PY) -m manager.envtest up --dir $(LOCAL_DIR) --full --crds $$crds

cluster-down: $(STAMP)
	$(PY) -m manager.envtest down --dir $(LOCAL_DIR)

# Differential conformance: every scenario of test/conformance/scenarios applied to a local
# cluster served by this manager and to one served by the Go jobset/trainer managers (built from
# the Go module proxy on first use, cached beside the control-plane binaries). Exit 1 on any
# difference not listed in trainer/conformance/divergences.yaml. LEVEL is the API level both
# sides run (docs/levels.md: v2.3, the default, or v2.1: the Go originals of that level, its CRDs,
# webhooks and runtimes, the scenarios of that level). CONFORMANCE_ARGS passes options (e.g. your
# own manifest files, --kubeconfig-ours/--kubeconfig-theirs). MIGRATE_FROM=v2.1 (with LEVEL=v2.3)
# runs the v2.1 scenarios on a v2.1 cluster, migrates it with `migrate --to v2.3` on both sides,
# then compares what each side's v2.3 managers make of the migrated objects (docs/conformance.md).
CONFORMANCE_ARGS ?=
MIGRATE_FROM ?=
conformance: $(STAMP) build-assets build-originals
	$(PY) -m trainer conformance --level $(LEVEL) $(if $(MIGRATE_FROM),--migrate-from $(MIGRATE_FROM)) $(CONFORMANCE_ARGS)

build-originals: $(STAMP)
	$(PY) -m trainer conformance --build-only --level $(LEVEL)

# Upstream's own e2e suites of the API level's releases (LEVEL=v2.1: test/e2e of jobset v0.10.1,
# 10 specs, and trainer v2.1.0, 2 specs; LEVEL=v2.3: jobset v0.12.0, 14 specs, and trainer
# v2.3.0, 12 specs), compiled with `go test -c` from the Go module proxy and cached beside the Go
# originals, run unchanged on a full local cluster served by this manager at that level and on
# one served by the level's Go managers (KWOK pod timing: see docs/conformance.md).
# UPSTREAM_E2E_ARGS passes options, e.g. `--sides ours`, `--suites trainer`, `--focus DependsOn`.
UPSTREAM_E2E_ARGS ?=
test-upstream-e2e: $(STAMP) build-assets
	$(PY) -m trainer upstream-e2e --level $(LEVEL) $(UPSTREAM_E2E_ARGS)

# Only the builds (the suites of LEVEL named in UPSTREAM_E2E_SUITES, and its Go managers).
UPSTREAM_E2E_SUITES ?= jobset trainer
build-upstream-e2e: $(STAMP)
	$(PY) -m trainer upstream-e2e --build-only --level $(LEVEL) --suites $(UPSTREAM_E2E_SUITES)

# Kueue in front of this manager at each API level (docs/kueue.md): v0.15.0 at v2.1, v0.17.0 at
# v2.3 (trainer/conformance/kueue.py KUEUE_VERSIONS), each built once from the Go module proxy
# and cached beside the Go originals, run outside the cluster against a full local cluster of its
# own. `make test` runs the reduced suite at both levels (preemption and resume of TrainJobs,
# JobSets admitted with the flavor's placement); test-kueue runs all of test/e2e/kueue (make test
# deselects the kueue_full tests). KUEUE_VERSION picks another Kueue release for every level,
# KUEUE_E2E_LEVELS=v2.3 runs one level's stack only.
# The real-node suite (docs/realnode.md): a full local cluster with one real kubelet node
# (containerd, runc, CNI bridge, kube-proxy); root only. Not in `make test` yet.
test-realnode: $(STAMP) build-assets
	$(PY) -m pytest test/e2e/realnode -m realnode -s $(PYTEST_ARGS)

# The version matrix (README): `make test` runs both levels on Kubernetes v1.36.3; this runs the
# level v2.1 integration suites, its e2e tier and the reduced v2.1 conformance set on v1.34.4,
# the Kubernetes of Trainer v2.1.0 (that control plane is built once into its own cache key).
K8S_MATRIX_VERSION ?= v1.34.4
test-k8s-matrix: $(STAMP) build-originals
	K8S_VERSION=$(K8S_MATRIX_VERSION) $(PY) -c 'from manager.envtest import assets; assets.ensure(assets.FULL)'
	K8S_VERSION=$(K8S_MATRIX_VERSION) $(PY) -m pytest test/integration/trainer test/integration/jobset \
	  test/integration/api test/e2e/trainer test/e2e/jobset \
	  "test/e2e/conformance/test_conformance_reduced.py::test_reduced_conformance_set_has_no_unlisted_difference" \
	  -m "integration or e2e" -k "not v2_3" $(PYTEST_ARGS)

test-kueue: $(STAMP) build-assets build-kueue
	$(PY) -m pytest test/e2e/kueue $(PYTEST_ARGS)

# The conformance runner with Kueue in front of each side (docs/conformance.md, docs/kueue.md):
# the scenarios of test/conformance/kueue (quota, preemption and re-admission of TrainJobs and
# JobSets) on our manager and on the Go managers of LEVEL, each with the level's Kueue release,
# every step's end state compared. CONFORMANCE_ARGS passes options as for `make conformance`.
conformance-kueue: $(STAMP) build-assets build-originals build-kueue
	$(PY) -m trainer conformance --kueue --level $(LEVEL) $(CONFORMANCE_ARGS)

build-kueue: $(STAMP)
	$(PY) -m trainer.conformance.kueue --build-only

# Every benchmark scenario in one run, into $(BENCH_OUT), at API level LEVEL (v2.3 by default:
# the level's CRDs, webhooks and shipped runtimes, our manager with --api-level=$(LEVEL), the Go
# originals of the level; test/bench/bench_level.py): the burst (suspended and running, ours
# and the Go managers), the burst with Kueue in the loop (bench-kueue), the admission benchmark
# (bench-admission), the scale scenario (test/bench/scale.py, when present), the framework
# scenario (bench-mirror; no API level), the floor (suspended and running), then one bench.json,
# one bench.md (ratios ours / Go, kopf, controller-runtime, floor; each figure's level) and
# $(BENCH_PNG) (burst latency per manager). The micro-benchmarks (pytest -m bench) run first.
# Hours on a 2-core machine.
BENCH_OUT ?= bench-results
BENCH_PNG ?= docs/bench-latency.png
BENCH_SCALE_PODS ?= 10000
BENCH_SCALE_NODES ?= 500
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP) pyproject.toml
	$(PY) -m pip install -q -e '.[test,lint,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) build-assets build-originals build-kueue
	$(PY) -m pytest test/bench -m bench -s $(PYTEST_ARGS)
	$(PY) test/bench/burst.py --n $(BURST_N) --level $(LEVEL) --out $(BENCH_OUT)
	$(PY) test/bench/burst.py --n $(BURST_N) --level $(LEVEL) --out $(BENCH_OUT) --running
	$(PY) test/bench/kueue_burst.py --n $(KUEUE_BURST_N) --quota $(KUEUE_BURST_QUOTA) --level $(LEVEL) --out $(BENCH_OUT)
	$(PY) test/bench/admission.py --n $(ADMISSION_N) --runs $(ADMISSION_RUNS) --level $(LEVEL) --out $(BENCH_OUT)
	if [ -f test/bench/scale.py ]; then \
	  $(PY) test/bench/scale.py --pods $(BENCH_SCALE_PODS) --nodes $(BENCH_SCALE_NODES) --level $(LEVEL) \
	    --out $(BENCH_OUT); \
	else echo "bench: no test/bench/scale.py on this branch: scale scenario not run"; fi
	$(PY) test/bench/framework.py --n $(MIRROR_N) --rounds $(MIRROR_ROUNDS) --out $(BENCH_OUT)
	$(PY) test/bench/floor.py --n $(BURST_N) --level $(LEVEL) --out $(BENCH_OUT)
	$(PY) test/bench/floor.py --n $(BURST_N) --level $(LEVEL) --out $(BENCH_OUT) --running
	$(MAKE) bench-report

# bench.json, bench.md and the PNG from what the scenarios left in $(BENCH_OUT) at LEVEL.
bench-report: $(BENCH_STAMP)
	$(PY) test/bench/report.py --in $(BENCH_OUT) --png $(BENCH_PNG) --level $(LEVEL)

# Burst side by side: BURST_N TrainJobs on torch-distributed created at once, on our
# manager and on the Go jobset+trainer managers of LEVEL, each on its own full local control
# plane at LEVEL, one after the other. Writes $(BURST_OUT)/burst-$(LEVEL).json and .md (ratios
# ours / Go). BURST_ARGS passes options, e.g. `--running` (unsuspended) or `--sides ours`.
BURST_N ?= 1000
BURST_OUT ?= bench-results
BURST_ARGS ?=
bench-burst: $(STAMP) build-assets build-originals
	$(PY) test/bench/burst.py --n $(BURST_N) --level $(LEVEL) --out $(BURST_OUT) $(BURST_ARGS)

# Admission under load (test/bench/admission.py): the suspended burst of ADMISSION_N TrainJobs
# ADMISSION_RUNS times per side at LEVEL, the side going first alternating; the webhooks' answer
# times as the API server measured them, medians over the runs. Writes $(BURST_OUT)/admission.json
# and .md. ADMISSION_ARGS passes options, e.g. `--level v2.1` (a second level) or `--clients 32`.
ADMISSION_N ?= 1000
ADMISSION_RUNS ?= 3
ADMISSION_ARGS ?=
bench-admission: $(STAMP) build-assets build-originals
	$(PY) test/bench/admission.py --n $(ADMISSION_N) --runs $(ADMISSION_RUNS) --level $(LEVEL) \
	  --out $(BURST_OUT) $(ADMISSION_ARGS)

# Burst with Kueue in the loop, side by side (docs/bench.md, docs/kueue.md): KUEUE_BURST_N
# TrainJobs of 1 CPU created at once, queued in one ClusterQueue of KUEUE_BURST_QUOTA CPUs, on our
# manager and on the Go jobset+trainer managers of LEVEL, each with the level's Kueue in front
# (v0.17.0 at v2.3, v0.15.0 at v2.1), one after the other: time to the last Complete, manager and
# Kueue CPU, reconcile errors. Writes $(BURST_OUT)/kueue-burst.json and .md (ratios ours / Go).
# KUEUE_BURST_ARGS passes options, e.g. `--sides ours` or `--pod-run-seconds 5`.
KUEUE_BURST_N ?= 1000
KUEUE_BURST_QUOTA ?= 100
KUEUE_BURST_ARGS ?=
bench-kueue: $(STAMP) build-assets build-originals build-kueue
	$(PY) test/bench/kueue_burst.py --n $(KUEUE_BURST_N) --quota $(KUEUE_BURST_QUOTA) --level $(LEVEL) \
	  --out $(BURST_OUT) $(KUEUE_BURST_ARGS)

# Framework scenario: MIRROR_N ConfigMaps mirrored into Secrets by one trivial
# reconciler on manager/, on kopf and on controller-runtime (test/bench/mirror/), by the same
# requests and watches without the framework (python-io), and written by a bare client (the
# floor), each on its own etcd + kube-apiserver; MIRROR_ROUNDS rounds, the sides' order rotated
# each round, medians reported. MIRROR_ARGS e.g. `--sides ours,kopf`.
MIRROR_N ?= 5000
MIRROR_ROUNDS ?= 3
MIRROR_ARGS ?=
bench-mirror: $(BENCH_STAMP) build-assets
	$(PY) test/bench/framework.py --n $(MIRROR_N) --rounds $(MIRROR_ROUNDS) --out $(BURST_OUT) $(MIRROR_ARGS)

# Floor: the burst's JobSets and Jobs written by a bare client, no manager running, at LEVEL
# (floor-$(LEVEL).json).
# FLOOR_ARGS e.g. `--running`.
FLOOR_ARGS ?=
bench-floor: $(STAMP) build-assets
	$(PY) test/bench/floor.py --n $(BURST_N) --level $(LEVEL) --out $(BURST_OUT) $(FLOOR_ARGS)

# Scale side by side (docs/scale.md): one KWOK cluster with SCALE_NODES nodes, SCALE_PODS
# pre-bound Running Pods (SCALE_ARGS --relevant, default 10 %, of JobSets/PodGroups; the rest
# labelled like Deployments' Pods) and SCALE_TRAINJOBS suspended TrainJobs; each side started
# fresh after each filling step: time to sync, steady RSS, RSS per relevant/unrelated Pod, API
# requests at start, one TrainJob's latency, at LEVEL. Writes $(BURST_OUT)/scale-<pods>-$(LEVEL).json and .md.
# The smaller scenario `make bench` runs: `make bench-scale SCALE_PODS=10000 SCALE_NODES=500`.
SCALE_PODS ?= 100000
SCALE_NODES ?= 5000
SCALE_TRAINJOBS ?= 1000
SCALE_ARGS ?= --scheduler-plugins
bench-scale: $(STAMP) build-assets build-originals
	$(PY) test/bench/scale.py --pods $(SCALE_PODS) --nodes $(SCALE_NODES) --trainjobs $(SCALE_TRAINJOBS) \
	  --level $(LEVEL) --out $(BURST_OUT) $(SCALE_ARGS)

# Workqueue ops/s and informer events/s to a no-op reconcile (in-process), then informer
# throughput and memory per cached Pod at 10k Pods against a real kube-apiserver, then CPU per
# POST and per watch event through RestTransport against a bare aiohttp session, then the mirror's
# reconciler on the manager over an in-memory API server, with and without its second pass.
bench-framework: $(STAMP) build-assets
	$(PY) -m pytest test/bench/test_framework_core_bench.py -m bench -s $(PYTEST_ARGS)
	$(PY) test/bench/bench_cache.py --pods 10000
	$(PY) test/bench/bench_post.py
	$(PY) test/bench/bench_watch.py
	$(PY) test/bench/bench_mirror_inproc.py
	$(PY) test/bench/bench_mirror_inproc.py --first-pass-only

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache

# CRDs are generated from the API models (trainer/api); a unit test fails when they are stale.
# The Helm chart carries copies of the CRDs and of the shipped runtimes of each API level (a
# chart is installable on its own; files/crds/<level>, files/runtimes/<level>); they are written
# here too, and a unit test fails when they differ from config/.
.PHONY: manifests
manifests: $(STAMP)
	$(PY) -m trainer.api.crdgen config/crd/bases
	$(PY) -m trainer.api.crdgen --feature-gates=TrainJobStatus=true config/progress/crd
	$(PY) -m trainer.api.crdgen --feature-gates=TrainJobState=true config/state/crd
	$(PY) -m trainer.api.crdgen --models=trainer.api.v2_3.kinds config/overlays/v2.3/crd
	$(PY) -m trainer.migrate.crds  # the bridge CRDs of a v2.1 -> v2.3 migration (docs/migration.md)
	$(PY) hack/chart_crds.py  # the chart's copies of both levels, without descriptions (the 1 MiB release Secret)
	cp config/runtimes/*.yaml $(CHART)/files/runtimes/v2.1/ && rm $(CHART)/files/runtimes/v2.1/kustomization.yaml
	cp config/overlays/v2.3/runtimes/*.yaml $(CHART)/files/runtimes/v2.3/ && rm $(CHART)/files/runtimes/v2.3/kustomization.yaml

# -- Container image and Helm ---------------------------------------------------------------
# The image: the repo's Dockerfile (wheels built once, non-root, read-only root filesystem).
# CONTAINER_TOOL=docker or podman builds it as always, `$(CONTAINER_TOOL) build -t $(IMG) .`,
# on the Dockerfile's base image (PYTHON_IMAGE=<image> passes another as a build argument).
# Left empty: docker when its daemon answers; otherwise (these development machines and CI: no
# Docker daemon, no registry) podman as `make container-tools` sets it up, on the base image it
# made from Debian's packages (`hack/container-tools.sh build`: no network namespace for RUN,
# and images earlier builds left dangling are removed). CONTAINER_BUILD_ARGS adds build flags.
CONTAINER_TOOL ?=
PYTHON_IMAGE ?=
CONTAINER_BUILD_ARGS ?=
# Where `make container-tools` keeps its containers.conf and the base image's root filesystem.
CONTAINER_CACHE ?= $(HOME)/.cache/trainer-py/images
KIND ?= kind
KIND_CLUSTER ?= kind
CHART := charts/kubeflow-trainer
HELM_RELEASE ?= kubeflow-trainer
HELM_NAMESPACE ?= kubeflow-system
HELM_ARGS ?=
# helm: HELM=/path/to/helm, else the asset cache's (built from the Go module proxy on first use).
HELM ?=
HELM_FROM_CACHE = $(or $(HELM),$$($(PY) -c 'from manager.envtest import assets; print(assets.ensure(["helm"])["helm"])'))

.PHONY: docker-build container-tools kind-load helm helm-install helm-uninstall
docker-build:
	@set -e; tool='$(CONTAINER_TOOL)'; base='$(PYTHON_IMAGE)'; \
	if [ -z "$$tool" ]; then \
	  if docker info > /dev/null 2>&1; then tool=docker; \
	  else \
	    echo "make docker-build: no Docker daemon answers: podman of make container-tools" >&2; \
	    exec env CONTAINER_CACHE='$(CONTAINER_CACHE)' PYTHON_IMAGE="$$base" \
	      hack/container-tools.sh build '$(IMG)' $(CONTAINER_BUILD_ARGS); \
	  fi; \
	fi; \
	set -x; "$$tool" build $${base:+--build-arg PYTHON_IMAGE="$$base"} $(CONTAINER_BUILD_ARGS) -t '$(IMG)' .

# podman, buildah and runc from Debian's packages (installed when missing; needs root), their
# containers.conf, and the base image made once from Debian's packages (hack/container-tools.sh;
# about 4 min on a fresh machine, then instant). Prints shell: `eval "$$(make -s container-tools)"`
# sets CONTAINERS_CONF for podman run.
container-tools:
	@CONTAINER_CACHE='$(CONTAINER_CACHE)' hack/container-tools.sh setup

kind-load:
	$(KIND) load docker-image $(IMG) --name $(KIND_CLUSTER)

# Prints the path of the cached helm (building it once).
helm: $(STAMP)
	@echo "$(HELM_FROM_CACHE)"

# Installs or upgrades the chart in the cluster of the current KUBECONFIG and waits until the
# manager is Ready, then (HELM_RUNTIMES=true, as `make deploy`) enables the shipped runtimes in a
# second upgrade: their validating webhook needs the running manager. IMG sets the image;
# HELM_ARGS adds helm flags (e.g. --set manager.replicas=2).
HELM_RUNTIMES ?= true
helm-install: $(STAMP)
	@set -e; helm="$(HELM_FROM_CACHE)"; img='$(IMG)'; name="$$img"; tag=latest; \
	case "$${img##*/}" in *:*) name="$${img%:*}"; tag="$${img##*:}";; esac; \
	echo "make helm-install: $(CHART) as $(HELM_RELEASE) in $(HELM_NAMESPACE), image $$name:$$tag"; \
	"$$helm" upgrade --install $(HELM_RELEASE) $(CHART) --namespace $(HELM_NAMESPACE) --create-namespace \
	  --set-string image.repository="$$name" --set-string image.tag="$$tag" --wait $(HELM_ARGS); \
	if [ "$(HELM_RUNTIMES)" = true ]; then \
	  "$$helm" upgrade $(HELM_RELEASE) $(CHART) --namespace $(HELM_NAMESPACE) --reuse-values \
	    --set runtimes.defaultEnabled=true --wait $(HELM_ARGS); \
	fi

# Uninstalls the release (Helm keeps the CRDs). The chart's pre-delete hook, as upstream v2.3.0's
# chart has one, deletes the release's runtimes while the manager still runs and waits until they
# are gone: at level v2.1 a runtime a TrainJob names carries the in-use finalizer, which only the
# running manager drops once no TrainJob names it. Then this fails after DEPLOY_TIMEOUT with the
# release in place, listing the runtimes left and the hook's last words (the TrainJobs holding
# them: delete those first).
helm-uninstall: $(STAMP)
	@set -e; kubectl='$(KUBECTL)'; \
	"$(HELM_FROM_CACHE)" uninstall $(HELM_RELEASE) --namespace $(HELM_NAMESPACE) --wait --timeout $(DEPLOY_TIMEOUT) || { \
	  echo "make helm-uninstall: the runtimes' pre-delete hook did not finish within $(DEPLOY_TIMEOUT); runtimes left:" >&2; \
	  "$$kubectl" get clustertrainingruntimes -l app.kubernetes.io/instance=$(HELM_RELEASE) >&2 || true; \
	  "$$kubectl" -n $(HELM_NAMESPACE) logs --tail=3 \
	    -l app.kubernetes.io/component=runtimes-installer,app.kubernetes.io/instance=$(HELM_RELEASE) >&2 || true; \
	  exit 1; }
