"""Run the training cluster as local processes, with the operator's failure rules.

One loop in the main thread: start the tf.data service (dispatcher and data workers, when the job has one),
ps, workers, evaluator and chief with TF_CONFIG on loopback ports; poll them and the lead's progress (the
chief's, or worker 0's in a job without one); on a failure ask ``reconcile.failure_policy`` what to do
(recreate one process, restart everything from the latest checkpoint, or give up), with the job's strategy
(:mod:`...strategies`) saying which roles are recreated alone. A process recreated alone waits out the crash-
loop back-off of ``reconcile.crashloop`` (its local schedule). The strategy's success rule (the lead exiting
0, by default) means training is done. A restart of the training cluster (or a resize by restart) leaves the
tf.data service running, as the operator does: the restarted cluster joins the service's iteration where it
stood (docs/data-service.md).

``--resize STEP=WORKERS[:PS]`` rehearses a resize of a running job on one machine: once the lead reports
STEP, the cluster takes the new size as the operator would (the strategy's rule: workers leave live, or
the lead stops and saves, then every process restarts at the new size from that checkpoint).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

from tfps_wire import exitcodes
from tfps_wire.job_settings import SETTINGS_ENV, TERMINATION_LOG_ENV, JobSettings
from tfps_wire.termination import parse_success

from ...api.models import (
    DATA_SERVICE_ROLES,
    ClusterSize,
    PSTrainingJob,
    Recreation,
    RestartPolicy,
    Role,
    replica_counts,
)
from ...manifests.tfconfig import tf_config_json
from ...reconcile import crashloop
from ...reconcile.failure_policy import on_failure
from ...reconcile.resize import in_effect, spec_size
from ...strategies import TrainingStrategy
from ...strategies import of as strategy_of
from ..local_layout import DIRECTORIES_RECORD, LOCAL_DIR
from .ports import HOST, free_ports, looks_like_port_in_use
from .procs import Child, stop_all
from .progress_display import Display, Status, fetch_status
from .sandbox import prepare as prepare_namespace
from .sandbox import wrap as in_namespace
from .volumes import RoleVolumes, host_path

START_ORDER: tuple[Role, ...] = ("dispatcher", "dataworker", "ps", "worker", "evaluator", "chief")
"""Servers first, the chief (which connects to them) last. Failures are also examined in this order
(chief before workers would blame a worker for a PS crash), so a PS failure is seen as the cause."""
FAILURE_ORDER: tuple[Role, ...] = ("dispatcher", "dataworker", "ps", "chief", "worker", "evaluator")
PROGRESS_HOST_ENV = "TFPS_PROGRESS_HOST"
STARTUP_WINDOW_S = 30.0
"""A process that dies this soon after starting, saying its port is taken, lost a port race."""
MAX_PORT_RACES = 5
PORT_RACE_SETTLE_S = 5.0
EVALUATOR_FINISH_S = 60.0


@dataclass(frozen=True)
class Task:
    role: Role
    index: int

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"


@dataclass(frozen=True)
class LocalJob:
    """A validated job bound to a local workdir: everything needed to start its processes."""

    job: PSTrainingJob
    settings: JobSettings
    local_root: str | None = None
    """Where logs go when the job's files are in object storage (``<workdir>/<namespace>/<job>``)."""
    trainer: tuple[str, ...] = (sys.executable, "-m", "tfps_trainer")
    exporter: tuple[str, ...] = (sys.executable, "-m", "tfps_trainer.export")
    volumes: Mapping[Role, RoleVolumes] = field(default_factory=dict)
    """The roles whose pods mount volumes, and how (:mod:`.volumes`): their processes run in mount
    namespaces of their own (:mod:`.sandbox`)."""

    @property
    def root(self) -> Path:
        """The local directory of the job: its files' root, or ``local_root`` when they are in object storage."""
        return Path(self.local_root or self.settings.paths.root)

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def tasks(self) -> list[Task]:
        counts = replica_counts(self.job)
        return [Task(role, i) for role in START_ORDER for i in range(counts.get(role, 0))]

    @property
    def strategy(self) -> TrainingStrategy:
        return strategy_of(self.job)

    @property
    def lead(self) -> Task:
        """The task that reports progress and whose success ends training."""
        return Task(*self.strategy.lead(replica_counts(self.job)))

    def restart_policy(self, role: Role) -> RestartPolicy:
        return self.job.spec.replicas.of(role).restart_policy

    def base_env(self) -> dict[str, str]:
        reserved = ("TF_CONFIG", SETTINGS_ENV, TERMINATION_LOG_ENV, "TFPS_PROGRESS_PORT")
        env = {k: v for k, v in os.environ.items() if k not in reserved}
        env.setdefault("PYTHONUNBUFFERED", "1")
        # `python` in a script-mode command is this interpreter, as it is the image's in a pod
        env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), env.get("PATH", "")])
        env.setdefault("TF_FORCE_GPU_ALLOW_GROWTH", "true")  # several TF processes may share one GPU
        env[PROGRESS_HOST_ENV] = HOST
        if self.settings.code_dir:  # --code DIR: importable by every trainer and the exporter, as in a pod
            env["PYTHONPATH"] = os.pathsep.join(x for x in (self.settings.code_dir, env.get("PYTHONPATH", "")) if x)
        return env

    def child(self, name: str, argv: list[str], env: dict[str, str]) -> Child:
        term = self.logs / f"{name}.termination-log"
        env = {**env, TERMINATION_LOG_ENV: str(term)}
        return Child(name=name, argv=argv, env=env, log_path=self.logs / f"{name}.log", termination_log=term)

    def on_host(self, path: str) -> str:
        """``path`` as the lead sees it, on this machine: through the lead's volumes when one holds it."""
        volumes = self.volumes.get(self.lead.role)
        return (host_path(volumes.for_task(self.lead.name), path) if volumes else None) or path

    def record_directories(self) -> dict[str, str]:
        """Where the program's own directories are on this machine, written to ``local/directories.json``
        (for ``tfps tensorboard --workdir``); {} when it names none."""
        script = self.settings.script
        if script is None:
            return {}
        dirs = script.directories
        named = {"checkpoints": dirs.checkpoints, "savedModel": dirs.saved_model, "tensorboard": dirs.tensorboard}
        found = {k: self.on_host(v) for k, v in named.items() if v is not None}
        if found:
            (self.root / LOCAL_DIR).mkdir(parents=True, exist_ok=True)
            (self.root / LOCAL_DIR / DIRECTORIES_RECORD).write_text(json.dumps(found, indent=1))
        return found

    def task_child(self, task: Task, env: dict[str, str]) -> Child:
        """A trainer process; with its pod's volumes at their mount paths when its role mounts any."""
        return self._with_volumes(task.name, list(self.trainer), env, self.volumes.get(task.role))

    def export_child(self, env: dict[str, str]) -> Child:
        """The exporter; with the lead's volumes mounted read-only, as the export Job has them (the model a
        program saved in a directory of its own is there)."""
        volumes = self.volumes.get(self.lead.role)
        return self._with_volumes("export", list(self.exporter), env, volumes.read_only() if volumes else None)

    def _with_volumes(self, name: str, argv: list[str], env: dict[str, str], volumes: RoleVolumes | None) -> Child:
        if volumes is None:
            return self.child(name, argv, env)
        local_dir = self.root / LOCAL_DIR
        child = self.child(name, in_namespace(argv, volumes, name, local_dir), env)
        child.prepare = functools.partial(prepare_namespace, volumes, name, local_dir)
        return child


