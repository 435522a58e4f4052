"""hack/cluster's own contract, on a second, throwaway control plane (own state dir, own free ports).

up/status/env/down, `up` as a no-op, recovery from a killed run (stale pid files and etcd data), no
listener left after `down`, and a failed start that names the component and shows its log.
The shared cluster other tests use is never touched.
"""

from __future__ import annotations

import ipaddress
import os
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from support.parallel import free_ports

pytestmark = pytest.mark.cluster

REPO = Path(__file__).resolve().parents[2]
COMPONENTS = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "gang-scheduler",
    "podgroup-controller",
    "kueue",
]
PORT_VARS = [
    "TFPS_ETCD_PORT",
    "TFPS_ETCD_PEER_PORT",
    "TFPS_APISERVER_PORT",
    "TFPS_KCM_PORT",
    "TFPS_SCHED_PORT",
    "TFPS_GANG_SCHED_PORT",
    "TFPS_PODGROUP_CTRL_PORT",
    "TFPS_KUEUE_WEBHOOK_PORT",
    "TFPS_KUEUE_METRICS_PORT",
    "TFPS_KUEUE_HEALTH_PORT",
]


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Scratch:
    def __init__(self, state: Path, ports: dict[str, int]) -> None:
        self.state = state
        self.ports = ports
        self.env = {**os.environ, "TFPS_CLUSTER_DIR": str(state), **{k: str(v) for k, v in ports.items()}}

    def run(self, *args: str, extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(REPO / "hack" / "cluster"), *args],
            cwd=REPO,
            env={**self.env, **(extra_env or {})},
            capture_output=True,
            text=True,
            timeout=600,
        )

    def pids(self) -> dict[str, int]:
        return {
            c: int((self.state / "pids" / f"{c}.pid").read_text())
            for c in COMPONENTS
            if (self.state / "pids" / f"{c}.pid").exists()
        }


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Scratch]:
    # below the ephemeral range and apart from other pytest-xdist workers' picks (tests/support/parallel.py)
    sc = Scratch(tmp_path / "cluster", dict(zip(PORT_VARS, free_ports(len(PORT_VARS)))))
    yield sc
    sc.run("down")


def _alive(pid: int) -> bool:
    """Running, not a zombie. A process reaped between two looks is gone, whichever look saw it go."""
    try:
        os.kill(pid, 0)
        return "zombie" not in Path(f"/proc/{pid}/status").read_text().lower()
    except (ProcessLookupError, FileNotFoundError):
        return False


def test_up_status_down_and_recovery_from_a_killed_run(scratch: Scratch) -> None:
    assert scratch.run("status").returncode != 0

    up = scratch.run("up")
    assert up.returncode == 0, up.stdout + up.stderr
    for comp in COMPONENTS:
        assert f"starting {comp}" in up.stdout
    assert scratch.run("status").returncode == 0
    assert all(_listening(p) for p in scratch.ports.values())
    first = scratch.pids()
    assert sorted(first) == sorted(COMPONENTS)

    # Every address the cluster hands out is loopback, Service ClusterIPs included.
    kubectl = [str(scratch.state / "bin" / "kubectl"), f"--kubeconfig={scratch.state / 'kubeconfig'}"]
    subprocess.run([*kubectl, "create", "service", "clusterip", "probe", "--tcp=80:80"], check=True, timeout=60)
    ip = subprocess.run(
        [*kubectl, "get", "service", "probe", "-o", "jsonpath={.spec.clusterIP}"],
        check=True,
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert ipaddress.ip_address(ip) in ipaddress.ip_network("127.0.0.0/8"), ip

    env = scratch.run("env").stdout
    assert f'export KUBECONFIG="{scratch.state}/kubeconfig"' in env
    assert f"{scratch.state}/bin" in env

    again = scratch.run("up")
    assert again.returncode == 0 and "nothing to do" in again.stdout
    assert scratch.pids() == first

    # A killed run: every process gone at once, pid files and etcd data left behind.
    for pid in first.values():
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in first.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (scratch.state / "etcd").exists() and (scratch.state / "pids" / "etcd.pid").exists()
    assert scratch.run("status").returncode != 0

    recovered = scratch.run("up")
    assert recovered.returncode == 0, recovered.stdout + recovered.stderr
    assert scratch.run("status").returncode == 0
    second = scratch.pids()

    down = scratch.run("down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert not any(_alive(p) for p in second.values())
    assert not [p for p in scratch.ports.values() if _listening(p)]
    assert scratch.run("status").returncode != 0


def test_failed_start_names_the_component_shows_its_log_and_cleans_up(scratch: Scratch) -> None:
    up = scratch.run("up", extra_env={"TFPS_APISERVER_EXTRA_ARGS": "--no-such-flag"})
    assert up.returncode != 0
    assert "kube-apiserver failed to start" in up.stderr
    assert "unknown flag: --no-such-flag" in up.stderr  # the tail of its log
    assert not [p for p in scratch.ports.values() if _listening(p)], "etcd must be stopped again"
    assert not scratch.pids()
