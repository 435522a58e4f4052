# The two commands in README.md: `make demo` (local PS training + verified export) and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)
PYTEST_ARGS ?=

.PHONY: venv demo test test-unit soak chaos cluster-up cluster-down crd lint
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

# Everything: lint, then two test runs side by side: the TensorFlow tier (real PS/worker/chief processes)
# inside a loopback-only network namespace, and, once the control plane is built and up, the unit and
# cluster tiers against hack/cluster. Each tier's tools are installed by `hack/tools TIER` (once per
# version, into ~/.cache/tfps; Debian packages with apt-get) in the background from the start: nothing can be
# installed inside the namespace, so the TF tier waits for its tools (fake-gcs-server, Chromium; nice 5)
# before entering it. The control plane builds beside the venv and the TF tier; the build and the TF tier
# each run in a cgroup of CPU weight 100 (hack/contend --weight), so that each gets at least half the machine
# while both are busy, and all of it when the other waits: the build is what the cluster tiers wait for, and
# the TF tier, alone on the TF side, has the time the cluster tiers spend waiting on the API server. The TF
# tier's output goes to $(BUILD_LOGS)/tf-tier.log and is shown when both tiers are done. CLUSTER_SUITES names more targets that use the control plane (.ci/run: soak chaos), run
# after the cluster tiers, still beside the TF tier. Everything always runs (a lint finding does not hide a
# test failure); the target fails if anything fails. `>> time:` lines give each part.
BUILD_LOGS := $(or $(TFPS_CLUSTER_DIR),.cluster)
CLUSTER_SUITES ?=
test:
	rc=0; t0=$$SECONDS; \
	timed() { local what=$$1 t=$$SECONDS r=0; shift; "$$@" || r=$$?; echo ">> time: $$what $$((SECONDS - t)) s (exit $$r)"; return $$r; }; \
	tools_ready() { if ! wait $$1; then cat $(BUILD_LOGS)/tools-$$2.log; echo "!! hack/tools $$2 failed (log above)"; return 1; fi; \
	  grep '^>> time:' $(BUILD_LOGS)/tools-$$2.log; echo ">> time: $$2 tools ready $$((SECONDS - t0)) s after the start"; }; \
	mkdir -p $(BUILD_LOGS); \
	nice -n 5 hack/tools tf >$(BUILD_LOGS)/tools-tf.log 2>&1 & tf_tools=$$!; \
	hack/contend --weight 100 -- hack/tools cluster >$(BUILD_LOGS)/tools-cluster.log 2>&1 & cluster_tools=$$!; \
	timed venv $(MAKE) --no-print-directory venv || exit $$?; \
	timed lint $(MAKE) --no-print-directory lint || rc=$$?; \
	tools_ready $$tf_tools tf || exit 1; \
	echo ">> TF tier started $$((SECONDS - t0)) s after the start (its output: $(BUILD_LOGS)/tf-tier.log, shown at the end)"; \
	timed "TF tier" hack/contend --weight 100 -- hack/netns-run $(BIN)/pytest -m "tf and not cluster" $(PYTEST_ARGS) >$(BUILD_LOGS)/tf-tier.log 2>&1 & tf_tier=$$!; \
	if tools_ready $$cluster_tools cluster && timed "cluster up" hack/cluster up; then \
	  echo ">> unit and cluster tiers started $$((SECONDS - t0)) s after the start"; \
	  timed "unit and cluster tiers" $(MAKE) --no-print-directory tiers || rc=$$?; \
	  for suite in $(CLUSTER_SUITES); do timed "$$suite" $(MAKE) --no-print-directory $$suite || rc=$$?; done; \
	else rc=1; fi; \
	wait $$tf_tier || rc=$$?; \
	echo ">> the TF tier's output ($(BUILD_LOGS)/tf-tier.log):"; cat $(BUILD_LOGS)/tf-tier.log; \
	echo ">> time: make test $$((SECONDS - t0)) s"; \
	exit $$rc