@dataclass(frozen=True)
class Ports:
    """Loopback ports of one incarnation of the cluster: a gRPC port per task, progress ports for the lead and
    the evaluator."""

    grpc: dict[Task, int]
    progress: dict[Task, int]

    @classmethod
    def allocate(cls, tasks: list[Task], lead: Task, kept: dict[Task, int] | None = None) -> Ports:
        """Fresh ports for every task but those in ``kept`` (task -> the gRPC port it keeps)."""
        kept = kept or {}
        fresh = [t for t in tasks if t not in kept]
        with_progress = [t for t in tasks if t == lead or t.role == "evaluator"]
        ports = free_ports(len(fresh) + len(with_progress))
        grpc = {**kept, **dict(zip(fresh, ports))}
        return cls(grpc=grpc, progress=dict(zip(with_progress, ports[len(fresh) :])))

    def address(self, role: Role, index: int) -> str:
        return f"{HOST}:{self.grpc[Task(role, index)]}"


def task_env(local_job: LocalJob, ports: Ports, task: Task) -> dict[str, str]:
    """The environment of one trainer process: TF_CONFIG from the shared builder, TFPS_JOB with its progress port."""
    settings = local_job.settings
    counts = replica_counts(local_job.job)
    if task in ports.progress:
        settings = settings.model_copy(update={"progress_port": ports.progress[task]})
    if settings.data_service is not None:
        workers = tuple(ports.address("dataworker", i) for i in range(counts["dataworker"]))
        service = settings.data_service.model_copy(
            update={"dispatcher": ports.address("dispatcher", 0), "data_workers": workers}
        )
        settings = settings.model_copy(update={"data_service": service})
    return {
        **local_job.base_env(),
        "TF_CONFIG": tf_config_json(counts, ports.address, task.role, task.index),
        SETTINGS_ENV: settings.to_env(),
    }


