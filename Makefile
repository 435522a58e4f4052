# The two commands in README.md: `make demo` (local PS training + verified export) and `make test`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt | sha1sum | cut -c1-12)
PYTEST_ARGS ?=

.PHONY: venv demo test test-unit cluster-up cluster-down crd lint
venv: $(STAMP)

$(STAMP): pyproject.toml constraints.txt
	@echo ">> creating $(VENV) and installing tfps-operator[trainer,dev]"
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -c constraints.txt -e '.[trainer,dev]'
	rm -f $(VENV)/.installed-* && touch $@

demo: venv
	$(BIN)/tfps run examples/quickstart.yaml --workdir .demo

cluster-up: venv
	hack/cluster up

cluster-down:
	hack/cluster down

# Everything: unit, TensorFlow and cluster tiers. The cluster fixtures start hack/cluster on demand.
test: venv
	hack/cluster up
	$(BIN)/pytest $(PYTEST_ARGS)

test-unit: venv
	$(BIN)/pytest -m "not cluster and not tf and not realnode" $(PYTEST_ARGS)

crd: venv
	$(BIN)/tfps crd > crds/pstrainingjobs.tfps.dev.yaml
