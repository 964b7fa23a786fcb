# tagpin developer entry points. Everything installs what it needs by itself.
#   make demo      run the end-to-end scenario on 127.0.0.1 (registry, moto, real Kubernetes control planes)
#   make test      unit + integration + e2e tests
#   make lint      ruff + mypy + the import contract (layers);  make validate: sam validate --lint + cfn-lint;  make build: sam build
#   make bench     every benchmark below, then the README's table and docs/cost.md regenerated (make figures)
#   make bench-check       the generated figures match bench/results/*.json (CI); lists stale results
#   make bench-poll        poll throughput vs the registry's ceiling and skopeo: steady, settling, every tag moved
#   make bench-latency     one push -> patch on the local stack: the first after a start, warm ones, where the time goes
#   make bench-coldstart   each handler's import with and without bytecode, the packages' sizes (a build of the host's wheels)
#   make bench-gitops      one push moving 500 Argo-owned workloads in 50 Git repositories: push -> commit per repository
#   make bench-reconcile   reconcile of 1,000 workloads over 3 local clusters: time and API calls
#   make bench-webhook     one delivery of up to 1,000 unfollowed events at the webhook handler: time and lookups
#   make bench-concurrency 50 tags pushed at once through the local stack, 1 vs 3 containers per function
#   make bench-versions    choosing a version channel's head among 10,000 tags, per policy kind
#   make bench-cost        API calls per poll/change/reconcile at 100/1,000/10,000 tags, priced per month (docs/cost.md)
#   make bench-fanout      one poll round of 5,000 tags in 1/4/16 parts (PollParts); 100,000 modelled
#   make bench-tags        list 10,000 tags (one page; Link pages of 1,000 and of 100; last=): requests, time, memory
#   make bench-console     every console page at 10,000 targets in three shapes, in process and over HTTP: time, calls
#   make bench-hanging     frozen and slow registries beside the real one: each poll run's time and errors
#   make local     the local stack, kept running (tagpin local);  make figures: the generated tables from bench/results
#   make docs      regenerate docs/configuration.md from the configuration models
SHELL := /bin/bash
.DEFAULT_GOAL := help

# The runtime is python3.13: the first of python3.13, python3, python on PATH that is 3.13, else
# pyenv's newest 3.13.x (tools/find-python; no patch version named here).
PY313 := $(shell tools/find-python 3.13)
NO_PY313 := echo "error: Python 3.13 not found (python3.13 on PATH, or pyenv install 3.13)" >&2; exit 1
VENV := .venv
PY := $(VENV)/bin/python
# make test: one pytest worker per core (pytest-xdist); TEST_WORKERS=0 runs in one process
TEST_WORKERS ?= 2
SAM_VENV := .venv-sam
# sam build looks for python3.13 on PATH (the functions' builder): .venv-sam/bin has it (a venv of
# PY313); the layer Makefiles run PYTHON, the interpreter itself (not the venv: its packages would
# hide a distribution the layer lacks from the layer's import smoke test).
SAM_ENV := SAM_CLI_TELEMETRY=0 PYTHON="$(PY313)" PATH="$(CURDIR)/$(SAM_VENV)/bin:$$PATH"

help:
	@grep -E '^#   make' Makefile | sed 's/^#   //'

