"""What keeps tests on several pytest-xdist workers (``make test``'s cluster tiers, tests/README.md "Parallel
runs") apart on one machine and one control plane: each worker's tag in the names it makes, and listener
ports that no other worker can pick.

Outside xdist (a plain ``pytest``) the tag is empty and every port below the ephemeral range may be picked.
"""

from __future__ import annotations

import os
import random
import re
import socket
from contextlib import ExitStack

from tfps_operator.tools.local.ports import HOST, listener_range

ATTEMPTS = 500


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
    """``n`` distinct ports that were bindable on ``host`` a moment ago (held open together, then released)
    for listeners a test starts (an operator's health and metrics, a fake progress server, a scratch control
    plane). Picked below the kernel's ephemeral range, where no outgoing connection takes its local port, and,
    under xdist, only among the ports whose number modulo the worker count is this worker's index: a port one
    worker picked here, no other worker picks here, however close in time (within a worker, tests run one at a
    time, and a port still held fails to bind)."""
    span = listener_range()
    index, count = worker()
    rng = random.SystemRandom()
    with ExitStack() as stack:
        ports: list[int] = []
        while len(ports) < n:
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            if not (span and _bind_in(s, host, span, index, count, rng)):
                s.bind((host, 0))  # no known range, or nothing free in it: the kernel's choice
            ports.append(s.getsockname()[1])
        return ports


def _bind_in(s: socket.socket, host: str, span: tuple[int, int], index: int, count: int, rng: random.Random) -> bool:
    """Bind ``s`` to a free port of ``span`` whose number modulo ``count`` is ``index``; False if none was."""
    for _ in range(ATTEMPTS):
        port = rng.randint(*span)
        port += (index - port) % count  # the next port of this worker's residue class
        if port > span[1]:
            continue
        try:
            s.bind((host, port))
            return True
        except OSError:
            continue
    return False
