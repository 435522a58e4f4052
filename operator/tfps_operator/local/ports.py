"""Free loopback ports for the local cluster, and recognising a lost port race.

A port is "free" when we could bind it on 127.0.0.1 a moment ago; another program may still take
it before our child binds it. The supervisor therefore treats a child that dies at startup with
"address already in use" as a port race and restarts the cluster on fresh ports.
"""

from __future__ import annotations

import re
import socket
from contextlib import ExitStack

HOST = "127.0.0.1"

_IN_USE = re.compile(
    r"address already in use|EADDRINUSE|errno 98|Failed to add port|Could not start gRPC server", re.IGNORECASE
)
"""Python's EADDRINUSE, and what a TensorFlow gRPC server logs when its port is taken."""


def free_ports(n: int, host: str = HOST) -> list[int]:
    """``n`` distinct ports that were bindable on ``host`` (all held open together, then released)."""
    with ExitStack() as stack:
        ports: list[int] = []
        for _ in range(n):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            s.bind((host, 0))
            ports.append(s.getsockname()[1])
        return ports


def is_free(port: int, host: str = HOST) -> bool:
    """True when ``port`` can be bound on ``host`` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


def looks_like_port_in_use(text: str) -> bool:
    """True when a failed process's log/termination text says its port was taken."""
    return bool(_IN_USE.search(text))