@dataclass
class TrainingResult:
    """How a local training run ended: ``ok`` and a one-line message (the chief's summary, or the
    reason it failed), the job restarts it took, and the chief's last progress."""

    ok: bool
    message: str
    restarts: int = 0
    status: Status | None = None


@dataclass
class Supervisor:
    local_job: LocalJob
    display: Display
    poll_interval: float = 0.5
    grace: float = 10.0
    lead_grace: float | None = None
    """How long the roles that stop first on a resize (the chief, saving its checkpoint) may take: the
    job's terminationGracePeriodSeconds, as its pod has; ``grace`` when None."""
    port_race_settle: float = PORT_RACE_SETTLE_S
    restarts: int = 0
    preemptions: int = 0
    children: dict[Task, Child] = field(default_factory=dict)
    status: Status | None = None
    _ports: Ports | None = None
    _recreate_at: dict[Task, float] = field(default_factory=dict)
    _recreations: dict[Task, Recreation] = field(default_factory=dict)
    """Crash-loop records of the processes recreated alone, kept across restarts of the cluster as the
    operator keeps ``status.recreations``."""
    _finished: set[Task] = field(default_factory=set)
    _done_at: float | None = None
    resizes: list[tuple[int, ClusterSize]] = field(default_factory=list)
    """Resizes still to do: (the lead's step at which, the new size), in step order."""
    resized: list[str] = field(default_factory=list)
    """What each resize did, one line each."""
    _shrunk_live: bool = False
    """Workers left this run of the cluster live: a worker failure now restarts it (see ``reconcile.resize``)."""

    # -- lifecycle ---------------------------------------------------------------------------
    def _start_cluster(self, keep_service: bool = False) -> None:
        """Start every process; with ``keep_service``, the tf.data service's processes still running keep
        running on their ports (a restart of the training cluster)."""
        self._shrunk_live = False
        for gone in [t for t in self.children if t not in self.local_job.tasks]:  # resized away
            del self.children[gone]
        kept = {
            t: self._ports.grpc[t]
            for t, c in self.children.items()
            if keep_service and self._ports is not None and t.role in DATA_SERVICE_ROLES and c.running()
        }
        self._ports = Ports.allocate(self.local_job.tasks, self.local_job.lead, kept)
        self._finished.clear()
        self._recreate_at.clear()
        self._done_at = None
        for task in self.local_job.tasks:
            if task in kept:
                continue
            fresh = self.local_job.task_child(task, task_env(self.local_job, self._ports, task))
            child = self.children.setdefault(task, fresh)
            child.env = fresh.env  # new ports on a restart; same Child keeps its log and start count
            child.start()
        where = " ".join(f"{t.name}:{self._ports.grpc[t]}" for t in self.local_job.tasks if t not in kept)
        self.display.event(
            f"started {len(self.local_job.tasks) - len(kept)} processes on {HOST} (ports {where}); logs in "
            f"{self.local_job.logs}" + (f"; the tf.data service ({len(kept)} processes) kept running" if kept else "")
        )

    def _training_children(self) -> list[Child]:
        """The processes a restart of the training cluster stops: all but the tf.data service's."""
        return [c for t, c in self.children.items() if t.role not in DATA_SERVICE_ROLES]

    def stop(self) -> None:
        """Stop every process of the cluster (SIGTERM, then SIGKILL after the grace period)."""
        stop_all(self.children.values(), self.grace)

    @property
    def progress_url(self) -> str | None:
        lead = self.local_job.lead
        if self._ports is None or lead not in self._ports.progress:
            return None
        return f"http://{HOST}:{self._ports.progress[lead]}/status"

    # -- the loop ----------------------------------------------------------------------------
    def run(self, deadline_s: float | None = None) -> TrainingResult:
        """Train to completion. The caller must call :meth:`stop` (in a ``finally``) afterwards."""
        started = time.monotonic()
        races = 0
        self._start_cluster()
        while True:
            time.sleep(self.poll_interval)
            if deadline_s is not None and time.monotonic() - started > deadline_s:
                self.stop()
                return self._result(
                    False, f"DeadlineExceeded: training ran longer than activeDeadlineSeconds ({deadline_s:.0f}s)"
                )
            self._poll_progress()
            self._resize_when_due()
            self._start_due_recreations()
            failed = self._first_failure()
            if failed is None:
                if self._training_done():
                    if self._evaluator_still_useful():
                        continue
                    summary = self.children[self.local_job.lead].reason().split(": ", 1)[-1]
                    self._report_final_checkpoint(summary)
                    self.stop()
                    return self._result(True, summary or "training finished")
                continue
            task, code = failed
            child = self.children[task]
            loser = self._port_race_loser(child) if code <= exitcodes.SIGNAL_BASE else None  # a kill lost no race
            if loser is not None and races < MAX_PORT_RACES:
                races += 1
                self.display.event(f"{loser.name} could not bind its port (taken meanwhile); restarting on fresh ports")
                self.stop()
                self._start_cluster()
                continue
            spec = self.local_job.job.spec.replicas.of(task.role)
            recreated = sum(r.total for t, r in self._recreations.items() if t.role == task.role)
            decision = on_failure(
                task.role,
                spec.restart_policy,
                code,
                self.restarts - self.preemptions,
                self.local_job.job.spec.run_policy.backoff_limit,
                recreated,
                spec.recreate_limit,
                alone=task.role not in self.local_job.strategy.restarts_job
                and not (task.role == "worker" and self._shrunk_live),
            )
            if decision.action == "recreate_pod":
                delay = self._count_recreation(task, datetime.now(UTC))
                self.display.event(
                    f"{decision.message} ({child.reason() or 'see ' + str(child.log_path)})"
                    + (f" in {delay:.0f}s" if delay else "")
                )
                self._recreate_at[task] = time.monotonic() + delay
                child.popen = None  # reaped; wait for _start_due_recreations
            elif decision.action == "restart_job":
                self.restarts += 1
                self.preemptions += 0 if decision.counted else 1
                self.display.event(f"{decision.message} ({child.reason() or 'see ' + str(child.log_path)})")
                grace = self.local_job.strategy.restart_grace_seconds
                stop_all(self._training_children(), self.grace if grace is None else min(grace, self.grace))
                self._start_cluster(keep_service=True)
            else:
                message = f"{decision.reason}: {decision.message}\n{child.describe_failure(code)}"
                self.stop()
                return self._result(False, message)

    def _resize_when_due(self) -> None:
        """The next ``--resize`` once the lead has reported its step: workers leave live, or the lead
        stops (it saves on SIGTERM) and every process restarts at the new size."""
        step = self.status.step if self.status is not None else None
        if not self.resizes or step is None or step < self.resizes[0][0]:
            return
        at, size = self.resizes.pop(0)
        before = spec_size(self.local_job.job)
        if size == before:
            return
        method = self.local_job.strategy.resize_method(before, size)
        job = in_effect(self.local_job.job, size)
        what = f"workers {before.worker} → {size.worker}, ps {before.ps} → {size.ps} at step {step}"
        started = time.monotonic()
        if method == "Live":
            leaving = [t for t in self.children if t.role == "worker" and t.index >= size.worker]
            stop_all([self.children.pop(t) for t in leaving], self.grace)
            self.local_job = replace(self.local_job, job=job)
            self._shrunk_live = True
        else:
            first = self.local_job.strategy.stops_first
            stop_all([c for t, c in self.children.items() if t.role in first], self.lead_grace or self.grace)
            if self.children[self.local_job.lead].poll() == 0:  # it reached the target step while stopping
                self._finished.add(self.local_job.lead)
                self.display.event(f"not resized ({what}): training finished while the lead stopped")
                return
            grace = self.local_job.strategy.restart_grace_seconds
            stop_all(self._training_children(), self.grace if grace is None else min(grace, self.grace))
            self.local_job = replace(self.local_job, job=job)
            self._start_cluster(keep_service=True)
        line = f"resized ({method}): {what}, in {time.monotonic() - started:.1f}s"
        self.resized.append(line)
        self.display.event(line)

    def _training_done(self) -> bool:
        job = self.local_job.job
        done = {(t.role, t.index) for t in self._finished}
        return self.local_job.strategy.training_succeeded(done, replica_counts(job), job.spec.run_policy.success_policy)

    def _evaluator_still_useful(self) -> bool:
        """After training is done, give a running evaluator a while to evaluate the final checkpoint."""
        evaluators = [t for t in self.children if t.role == "evaluator" and t not in self._finished]
        if not evaluators:
            return False
        if self._done_at is None:
            self._done_at = time.monotonic()
            self.display.event(
                f"waiting up to {EVALUATOR_FINISH_S:.0f}s for the evaluator to evaluate the final checkpoint"
            )
        return time.monotonic() - self._done_at < EVALUATOR_FINISH_S

    def _result(self, ok: bool, message: str) -> TrainingResult:
        return TrainingResult(ok=ok, message=message, restarts=self.restarts, status=self.status)

    def _count_recreation(self, task: Task, now: datetime) -> float:
        """Record one more recreation of ``task`` and return the seconds until it may start: its
        crash-loop back-off (the local schedule), counted from its previous recreation as the operator counts it."""
        entry = self._recreations.get(task)
        when = crashloop.not_before(entry, now, crashloop.LOCAL) or now
        self._recreations[task] = crashloop.record(entry, when, crashloop.LOCAL)
        return (when - now).total_seconds()

    def _poll_progress(self) -> None:
        url = self.progress_url
        if url is None:
            return
        status = fetch_status(url, timeout=2.0)
        if status is not None:
            before = self.status or Status()
            if status.message and status.message != before.message:
                self.display.event(f"{self.local_job.lead.name}: {status.message}")
            if status.checkpoint_step is not None and status.checkpoint_step != before.checkpoint_step:
                self.display.event(f"checkpoint at step {status.checkpoint_step}: {status.checkpoint_path}")
            self.status = status
            self.display.update(status)

    def _report_final_checkpoint(self, summary: str) -> None:
        """The lead's success summary names its final checkpoint; the last poll may have missed it
        (the lead saves and exits between two polls), as the operator's monitor may."""
        final = parse_success(summary)
        known = self.status.checkpoint_step if self.status is not None else None
        if final is None or final.path is None or (known is not None and final.step <= known):
            return
        self.display.event(f"checkpoint at step {final.step}: {final.path}")
        self.status = replace(self.status or Status(), checkpoint_step=final.step, checkpoint_path=final.path)

    def _start_due_recreations(self) -> None:
        now = time.monotonic()
        for task, when in list(self._recreate_at.items()):
            if when <= now:
                del self._recreate_at[task]
                self.children[task].start()

    def _first_failure(self) -> tuple[Task, int] | None:
        """The first process (in FAILURE_ORDER) that ended badly; records the clean exits of the roles the
        strategy lets finish."""
        finishes = self.local_job.strategy.finishes
        done = self._training_done()
        for role in FAILURE_ORDER:
            if done and role != "evaluator":
                continue  # training is over; only the evaluator still matters
            for task, child in self.children.items():
                if task.role != role or task in self._finished or task in self._recreate_at:
                    continue
                code = child.poll()
                if code is None:
                    continue
                if code == 0 and role in finishes:
                    self._finished.add(task)
                    if role == "evaluator":
                        self.display.event(f"{task.name} finished: {child.reason().split(': ', 1)[-1]}")
                    continue
                return task, code
        return None

    def _port_race_loser(self, failed: Child) -> Child | None:
        """The child that lost a port race, if the failure of young ``failed`` is (a consequence of) one.

        A process that cannot bind its port may not be the first to die: the chief can fail on a
        port held by a stranger before the PS reports it. So a failure at startup waits a moment
        for any sibling to say its port was taken.
        """
        if not _young(failed):
            return None
        settle = time.monotonic() + self.port_race_settle
        while True:
            for child in [failed, *self.children.values()]:
                if _young(child) and looks_like_port_in_use(child.reason() + "\n" + child.tail(40)):
                    return child
            if time.monotonic() >= settle:
                return None
            time.sleep(0.2)


def _young(child: Child) -> bool:
    return child.started_at > 0 and time.monotonic() - child.started_at < STARTUP_WINDOW_S