$(VENV)/.installed: requirements-dev.txt layers/common/requirements.txt layers/kubernetes/requirements.txt layers/git/requirements.txt functions/webhook/requirements.txt functions/console/requirements.txt pyproject.toml
	@[ -n "$(PY313)" ] || { $(NO_PY313); }
	@[ -x $(PY) ] || $(PY313) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	PURE=1 $(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps -e .
	@touch $@

venv: $(VENV)/.installed

$(SAM_VENV)/.installed: requirements-sam.txt
	@[ -n "$(PY313)" ] || { $(NO_PY313); }
	@[ -x $(SAM_VENV)/bin/python ] || $(PY313) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install -q -r requirements-sam.txt
	@touch $@

# The real registry (Debian's docker-registry) and skopeo, the peer the tests compare against;
# chromium and chromium-driver: the console's tests drive a real browser (tests/e2e/test_console_browser.py);
# the Kubernetes control plane (kube-tools).
tools: kube-tools
	@missing=""; \
	[ -x /usr/bin/docker-registry ] || missing="$$missing docker-registry"; \
	command -v skopeo >/dev/null || missing="$$missing skopeo"; \
	command -v wrk >/dev/null || missing="$$missing wrk"; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium"; \
	[ -x /usr/bin/chromedriver ] || missing="$$missing chromium-driver"; \
	if [ -n "$$missing" ]; then \
	  echo "installing$$missing (Debian packages)"; \
	  if [ "$$(id -u)" = 0 ]; then (apt-get update -qq && apt-get install -y -qq $$missing) >/dev/null; \
	  elif command -v sudo >/dev/null; then (sudo apt-get update -qq && sudo apt-get install -y -qq $$missing) >/dev/null; \
	  else echo "error: please install$$missing: sudo apt-get install$$missing" >&2; exit 1; fi; \
	fi
	@[ -x /usr/bin/docker-registry ] || { echo "error: docker-registry could not be installed (apt-get install docker-registry)" >&2; exit 1; }
	@[ -x /usr/bin/chromedriver ] || { echo "error: chromium-driver could not be installed (apt-get install chromium chromium-driver)" >&2; exit 1; }

# kube-apiserver, kube-controller-manager, kube-scheduler, etcd and kwok built from Go modules
# (tools/kube) once per machine into ~/.cache/tagpin/kube/<version>/bin; later runs only check stamps.
kube-tools:
	@bash tools/kube/build.sh

demo: venv tools
	$(PY) -m tagpin_local.demo

local: venv tools
	$(VENV)/bin/tagpin local

# The SAM transform tests (tests/support/sam_transform.py) run aws-sam-translator from .venv-sam.
test: venv tools $(SAM_VENV)/.installed
	$(PY) -m pytest tests/unit tests/integration tests/e2e -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

lint: venv
	$(PY) -m ruff check .
	$(PY) -m ruff format --check .
	$(PY) -m mypy layers/common/tagpin functions tools bench tests/support
	$(VENV)/bin/lint-imports --no-cache --no-logo

validate: venv $(SAM_VENV)/.installed
	$(SAM_ENV) sam validate --lint
	$(VENV)/bin/cfn-lint --non-zero-exit-code warning template.yaml

build: $(SAM_VENV)/.installed
	$(SAM_ENV) sam build

docs: venv
	$(PY) -m tagpin_local.docgen

# Each bench runs through bench/runinfo.py, which stamps its results file with the commit, the date,
# the machine and the load average at start and end (bench/catalog.py: what each covers, how long).
STAMP := $(PY) -m bench.runinfo

bench: bench-poll bench-latency bench-gitops bench-concurrency bench-coldstart bench-webhook bench-reconcile bench-tags bench-versions bench-console bench-hanging bench-fanout bench-cost
	$(PY) bench/figures.py --write

# The README's performance table and docs/cost.md from bench/results/*.json (bench/figures.py).
figures: venv
	$(PY) bench/figures.py --write

# Cheap (CI): fails when a generated block differs from the results; lists each stale result.
bench-check: venv
	$(PY) bench/figures.py --check

# Poll throughput vs the registry's ceiling (wrk) and a skopeo loop; no SAM build needed.
bench-poll: venv tools
	$(STAMP) poll -- $(PY) bench/poll.py

# The functions are arm64: measured on a build of the host's wheels (bench/coldstart.py), in a
# build directory of its own so that .aws-sam/build (what `sam deploy` uploads) stays arm64.
bench-coldstart: venv $(SAM_VENV)/.installed
	LAYER_PLATFORM=manylinux2014_x86_64 $(SAM_ENV) sam build --build-dir .aws-sam/build-host
	$(STAMP) coldstart -- $(PY) bench/coldstart.py --build-dir .aws-sam/build-host --python "$(PY313)"

bench-reconcile: venv
	$(STAMP) reconcile -- $(PY) bench/reconcile.py

# One delivery of 1, 100, 1,000 unfollowed events (and over the limit) at the real webhook handler.
bench-webhook: venv
	$(STAMP) webhook -- $(PY) bench/webhook.py

# The real handlers on the local stack; about 21 minutes on 2 cores (setting up 10,000 tags in moto dominates).
bench-cost: venv tools
	$(STAMP) cost -- $(PY) -m bench.cost

bench-versions: venv
	$(PY) bench/versions.py

# One push at a time through the local stack: the first after a start and warm ones, where the time goes.
bench-latency: venv tools
	$(STAMP) latency -- $(PY) -m bench.latency

bench-concurrency: venv tools
	$(STAMP) concurrency -- $(PY) -m bench.concurrency

# the Git layer's size and the write-back cold start first (--size), then the 500 workloads
bench-gitops: venv tools
	$(PY) -m bench.gitops --size
	$(STAMP) gitops -- $(PY) -m bench.gitops

bench-fanout: venv tools
	$(STAMP) fanout -- $(PY) -m bench.fanout

# Tag listing (RegistryClient.list_tags) against the real registry and TagPager in front of it; about 40 s.
bench-tags: venv tools
	$(STAMP) tags -- $(PY) bench/tags.py

# Frozen registries (TCP servers that never answer) and a slow one beside the real one: each poll
# run's time and errors, run after run, with the client's defaults; about 1.5 minutes.
bench-hanging: venv tools
	$(STAMP) hanging_registry -- $(PY) bench/hanging_registry.py

# Every page of the console on the local stack (moto server, the local HTTP API), in process and over
# HTTP, with 10,000 targets as 10,000 tags x 1, 2,000 x 5 and 100 x 100; a few minutes.
bench-console: venv tools
	$(STAMP) console -- $(PY) bench/console.py

.PHONY: help venv tools kube-tools demo local test lint validate build bench bench-check figures bench-latency bench-poll bench-coldstart docs bench-reconcile bench-cost bench-webhook bench-fanout bench-concurrency bench-gitops bench-tags bench-versions bench-console bench-hanging
