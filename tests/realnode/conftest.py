"""Fixtures of the real-node tier: skip unless ``hack/cluster up --real-node`` is up (kubelet + containerd)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
NODE = REPO / "hack" / "realnode" / "node"
sys.path.insert(0, str(REPO / "tests" / "operator"))

NODE_NAME = os.environ.get("TFPS_REALNODE_NAME", "tfps-node")
NODE_LABEL = "tfps.dev/real-node"
PV_ROOT = Path(os.environ.get("TFPS_REALNODE_VAR", "/var/lib/tfps-realnode")) / "pv"
ON_REAL_NODE: dict[str, Any] = {
    "nodeSelector": {NODE_LABEL: "true"},
    "tolerations": [{"key": NODE_LABEL, "operator": "Exists", "effect": "NoSchedule"}],
}
"""Pod spec fields that put a pod on the real node (it is tainted so no other test's pod lands there)."""


def _node_status() -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(NODE), "status"], capture_output=True, text=True, timeout=60, cwd=REPO)


@pytest.fixture(scope="session")
def realnode(cluster: Any) -> str:
    """The real node's name; the whole tier is skipped (with the reason) unless it is up."""
    if os.geteuid() != 0:
        pytest.skip("the real-node tier needs root (containerd, runc, hostPath volumes)")
    st = _node_status()
    if st.returncode != 0:
        pytest.skip(f"real node not up (run `hack/cluster up --real-node`):\n{st.stdout}{st.stderr}")
    return NODE_NAME


@pytest.fixture
def hostpath_pv(k8s: Any, namespace: str) -> Iterator[Callable[[str], Path]]:
    """``make(claim) -> directory``: a hostPath PV on the real node pre-bound to ``claim`` in the test's
    namespace (the trainer runs as uid 1000, so the directory is its). Removed with its data afterwards."""
    from kubernetes import client

    core = client.CoreV1Api(k8s)
    made: list[tuple[str, Path]] = []

    def make(claim: str, size: str = "2Gi") -> Path:
        name = f"{namespace}-{claim}"
        path = PV_ROOT / name
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, 1000, 1000)
        core.create_persistent_volume(
            {
                "metadata": {"name": name, "labels": {"tfps.dev/test": "realnode"}},
                "spec": {
                    "capacity": {"storage": size},
                    "accessModes": ["ReadWriteOnce", "ReadWriteMany"],
                    "storageClassName": "",
                    "persistentVolumeReclaimPolicy": "Retain",
                    "hostPath": {"path": str(path), "type": "Directory"},
                    "claimRef": {"namespace": namespace, "name": claim},
                    "nodeAffinity": {
                        "required": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": NODE_LABEL, "operator": "In", "values": ["true"]}]}
                            ]
                        }
                    },
                },
            }
        )
        made.append((name, path))
        return path

    yield make
    import shutil

    for name, path in made:
        try:
            core.delete_persistent_volume(name)
        except Exception:
            pass
        shutil.rmtree(path, ignore_errors=True)
