"""Packing a directory of code into a ConfigMap for ``spec.model.source`` (pure, apart from reading DIR).

Which files: in a git work tree, what git would commit (``git ls-files --cached --others
--exclude-standard``: ``.gitignore`` honoured exactly); elsewhere every file except ``.git``,
``__pycache__``, ``*.pyc``, virtual environments and the patterns of ``DIR/.gitignore`` (simple glob lines).
UTF-8 text goes to ``data``, anything else to ``binaryData``. A ConfigMap key cannot hold ``/``, so each
file gets the key ``f<NNNN>-<name>`` and ``spec.model.source.items`` maps it back to its path. The API
server refuses a ConfigMap over 1 MiB of data: that is refused here first, naming the largest files.
"""

from __future__ import annotations

import base64
import fnmatch
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAX_CONFIGMAP_BYTES = 1024 * 1024
"""The API server's limit on a ConfigMap's data + binaryData."""
ALWAYS_SKIPPED = (".git", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache")
SKIPPED_SUFFIXES = (".pyc", ".pyo")
_KEY_CHARS = re.compile(r"[^-._a-zA-Z0-9]")


def configmap_name(job: str) -> str:
    """The ConfigMap that holds a job's packed code."""
    return f"{job}-code"


class CodePackError(ValueError):
    """The directory cannot become a ConfigMap; the message says why and what to do."""


@dataclass
class CodePack:
    data: dict[str, str] = field(default_factory=dict)
    binary_data: dict[str, str] = field(default_factory=dict)
    items: list[dict[str, str]] = field(default_factory=list)
    size: int = 0
    binary_files: list[str] = field(default_factory=list)

    def configmap(self, name: str, namespace: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "name": name,
            "namespace": namespace,
            "labels": {"app.kubernetes.io/managed-by": "tfps-submit"},
        }
        if owner:
            meta["ownerReferences"] = [owner]
        cm: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": self.data}
        if self.binary_data:
            cm["binaryData"] = self.binary_data
        return cm


def _git_files(directory: Path) -> list[str] | None:
    try:
        inside = subprocess.run(
            ["git", "-C", str(directory), "rev-parse", "--is-inside-work-tree"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        if inside.returncode != 0 or inside.stdout.strip() != "true":
            return None
        out = subprocess.run(
            ["git", "-C", str(directory), "ls-files", "-z", "--cached", "--others", "--exclude-standard", "."],
            capture_output=True,
            timeout=60,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [p for p in out.decode().split("\0") if p and (directory / p).is_file()]


def _ignore_patterns(directory: Path) -> list[str]:
    try:
        lines = (directory / ".gitignore").read_text().splitlines()
    except OSError:
        return []
    return [ln.strip().rstrip("/") for ln in lines if ln.strip() and not ln.startswith(("#", "!"))]


def _walk(directory: Path) -> list[str]:
    patterns = _ignore_patterns(directory)
    out = []
    for path in sorted(directory.rglob("*")):
        rel = path.relative_to(directory)
        parts = rel.parts
        if any(p in ALWAYS_SKIPPED for p in parts) or path.suffix in SKIPPED_SUFFIXES or not path.is_file():
            continue
        if any(
            fnmatch.fnmatch(p, pat) or fnmatch.fnmatch(rel.as_posix(), pat.lstrip("/"))
            for pat in patterns
            for p in parts
        ):
            continue
        out.append(rel.as_posix())
    return out


def files_of(directory: Path) -> list[str]:
    """The relative paths of the files to ship, sorted."""
    found = _git_files(directory)
    if found is None:
        return _walk(directory)
    return sorted(
        p
        for p in found
        if not any(part in ALWAYS_SKIPPED for part in Path(p).parts) and Path(p).suffix not in SKIPPED_SUFFIXES
    )


def pack(directory: str | Path, limit: int = MAX_CONFIGMAP_BYTES) -> CodePack:
    """The ConfigMap content of ``directory``. Raises :class:`CodePackError`."""
    root = Path(directory)
    if not root.is_dir():
        raise CodePackError(f"--code: {root} is not a directory")
    files = files_of(root)
    if not files:
        raise CodePackError(f"--code: {root} has no files to ship (after .gitignore)")
    out = CodePack()
    sizes = []
    for i, rel in enumerate(files):
        raw = (root / rel).read_bytes()
        key = f"f{i:04d}-{_KEY_CHARS.sub('_', Path(rel).name)}"[:253]
        try:
            out.data[key] = raw.decode("utf-8")
        except UnicodeDecodeError:
            out.binary_data[key] = base64.b64encode(raw).decode()
            out.binary_files.append(rel)
        out.items.append({"key": key, "path": rel})
        out.size += len(raw)
        sizes.append((len(raw), rel))
    if out.size > limit:
        largest = ", ".join(f"{rel} ({n / 1024:.0f} KiB)" for n, rel in sorted(sizes, reverse=True)[:3])
        raise CodePackError(
            f"--code: {root} packs to {out.size / 1024:.0f} KiB, over the ConfigMap limit of {limit / 1024:.0f} KiB "
            f"(largest: {largest}): leave data and models out (.gitignore), or build an image FROM the trainer "
            "image (examples/seed/Dockerfile)"
        )
    return out
