"""Small real filesystems for storage-fault tests: a tmpfs of a given size mounted over a directory.

Needs CAP_SYS_ADMIN (root in the CI container); tests skip, saying why, where ``mount`` is refused.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for the storage fault (needs root/CAP_SYS_ADMIN): {proc.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(directory: Path) -> int:
    """Write zeros into ``directory/filler`` until the filesystem is full; returns the bytes written."""
    written = 0
    chunk = b"\0" * 65536
    with open(directory / "filler", "wb", buffering=0) as f:
        while True:
            try:
                written += f.write(chunk)
            except OSError:
                break
    for size in (4096, 512, 1):  # the last partial blocks
        try:
            with open(directory / "filler", "ab", buffering=0) as f:
                while True:
                    written += f.write(b"\0" * size)
        except OSError:
            pass
    return written


def remount(path: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(path)], check=True, capture_output=True)
