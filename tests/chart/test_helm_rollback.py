"""`helm upgrade` and `helm rollback` of the chart on the real API server (hack/cluster), as docs/install.md
("Upgrading and the CRD") describes them: the chart of commit ab5f88f is installed, upgraded to the working
tree's chart, then rolled back to revision 1, with the same values each time. After each step the operator
Deployment's pod template (image, command, args, env, annotations, ServiceAccount) and the rules of every
ClusterRole and Role of the release are exactly what that revision's chart renders for those values (`helm
template`), so the rollback really brings the older objects back (ab5f88f's lack POD_NAME and KServe's
inferenceservices rule); and the CRD pstrainingjobs.tfps.dev, the working tree's, applied first as the docs
tell the user to, keeps its uid, resourceVersion and generation through install, upgrade, rollback and
uninstall: Helm never upgrades, rolls back or deletes crds/. `helm history` ends with revision 3, a rollback to 1.

What Helm 4 does with crds/ on an install is not what Helm 3 did: it server-side applies them even over an
existing CRD (Helm 3 skipped one that existed). A plain `helm install` of ab5f88f's chart therefore tries to put
its older CRD over today's and stops at a field-manager conflict, creating nothing (checked here); the release
is then installed with `--skip-crds`, as a user who manages the CRD with kubectl installs it.

The chart at ab5f88f is taken from the repository's history with its CRD: charts/tfps-operator/crds/ holds a
symlink to ../../../crds/, so `git archive` of the chart directory alone gives a chart Helm cannot load.
"""

from __future__ import annotations

import json
import secrets
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from support.crd import install_crd
from support.upgrade.history import OLDER, extract

from .helpers import CHART, ROOT, objects, one, run

# Alone (tests/README.md, "Parallel runs"): it asserts that the shared CRD's resourceVersion does not change
# through install, upgrade, rollback and uninstall, which any other test's `helm install` (Helm 4 applies crds/)
# or CRD apply could change meanwhile.
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(240), pytest.mark.serial]

CRD = "pstrainingjobs.tfps.dev"
CRD_FILE = "crds/pstrainingjobs.tfps.dev.yaml"
RBAC_KINDS = ("ClusterRole", "Role")


@pytest.fixture(scope="module")
def older_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """charts/tfps-operator as commit ab5f88f had it, with the CRD file its crds/ symlink points at."""
    chart_dir = str(CHART.relative_to(ROOT))
    chart = extract(tmp_path_factory.mktemp(f"chart-{OLDER}"), chart_dir, CRD_FILE) / chart_dir
    assert (chart / "crds" / Path(CRD_FILE).name).is_file(), f"{OLDER}'s chart has no readable crds/ file"
    return chart


def _crd_state(kubectl: Callable[..., subprocess.CompletedProcess[str]]) -> dict[str, Any]:
    meta = json.loads(kubectl("get", "crd", CRD, "-o", "json").stdout)["metadata"]
    return {k: meta[k] for k in ("uid", "resourceVersion", "generation")}


def _spec_fields(crd: dict[str, Any]) -> set[str]:
    """The fields of a PSTrainingJob's spec that the CRD declares, in any of its versions."""
    schemas = [v["schema"]["openAPIV3Schema"] for v in crd["spec"]["versions"]]
    return {field for schema in schemas for field in schema["properties"]["spec"]["properties"]}


def _render(helm: str, chart: Path, release: str, namespace: str, sets: list[str]) -> list[dict[str, Any]]:
    """What `chart` renders for the release (its templates only: no CRDs)."""
    cmd = [helm, "template", release, str(chart), "--namespace", namespace]
    return objects(run(cmd + [a for s in sets for a in ("--set", s)]).stdout)


def _env(entry: dict[str, Any]) -> dict[str, Any]:
    """One env entry as the API server stores it: an empty value omitted, a fieldRef's apiVersion filled."""
    out: dict[str, Any] = {"name": entry["name"]}
    if entry.get("value"):
        out["value"] = entry["value"]
    if "valueFrom" in entry:
        value_from = dict(entry["valueFrom"])
        if "fieldRef" in value_from:
            value_from["fieldRef"] = {"apiVersion": "v1", **value_from["fieldRef"]}
        out["valueFrom"] = value_from
    return out


def _pod_template(deployment: dict[str, Any]) -> dict[str, Any]:
    """The fields of the operator's pod template a chart version decides (no server defaults, no timestamps)."""
    template = deployment["spec"]["template"]
    return {
        "annotations": template["metadata"].get("annotations") or {},
        "serviceAccountName": template["spec"].get("serviceAccountName"),
        "containers": [
            {
                "name": c["name"],
                "image": c["image"],
                "command": c.get("command") or [],
                "args": c.get("args") or [],
                "env": [_env(e) for e in c.get("env") or []],
            }
            for c in template["spec"]["containers"]
        ],
    }


def _rules(rules: list[dict[str, Any]] | None) -> list[dict[str, list[str]]]:
    return [{k: v for k, v in sorted(rule.items()) if v} for rule in rules or []]


def _rbac(objs: list[dict[str, Any]]) -> dict[tuple[str, str, str], list[dict[str, list[str]]]]:
    """(kind, namespace, name) -> rules of every ClusterRole and Role among ``objs``."""
    return {
        (o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): _rules(o.get("rules"))
        for o in objs
        if o["kind"] in RBAC_KINDS
    }


