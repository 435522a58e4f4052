# The two commands in README.md: `make demo` (local PS training + verified export) and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)
PYTEST_ARGS ?=

.PHONY: venv demo test test-unit soak cluster-up cluster-down crd lint
venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@echo ">> creating $(VENV) and installing tfps-operator[trainer,dev]"
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[trainer,dev]'
	rm -f $(VENV)/.installed-* && touch $@

# TensorFlow's gRPC servers bind every interface: local runs and TF tests go in a private
# network namespace whose only interface is loopback (hack/netns-run).
demo: venv
	hack/netns-run $(BIN)/tfps run examples/quickstart.yaml --workdir .demo

cluster-up: venv
	hack/cluster up

cluster-down:
	hack/cluster down

# Lint and types (configuration in pyproject.toml): ruff's checks, ruff's formatting, mypy. All three
# always run; the target fails if any fails.
lint: venv
	rc=0; \
	$(BIN)/ruff check . || rc=$$?; \
	$(BIN)/ruff format --check . || rc=$$?; \
	$(BIN)/mypy || rc=$$?; \
	exit $$rc

# Everything: lint, then two test runs: the TensorFlow tier (real PS/worker/chief processes) inside a
# loopback-only network namespace, then the unit and cluster tiers against hack/cluster. The Go binaries
# build (once per version, into ~/.cache/tfps) in the background from the start, at a lower CPU priority
# than the tests (nice 10): the object-storage emulator (the TF tier needs it, and cannot download inside
# its namespace) beside the venv's downloads, the control plane beside the venv and the TF tier, which
# leaves a core idle much of the time. All three always run (a lint finding does not hide a test
# failure); the target fails if any fails.
BUILD_LOGS := $(or $(TFPS_CLUSTER_DIR),.cluster)
test:
	rc=0; \
	mkdir -p $(BUILD_LOGS); \
	nice -n 10 hack/gcs-emulator build >$(BUILD_LOGS)/gcs-build.log 2>&1 & gcs=$$!; \
	nice -n 10 hack/cluster build >$(BUILD_LOGS)/build-in-background.log 2>&1 & build=$$!; \
	t0=$$SECONDS; \
	$(MAKE) --no-print-directory venv || exit $$?; \
	$(MAKE) --no-print-directory lint || rc=$$?; \
	if ! wait $$gcs; then cat $(BUILD_LOGS)/gcs-build.log; exit 1; fi; \
	hack/netns-run $(BIN)/pytest -m "tf and not cluster" $(PYTEST_ARGS) || rc=$$?; \
	if ! wait $$build; then cat $(BUILD_LOGS)/build-in-background.log; exit 1; fi; \
	echo ">> control-plane binaries ready $$((SECONDS - t0)) s after the start (log: $(BUILD_LOGS)/build-in-background.log)"; \
	hack/cluster up || exit $$?; \
	$(BIN)/pytest -m "not tf and not slow and not realnode" $(PYTEST_ARGS) || rc=$$?; \
	exit $$rc

# The operator crash soak (20 SIGKILLs across job lifecycles, 2-3 minutes on a quiet machine). Its own
# target so it can be run alone; .ci/run runs it after `make test` (its measured runs: tests/README.md).
soak: venv
	hack/cluster up
	$(BIN)/pytest -m slow tests/soak $(PYTEST_ARGS)

# The real-node tier (hack/realnode/README.md): the control plane + a real node (containerd, kubelet,
# CoreDNS) on this machine, then tests/realnode on real pods of the trainer image. Needs root and Debian's
# containerd/runc/CNI/umoci/skopeo/debootstrap; builds and caches kubelet, CoreDNS and the images on first
# use (cold: about half an hour). `hack/realnode/node ready-to-test` says whether it is cheap right now.
# REALNODE_MARK=realnode adds the slow fault tests (deleting a worker / the PS pod mid-training).
.PHONY: test-realnode
REALNODE_MARK ?= realnode and not slow
test-realnode: venv
	hack/cluster up --real-node
	$(BIN)/pytest tests/realnode -m "$(REALNODE_MARK)" $(PYTEST_ARGS)

test-unit: venv
	$(BIN)/pytest -m "not cluster and not tf and not realnode" $(PYTEST_ARGS)

crd: venv
	$(BIN)/tfps crd > crds/pstrainingjobs.tfps.dev.yaml
