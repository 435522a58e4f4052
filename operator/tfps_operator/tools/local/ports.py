"""Free loopback ports for the local cluster, and recognising a lost port race.

A port is "free" when we could bind it on 127.0.0.1 a moment ago; another program may still take
it before our child binds it. The supervisor therefore treats a child that dies at startup with
"address already in use" as a port race and restarts the cluster on fresh ports.

Ports are picked below the kernel's ephemeral range (``ip_local_port_range``): every outgoing
connection takes its local port from that range, so a listener port picked there can be taken by any
connect (the chief's own, probing parameter servers that are not up yet) before the child binds it.
"""

from __future__ import annotations

import random
import re
import socket
from contextlib import ExitStack
from pathlib import Path

HOST = "127.0.0.1"

_IN_USE = re.compile(
    r"address already in use|EADDRINUSE|errno 98|Failed to add port|Could not start gRPC server", re.IGNORECASE
)
"""Python's EADDRINUSE, and what a TensorFlow gRPC server logs when its port is taken."""


EPHEMERAL_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
ATTEMPTS = 200


def listener_range(range_file: Path = EPHEMERAL_RANGE_FILE) -> tuple[int, int] | None:
    """The ports to pick listeners from: the half below the ephemeral range's start (16384-32767 with
    Linux's default 32768-60999); None when the range cannot be read or leaves no room."""
    try:
        low = int(range_file.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return (max(1024, low // 2), low - 1) if low > 2048 else None


def free_ports(n: int, host: str = HOST, share: tuple[int, int] = (0, 1)) -> list[int]:
    """``n`` distinct ports that were bindable on ``host`` (all held open together, then released),
    outside the ephemeral range when it is known. ``share`` ``(index, count)``: only ports whose number
    modulo ``count`` is ``index`` (processes picking with different shares never pick the same port)."""
    span = listener_range()
    with ExitStack() as stack:
        ports: list[int] = []
        for _ in range(n):
            s = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM))
            _bind_listener(s, host, span, share)
            ports.append(s.getsockname()[1])
        return ports


def _bind_listener(s: socket.socket, host: str, span: tuple[int, int] | None, share: tuple[int, int] = (0, 1)) -> None:
    """Bind ``s`` to a random free port in ``span``; to any port the kernel gives when there is no
    known span or nothing in it was free after ``ATTEMPTS`` tries."""
    if span is not None:
        rng = random.SystemRandom()
        index, count = share
        for _ in range(ATTEMPTS):
            port = rng.randint(*span)
            port += (index - port) % count  # the next port of this share
            if port > span[1]:
                continue
            try:
                s.bind((host, port))
                return
            except OSError:
                continue
    s.bind((host, 0))


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