def _live_rbac(
    kubectl: Callable[..., subprocess.CompletedProcess[str]], release: str
) -> dict[tuple[str, str, str], list[dict[str, list[str]]]]:
    """The ClusterRoles and Roles in the cluster labelled as the release's, in every namespace."""
    out = kubectl("get", "clusterroles,roles", "-A", "-l", f"app.kubernetes.io/instance={release}", "-o", "json")
    return _rbac(json.loads(out.stdout)["items"])


def _assert_release_is(
    kubectl: Callable[..., subprocess.CompletedProcess[str]],
    release: str,
    rendered: list[dict[str, Any]],
    step: str,
) -> None:
    """The live Deployment's pod template and the live RBAC rules are what ``rendered`` holds."""
    want = one(rendered, "Deployment")
    name, namespace = want["metadata"]["name"], want["metadata"]["namespace"]
    live = json.loads(kubectl("get", "deployment", name, "-n", namespace, "-o", "json").stdout)
    assert _pod_template(live) == _pod_template(want), (
        f"after {step}: the operator Deployment's pod template is not what that revision's chart renders"
    )
    assert _live_rbac(kubectl, release) == _rbac(rendered), (
        f"after {step}: the release's ClusterRole/Role rules are not what that revision's chart renders"
    )


def test_upgrade_and_rollback_replace_chart_objects_and_leave_the_crd(
    helm: str,
    cluster: Any,
    kubectl: Callable[..., subprocess.CompletedProcess[str]],
    make_namespace: Callable[..., str],
    older_chart: Path,
) -> None:
    # The working tree's CRD first, as docs/install.md has the user apply it before upgrading.
    install_crd(str(cluster.kubeconfig))
    release_ns, watched = make_namespace(), make_namespace()
    release = f"tfps-{secrets.token_hex(3)}"
    sets = [f"watchNamespaces={{{watched}}}"]  # namespaced mode: a ClusterRole and a Role; every revision
    kc = ["-n", release_ns, "--kubeconfig", str(cluster.kubeconfig)]
    set_args = [a for s in sets for a in ("--set", s)]
    older = _render(helm, older_chart, release, release_ns, sets)
    newer = _render(helm, CHART, release, release_ns, sets)
    # Otherwise the rollback below would prove nothing.
    assert _pod_template(one(older, "Deployment")) != _pod_template(one(newer, "Deployment"))
    assert _rbac(older) != _rbac(newer)
    # ...nor the CRD check: ab5f88f's chart carries an older CRD than the one served (no spec.strategy).
    older_crd = yaml.safe_load((older_chart / "crds" / Path(CRD_FILE).name).read_text())
    served_crd = json.loads(kubectl("get", "crd", CRD, "-o", "json").stdout)
    assert "strategy" in _spec_fields(served_crd) - _spec_fields(older_crd), f"{OLDER}'s CRD is not an older one"

    crd_before = _crd_state(kubectl)
    # Helm 4 server-side applies crds/ on a release's first install even over an existing CRD: here the
    # working tree's, whose fields install_crd's field manager owns, so ab5f88f's older CRD conflicts and
    # the install stops before anything is created. --skip-crds below, as for a CRD managed with kubectl.
    refused = run([helm, "install", release, str(older_chart), *kc, *set_args], check=False)
    assert refused.returncode != 0 and "failed to install CRD" in refused.stderr, (
        f"helm install of {OLDER}'s chart over today's CRD did not stop at the CRD:\n{refused.stderr}"
    )
    assert "conflict" in refused.stderr, refused.stderr
    none = run([helm, "history", release, *kc], check=False)
    assert none.returncode != 0 and "not found" in none.stderr, f"a refused install left a release:\n{none.stdout}"
    assert _crd_state(kubectl) == crd_before, f"a refused helm install of {OLDER}'s chart changed the CRD"
    uninstalled = False
    try:
        run([helm, "install", release, str(older_chart), "--skip-crds", *kc, *set_args])
        _assert_release_is(kubectl, release, older, f"helm install of {OLDER}'s chart")
        assert _crd_state(kubectl) == crd_before, f"helm install of {OLDER}'s chart changed the CRD"

        run([helm, "upgrade", release, str(CHART), *kc, *set_args])
        _assert_release_is(kubectl, release, newer, "helm upgrade to the working tree's chart")
        assert _crd_state(kubectl) == crd_before, "helm upgrade changed the CRD"

        run([helm, "rollback", release, "1", *kc])
        _assert_release_is(kubectl, release, older, "helm rollback to revision 1")
        assert _crd_state(kubectl) == crd_before, "helm rollback changed the CRD"

        history = json.loads(run([helm, "history", release, "-o", "json", *kc]).stdout)
        summary = [(h["revision"], h["status"], h["description"]) for h in history]
        assert [h[0] for h in summary] == [1, 2, 3], f"helm history: {summary}"
        assert summary[-1][1:] == ("deployed", "Rollback to 1"), f"helm history: {summary}"
        assert [h[1] for h in summary[:-1]] == ["superseded", "superseded"], f"helm history: {summary}"

        run([helm, "uninstall", release, "--wait", "--timeout", "60s", *kc])
        uninstalled = True
        assert _live_rbac(kubectl, release) == {}, "helm uninstall left the release's ClusterRole/Roles"
        assert _crd_state(kubectl) == crd_before, "helm uninstall changed or deleted the CRD"
    finally:
        if not uninstalled:
            run([helm, "uninstall", release, "--wait", "--timeout", "60s", *kc], check=False)
