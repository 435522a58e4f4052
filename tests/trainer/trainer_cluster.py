"""Launch real trainer processes (``python -m tfps_trainer``) on 127.0.0.1 for tests and benchmarks.

TF_CONFIG comes from the one builder, :func:`tfps_operator.manifests.tfconfig.tf_config_json`; job
settings are a real :class:`tfps_wire.job_settings.JobSettings`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfps_operator.manifests.tfconfig import tf_config_json
from tfps_operator.tools.local.ports import free_ports
from tfps_wire.job_settings import JobSettings, Paths

PYTHON = sys.executable


def make_settings(root: Path, **overrides: Any) -> JobSettings:
    base: dict[str, Any] = {
        "job_name": "t",
        "model_module": "tfps_trainer.examples.linear",
        "steps": 200,
        "batch_size": 32,
        "paths": Paths(root=str(root)),
        # Slow enough that the loss is still visibly falling when the first progress is reported.
        "model_args": {"learning_rate": 0.01},
    }
    base.update(overrides)
    return JobSettings(**base)


@dataclass
class LocalCluster:
    """chief + ps + worker (+ optional evaluator, tf.data service dispatcher and data workers) processes sharing
    one TF_CONFIG cluster. ``settings_of`` gives a process settings of its own (a data worker told another
    dispatcher address, say)."""

    workdir: Path
    settings: JobSettings
    ps: int = 2
    workers: int = 2
    evaluator: int = 0
    dispatcher: int = 0
    dataworkers: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)
    settings_of: dict[tuple[str, int], JobSettings] = field(default_factory=dict)
    ports: dict[tuple[str, int], int] = field(default_factory=dict)
    procs: dict[tuple[str, int], subprocess.Popen] = field(default_factory=dict)
    progress_ports: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        # tfps run's port picker: distinct ports below the ephemeral range, so no connect takes them.
        keys = [(role, i) for role, n in self.counts.items() for i in range(n)]
        *ports, chief, evaluator = free_ports(len(keys) + 2)
        self.ports = dict(zip(keys, ports))
        self.progress_ports = {"chief": chief, "evaluator": evaluator}

    @property
    def counts(self) -> dict[str, int]:
        c = {"chief": 1, "ps": self.ps, "worker": self.workers}
        if self.evaluator:
            c["evaluator"] = self.evaluator
        if self.dispatcher:
            c["dispatcher"] = self.dispatcher
        if self.dataworkers:
            c["dataworker"] = self.dataworkers
        return c

    def address(self, role: str, index: int) -> str:
        return f"127.0.0.1:{self.ports[(role, index)]}"

    def env(self, role: str, index: int) -> dict[str, str]:
        env = dict(os.environ)
        env.update(
            TF_CONFIG=tf_config_json(self.counts, self.address, role, index),  # type: ignore[arg-type]
            TFPS_JOB=self.settings_of.get((role, index), self.settings).to_env(),
            TFPS_TERMINATION_LOG=str(self.termination_log(role, index)),
            TFPS_PROGRESS_HOST="127.0.0.1",
            TFPS_PROGRESS_PORT=str(self.progress_ports.get(role, 0)),
            TF_CPP_MIN_LOG_LEVEL="2",
            PYTHONUNBUFFERED="1",
        )
        env.update(self.extra_env)
        return env

    def termination_log(self, role: str, index: int) -> Path:
        return self.workdir / f"termination-{role}-{index}.log"

    def log(self, role: str, index: int) -> Path:
        return self.workdir / f"{role}-{index}.log"

    def start(self, role: str, index: int = 0) -> subprocess.Popen:
        with open(self.log(role, index), "ab") as out:
            proc = subprocess.Popen(
                [PYTHON, "-m", "tfps_trainer"],
                env=self.env(role, index),
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.procs[(role, index)] = proc
        return proc

    def start_servers(self) -> None:
        for i in range(self.ps):
            self.start("ps", i)
        for i in range(self.workers):
            self.start("worker", i)

    def start_all(self) -> subprocess.Popen:
        self.start_servers()
        if self.evaluator:
            self.start("evaluator", 0)
        return self.start("chief", 0)

    def kill(self, role: str, index: int = 0, sig: int = signal.SIGKILL) -> None:
        proc = self.procs[(role, index)]
        if proc.poll() is None:
            proc.send_signal(sig)
        proc.wait(timeout=30)

    def wait(self, role: str = "chief", index: int = 0, timeout: float = 180) -> int:
        try:
            return self.procs[(role, index)].wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{role}/{index} did not finish in {timeout}s; log tail:\n{self.tail(role, index)}"
            ) from None

    def tail(self, role: str = "chief", index: int = 0, lines: int = 30) -> str:
        path = self.log(role, index)
        text = path.read_text(errors="replace") if path.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def status(self, role: str = "chief") -> dict[str, Any] | None:
        """The role's /status; None while nothing listens. A busy machine may take seconds to answer."""
        url = f"http://127.0.0.1:{self.progress_ports[role]}/status"
        try:
            with urllib.request.urlopen(url, timeout=15) as resp:
                return json.loads(resp.read())
        except OSError:
            return None

    def metrics_text(self, role: str = "chief") -> str | None:
        url = f"http://127.0.0.1:{self.progress_ports[role]}/metrics"
        try:
            with urllib.request.urlopen(url, timeout=15) as resp:
                return resp.read().decode()
        except OSError:
            return None

    def wait_listening(self, role: str, index: int = 0, timeout: float = 180) -> None:
        """Until the process's TF_CONFIG port accepts connections (TensorFlow imported, its server started)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            proc = self.procs[(role, index)]
            if proc.poll() is not None:
                raise AssertionError(f"{role}/{index} exited ({proc.returncode}):\n{self.tail(role, index)}")
            try:
                socket.create_connection(("127.0.0.1", self.ports[(role, index)]), timeout=2).close()
                return
            except OSError:
                time.sleep(0.2)
        raise AssertionError(f"{role}/{index} not listening after {timeout}s:\n{self.tail(role, index)}")

    def wait_for_step(self, step: int, timeout: float = 120, role: str = "chief") -> dict[str, Any]:
        return self.wait_for_status(lambda snap: snap["step"] >= step, f"step {step}", timeout, role)

    def wait_for_status(
        self, accept: Callable[[dict[str, Any]], bool], what: str, timeout: float = 120, role: str = "chief"
    ) -> dict[str, Any]:
        """Poll the role's /status until `accept(snapshot)`; fail if the process exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            snap = self.status(role)
            if snap and accept(snap):
                return snap
            proc = self.procs.get((role, 0))
            if proc is not None and proc.poll() is not None:
                raise AssertionError(f"{role} exited ({proc.returncode}) before {what}:\n{self.tail(role)}")
            time.sleep(0.2)
        raise AssertionError(f"{role} did not reach {what} in {timeout}s:\n{self.tail(role)}")

    def stop(self) -> None:
        """Terminate every process still running (SIGTERM, then SIGKILL)."""
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        deadline = time.monotonic() + 10
        for proc in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def checkpoint_steps(directory: str | Path) -> list[int]:
    """Steps of the complete checkpoints (``ckpt-<step>.index``) in ``directory``, sorted."""
    d = Path(directory)
    if not d.is_dir():
        return []
    return sorted(int(p.name[len("ckpt-") : -len(".index")]) for p in d.glob("ckpt-*.index"))


def stored_step(prefix: str) -> int:
    """The global step saved inside a checkpoint."""
    import tensorflow as tf

    return int(tf.train.load_checkpoint(prefix).get_tensor("step/.ATTRIBUTES/VARIABLE_VALUE"))


def checkpoint_tensors(prefix: str) -> dict[str, Any]:
    import tensorflow as tf

    reader = tf.train.load_checkpoint(prefix)
    return {k: reader.get_tensor(k) for k in reader.get_variable_to_shape_map()}


def scalar_events(directory: str | Path, tag: str, newest_file_only: bool = False) -> dict[int, float]:
    """step -> value of scalar ``tag`` in the TensorBoard event files under ``directory``."""
    import tensorflow as tf

    files = sorted(Path(directory).glob("events.out.tfevents.*"), key=lambda p: p.stat().st_mtime)
    if newest_file_only:
        files = files[-1:]
    out: dict[int, float] = {}
    for f in files:
        for event in tf.compat.v1.train.summary_iterator(str(f)):
            for value in event.summary.value:
                if value.tag == tag:
                    out[int(event.step)] = float(tf.make_ndarray(value.tensor))
    return out
