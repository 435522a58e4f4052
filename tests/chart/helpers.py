"""Shared helpers of the chart tests: finding helm, rendering the chart, reading objects."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "tfps-operator"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
"""One values file per supported configuration (cluster-wide, namespaced, servicemonitor, custom image)."""


def _pinned(var: str) -> str:
    text = (ROOT / "hack" / "lib" / "versions.sh").read_text()
    m = re.search(rf'^{var}="\$\{{\w+:-([^}}]+)\}}"', text, re.M)
    assert m, f"hack/lib/versions.sh has no {var}"
    return m.group(1)


def find_helm() -> str | None:
    """The helm that hack/cluster builds (its cache or .cluster/bin), else one on PATH."""
    cache = Path(
        os.environ.get("TFPS_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tfps"
    )
    for cand in (ROOT / ".cluster" / "bin" / "helm", cache / "helm" / _pinned("HELM_VERSION") / "bin" / "helm"):
        if cand.is_file() and os.access(cand, os.X_OK):
            return str(cand)
    return shutil.which("helm")


def run(
    cmd: list[str],
    *,
    check: bool = True,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout, input=input)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{' '.join(cmd)} exited {proc.returncode}\nstdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
        )
    return proc


def template(
    helm: str,
    *values_files: Path,
    namespace: str = "tfps-system",
    release: str = "tfps-operator",
    sets: Iterable[str] = (),
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    cmd = [helm, "template", release, str(CHART), "--namespace", namespace, "--include-crds"]
    for f in values_files:
        cmd += ["-f", str(f)]
    for s in sets:
        cmd += ["--set", s]
    return run(cmd, check=check)


def objects(rendered: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(rendered) if d]


def by_kind(objs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == kind]


def one(objs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = by_kind(objs, kind)
    assert len(found) == 1, f"expected one {kind}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


def container_env(deployment: dict[str, Any]) -> dict[str, Any]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container["env"]}


def rule_set(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    """Flatten RBAC rules to (apiGroup, resource, verb) triples."""
    return {(g, r, v) for rule in rules for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}
