"""The trainer processes a ``tfps run`` started, found by their TF_CONFIG."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def children_by_task(runner_pid: int) -> dict[str, int]:
    """``{"worker-1": pid, ...}`` for the runner's trainer children, from their TF_CONFIG."""
    out = {}
    kids = subprocess.run(["pgrep", "-P", str(runner_pid)], capture_output=True, text=True).stdout.split()
    for pid in map(int, kids):
        try:
            env = dict(kv.split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in kv)
        except OSError:
            continue
        if "TF_CONFIG" in env:
            task = json.loads(env["TF_CONFIG"])["task"]
            out[f"{task['type']}-{task['index']}"] = pid
    return out


def tfps_run(job: Path, work: Path, *extra: str, timeout: float = 540) -> subprocess.CompletedProcess:
    """``tfps run JOB --workdir WORK EXTRA...`` in a subprocess, its output captured."""
    argv = [
        sys.executable,
        "-c",
        "import sys; from tfps_operator.tools.cli import main; sys.exit(main())",
        "run",
        str(job),
        "--workdir",
        str(work),
        *extra,
    ]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