# The unit and cluster tiers against hack/cluster (up, or brought up by the first test that needs it), in two
# passes (tests/README.md, "Parallel runs"): every test but the `serial` ones on TEST_WORKERS pytest-xdist
# workers, then the `serial` tests alone. A pass that PYTEST_ARGS leaves without a test (pytest's exit 5) is no
# failure. TEST_WORKERS=0: the first pass in one process too.
TIERS_MARK := not tf and not slow and not realnode
TEST_WORKERS ?= 3
.PHONY: tiers
tiers: venv
	rc=0; \
	$(BIN)/pytest -m "$(TIERS_MARK) and not serial" -n $(TEST_WORKERS) $(PYTEST_ARGS) || { r=$$?; (( r == 5 )) || rc=$$r; }; \
	$(BIN)/pytest -m "$(TIERS_MARK) and serial" $(PYTEST_ARGS) || { r=$$?; (( r == 5 )) || rc=$$r; }; \
	exit $$rc

# The operator crash soak (20 SIGKILLs across job lifecycles, 2-3 minutes on a quiet machine). Its own
# target so it can be run alone; .ci/run runs it after `make test` (its measured runs: tests/README.md).
soak: venv
	hack/cluster up
	$(BIN)/pytest -m slow tests/soak $(PYTEST_ARGS)

# The control-plane chaos suite (tests/chaos): the API server restarted and stopped for two minutes, etcd
# restarted, the watches expired, while jobs run (about 4 minutes; TFPS_CHAOS_FAULTS and
# TFPS_CHAOS_STOP_SECONDS choose). .ci/run runs it after the soak; the faults hit this checkout's cluster,
# so nothing else may use it meanwhile.
chaos: venv
	hack/cluster up
	$(BIN)/pytest -m slow tests/chaos $(PYTEST_ARGS)

# The real-node tier (hack/realnode/README.md): the control plane + a real node (containerd, kubelet,
# CoreDNS) on this machine, then tests/realnode on real pods of the trainer image. Needs root and Debian's
# containerd/runc/CNI/umoci/skopeo/debootstrap; builds and caches kubelet, CoreDNS and the images on first
# use (cold: about half an hour). `hack/realnode/node ready-to-test` says whether it is cheap right now.
# REALNODE_MARK=realnode adds the slow fault tests (deleting a worker / the PS pod mid-training).
# `.ci/run` on a clean clone of HEAD in a fresh root (hack/cold-root: debootstrap bookworm with the
# image's packages, its Python and Go; empty ~/.cache/tfps, Go and pip caches; no tier packages), as on a
# new machine. Run it whenever hack/ or a tier's set-up changes; its figures go in tests/README.md.
.PHONY: test-cold
test-cold:
	hack/cold-root

# Slow machines (tests/README.md, "Slow machines"): the TF tier, then the unit and cluster tiers with the
# control plane, each under a CPU quota (hack/contend: SLOW_CPUS of this machine's CPUs, default 1, half of
# it, as the TF tier gets beside a cold build). A test that depends on the machine's speed fails here; run it
# whenever a test with a timeout, a sleep or a count changes. SLOW_TIERS=tf or cluster runs one tier.
SLOW_CPUS ?= 1
SLOW_TIERS ?= tf cluster
.PHONY: test-slow
test-slow: venv
	rc=0; \
	if [[ " $(SLOW_TIERS) " == *" tf "* ]]; then \
	  hack/tools tf >/dev/null || exit 1; \
	  hack/contend --cpus $(SLOW_CPUS) -- hack/netns-run $(BIN)/pytest -m "tf and not cluster" $(PYTEST_ARGS) || rc=$$?; \
	fi; \
	if [[ " $(SLOW_TIERS) " == *" cluster "* ]]; then \
	  hack/cluster up || exit 1; \
	  hack/contend --cpus $(SLOW_CPUS) --cluster -- $(BIN)/pytest -m "not tf and not slow and not realnode" $(PYTEST_ARGS) || rc=$$?; \
	fi; \
	exit $$rc

.PHONY: test-realnode
REALNODE_MARK ?= realnode and not slow
test-realnode: venv
	hack/cluster up --real-node
	$(BIN)/pytest tests/realnode -m "$(REALNODE_MARK)" $(PYTEST_ARGS)

test-unit: venv
	$(BIN)/pytest -m "not cluster and not tf and not realnode" $(PYTEST_ARGS)

crd: venv
	$(BIN)/tfps crd > crds/pstrainingjobs.tfps.dev.yaml
