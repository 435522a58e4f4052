"""What keeps tests on several pytest-xdist workers (``make test``'s cluster tiers, tests/README.md "Parallel
runs") apart on one machine and one control plane: each worker's tag in the names it makes, and listener
ports that no other worker can pick.

Outside xdist (a plain ``pytest``) the tag is empty and every port below the ephemeral range may be picked.
"""

from __future__ import annotations

import os
import re

from tfps_operator.tools.local import ports
from tfps_operator.tools.local.ports import HOST


def worker() -> tuple[int, int]:
    """(this worker's index, the number of workers): (0, 1) outside pytest-xdist."""
    m = re.fullmatch(r"gw(\d+)", os.environ.get("PYTEST_XDIST_WORKER", ""))
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if m is None or count < 1:
        return 0, 1
    return int(m.group(1)), count


def worker_tag() -> str:
    """``w<N>`` on xdist worker gw<N>, ``""`` outside xdist: a part of the names a test makes (namespaces),
    so that two workers can never make the same one."""
    index, count = worker()
    return f"w{index}" if count > 1 else ""


def free_ports(n: int, host: str = HOST) -> list[int]:
    """``n`` ports for listeners a test starts (an operator's health and metrics, a fake progress server, a
    scratch control plane), picked below the ephemeral range and, under xdist, only among this worker's
    share of the port numbers: a port one worker picked, no other worker picks."""
    return ports.free_ports(n, host, share=worker())
