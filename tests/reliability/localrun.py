"""Drive a real ``tfps run`` (local runner, real TensorFlow processes on 127.0.0.1) from a test: write
the job file, start the runner, find its trainer children by TF_CONFIG, read the chief's /status."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
TFPS = Path(sys.executable).with_name("tfps")
sys.path.insert(0, str(REPO / "tests" / "trainer"))


def job_file(
    tmp: Path,
    name: str,
    *,
    steps: int,
    every_steps: int,
    keep: int = 3,
    backoff: int = 3,
    export: bool = False,
    workers: int = 2,
) -> Path:
    """The quickstart example with the given training/checkpoint/restart settings."""
    doc = yaml.safe_load((REPO / "examples" / "quickstart.yaml").read_text())
    doc["metadata"]["name"] = name
    spec = doc["spec"]
    spec["training"].update(steps=steps, checkpoint={"everySteps": every_steps, "keep": keep})
    spec["replicas"]["worker"]["replicas"] = workers
    spec["runPolicy"]["backoffLimit"] = backoff
    spec["export"]["enabled"] = export
    if export:
        spec["export"]["formats"] = ["savedmodel"]
        spec["export"]["verify"] = {"samples": 16}
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


class Run:
    """``tfps run FILE --workdir WORK`` in the background; output in ``<tmp>/<name>.out``."""

    def __init__(self, job: Path, work: Path, *extra: str):
        self.name = yaml.safe_load(job.read_text())["metadata"]["name"]
        self.work = work
        self.root = work / "default" / self.name
        self.out_path = job.with_suffix(f".{int(time.time() * 1000)}.out")
        with open(self.out_path, "wb") as out:
            self.proc = subprocess.Popen(
                [str(TFPS), "run", str(job), "--workdir", str(work), *extra],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=REPO,
            )

    @property
    def output(self) -> str:
        return self.out_path.read_text(errors="replace")

    def wait(self, timeout: float = 600) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"tfps run did not finish in {timeout}s:\n{self.output[-3000:]}") from None

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()

    def children(self) -> dict[str, tuple[int, dict[str, str]]]:
        """``{"worker-1": (pid, env)}`` for the runner's live trainer processes."""
        out: dict[str, tuple[int, dict[str, str]]] = {}
        kids = subprocess.run(["pgrep", "-P", str(self.proc.pid)], capture_output=True, text=True).stdout.split()
        for pid in map(int, kids):
            try:
                env = dict(kv.split("=", 1) for kv in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in kv)
                state = Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
            except OSError:
                continue
            if "TF_CONFIG" in env and state != "Z":
                task = json.loads(env["TF_CONFIG"])["task"]
                out[f"{task['type']}-{task['index']}"] = (pid, env)
        return out

    def chief_status(self) -> dict[str, Any] | None:
        chief = self.children().get("chief-0")
        if chief is None:
            return None
        port = json.loads(chief[1]["TFPS_JOB"])["progress_port"]
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/status", timeout=2) as r:
                return {**json.loads(r.read()), "pid": chief[0]}
        except (OSError, ValueError):
            return None

    def chief_starts(self) -> list[str]:
        """The chief's log, one entry per start."""
        log = self.root / "logs" / "chief-0.log"
        return log.read_text(errors="replace").split("===== tfps run: chief-0 start #")[1:] if log.exists() else []

    def resumed_steps(self) -> list[int | None]:
        """Per chief start: the checkpoint step it resumed from (None: started at 0 / not yet known)."""
        out: list[int | None] = []
        for text in self.chief_starts():
            m = re.search(r"tfps-trainer chief: resumed from checkpoint step (\d+)", text)
            out.append(int(m.group(1)) if m else None)
        return out

    def checkpoint_state(self) -> str | None:
        state = self.root / "checkpoints" / "checkpoint"
        try:
            text = state.read_text()
        except OSError:
            return None
        m = re.search(r'^model_checkpoint_path: "([^"]+)"', text, re.M)
        return str(state.parent / m.group(1)) if m else None  # relative to the directory (or absolute)


def wait_for(fn: Any, timeout: float, what: str, run: Run | None = None, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value:
            return value
        if run is not None and run.proc.poll() is not None:
            raise AssertionError(
                f"tfps run exited {run.proc.returncode} while waiting for {what}:\n{run.output[-3000:]}"
            )
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout}s waiting for {what}" + (f":\n{run.output[-3000:]}" if run else "")
            )
        time.sleep(interval)


def kill(pid: int) -> None:
    try:
        os.kill(pid, 9)
    except ProcessLookupError:
        pass
