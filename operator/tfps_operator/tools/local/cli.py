"""`tfps run FILE`: validate, train as local processes, export, report.

Exit codes: 0 training and every required export format succeeded (optional formats that failed are
listed, not fatal); 1 training or a required format failed;
2 invalid input (nothing was started); 128+N stopped by signal N (every child is stopped first).
"""

from __future__ import annotations

import argparse
import dataclasses
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tfps_wire.job_settings import JobSettings
from tfps_wire.storage_check import PERMANENT, StorageProblem
from tfps_wire.storage_check import check as check_storage
from tfps_wire.uri import is_uri

from ...api.models import ClusterSize, PSTrainingJob, replica_field
from ...manifests.jobsettings import job_settings
from ..client.errors import InvalidJob
from ..jobfile import companion_documents, load_job, refusal_text
from .export import ExportOutcome, artifact_rows, notes_lines, run_export
from .progress_display import Display, Status, make_display
from .sandbox import probe as probe_namespaces
from .supervisor import LocalJob, Supervisor
from .volumes import VolumeRefusal
from .volumes import plan as plan_volumes

DEFAULT_WORKDIR = "tfps-work"
EXIT_FAILED = 1
EXIT_INVALID = 2


class InvalidInput(ValueError):
    """The job file or the command line is wrong; the message names the field and the reason."""


class Interrupted(BaseException):
    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def local_job_from_args(args: argparse.Namespace) -> LocalJob:
    """Everything the run needs, or InvalidInput; touches nothing on disk."""
    if args.steps is not None and args.steps < 1:
        raise InvalidInput(f"--steps: must be ≥ 1 (got {args.steps})")
    try:
        job = load_job(args.file, steps=args.steps, no_export=args.no_export, storage=getattr(args, "storage", None))
    except InvalidJob as exc:
        raise InvalidInput(refusal_text(exc)) from None
    workdir = Path(args.workdir or DEFAULT_WORKDIR).expanduser().resolve()
    if workdir.exists() and not workdir.is_dir():
        raise InvalidInput(f"--workdir: {workdir} exists and is not a directory")
    code = getattr(args, "code", None)
    source = job.spec.model.source
    if code is not None:
        code_dir = Path(code).expanduser().resolve()
        if not code_dir.is_dir():
            raise InvalidInput(f"--code: {code_dir} is not a directory")
    elif source is not None:
        raise InvalidInput(
            f"{args.file}: spec.model.source takes the code from ConfigMap {source.config_map!r} on a "
            "cluster; locally pass the directory it is made from: --code DIR"
        )
    else:
        code_dir = None
    settings = job_settings(job, mount_path=str(workdir), code_dir=str(code_dir) if code_dir else None)
    local_root = str(workdir / job.metadata.namespace / job.metadata.name) if job.spec.storage.uri else None
    local_job = LocalJob(job=job, settings=settings, local_root=local_root)
    try:
        volumes = plan_volumes(job, companion_documents(args.file), workdir, local_job.root, str(args.file))
    except VolumeRefusal as exc:
        raise InvalidInput(f"{args.file}: {exc}") from None
    if volumes and (why := probe_namespaces()) is not None:
        roles = ", ".join(f"spec.replicas.{replica_field(r)}" for r in volumes)
        raise InvalidInput(
            f"{args.file}: {roles}: the pods mount volumes, which tfps run gives each process at their mount "
            f"paths in a mount namespace of its own, and this machine cannot make one ({why}). Run tfps run as "
            "root, or allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1 where it "
            "exists, user.max_user_namespaces > 0); or drop the template's volumeMounts and point the program's "
            "flags at directories of the work directory"
        )
    return dataclasses.replace(local_job, volumes=volumes)


def resizes_from_args(job: PSTrainingJob, given: list[str] | None) -> list[tuple[int, ClusterSize]]:
    """``--resize STEP=WORKERS[:PS]``, in step order, each within the job's limits, or InvalidInput."""
    out: list[tuple[int, ClusterSize]] = []
    w = job.spec.replicas.worker
    ps_now = job.spec.replicas.of("ps").replicas
    for text in given or []:
        step, _, size = text.partition("=")
        workers, _, ps = size.partition(":")
        if not (step.isdigit() and workers.isdigit() and (ps == "" or ps.isdigit())):
            raise InvalidInput(f"--resize {text}: expected STEP=WORKERS or STEP=WORKERS:PS (numbers)")
        n, p = int(workers), int(ps) if ps else ps_now
        least, most = w.min_replicas or 1, w.max_replicas
        if n < least or (most is not None and n > most):
            bound = f"at least {least}" + (f" and at most {most}" if most is not None else "")
            raise InvalidInput(f"--resize {text}: workers must be {bound} (spec.replicas.worker)")
        if ps and job.spec.strategy == "MultiWorkerMirrored":
            raise InvalidInput(f"--resize {text}: a MultiWorkerMirrored job has no parameter servers")
        if ps and p < 1:
            raise InvalidInput(f"--resize {text}: a ParameterServer job needs at least 1 parameter server")
        out.append((int(step), ClusterSize(ps=p, worker=n)))
    return sorted(out, key=lambda r: r[0])


def describe(settings: JobSettings) -> str:
    """What runs: ``300 steps of <module>`` or ``the program <argv>``."""
    steps = f"{settings.steps} steps of " if settings.steps else ""
    if settings.script is not None:
        prog = " ".join(settings.script.programs.get("chief") or settings.script.programs.get("worker") or ())
        return f"{steps}the program {prog!r}" + (f" (export: {settings.model_module})" if settings.model_module else "")
    return f"{steps}{settings.model_module}"


def print_table(
    title: str, header: tuple[str, ...], rows: Sequence[tuple[str, ...]], notes: list[str], tty: bool
) -> None:
    """A table (rich in a terminal, aligned plain text otherwise) and the lines under it."""
    if tty:
        from rich.console import Console
        from rich.table import Table

        table = Table(title=title)
        for h in header:
            table.add_column(h, overflow="fold")
        for r in rows:
            table.add_row(*r)
        Console().print(table)
    else:
        widths = [max(len(x) for x in col) for col in zip(header, *rows)]
        print(title)
        for r in (header, *rows):
            print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    for line in notes:
        print(f"  {line}")


def _print_artifacts(out: ExportOutcome, tty: bool) -> None:
    title = f"exported step {out.step}: {out.path}" if out.artifacts else "nothing exported"
    print_table(
        title, ("format", "status", "path", "size", "max error (verified)"), artifact_rows(out), notes_lines(out), tty
    )


def _install_signal_handlers() -> dict[int, Any]:
    def handler(signum: int, _frame: Any) -> None:
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(s, signal.SIG_IGN)  # a second Ctrl-C must not cut the cleanup short
        raise Interrupted(signum)

    return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}


def main(args: argparse.Namespace) -> int:
    try:
        local_job = local_job_from_args(args)
        resizes = resizes_from_args(local_job.job, getattr(args, "resize", None))
    except InvalidInput as exc:
        print(f"tfps run: {exc}", file=sys.stderr)
        return EXIT_INVALID
    job, settings = local_job.job, local_job.settings
    tty = sys.stdout.isatty()
    started = time.monotonic()
    previous = _install_signal_handlers()
    display: Display | None = None
    supervisor: Supervisor | None = None
    try:
        display = make_display(settings.steps or 0, tty)
        if is_uri(settings.paths.root):
            display.event(f"checking {settings.paths.root}")
            try:
                check_storage(settings.paths.root)
            except StorageProblem as exc:
                display.close()
                print(f"tfps run: {args.file}: spec.storage.uri: {exc.message}", file=sys.stderr)
                return EXIT_INVALID if exc.kind in PERMANENT else EXIT_FAILED
            resumed = False  # the chief says so when it restores a checkpoint
            where = f"files under {settings.paths.root}, logs in {local_job.logs}"
        else:
            ckpts = Path(local_job.on_host(settings.checkpoint_dir))
            resumed = ckpts.is_dir() and any(ckpts.iterdir())
            where = f"files under {local_job.root}"
            if own := local_job.record_directories():
                where += "; the program's own directories: " + ", ".join(f"{k} {v}" for k, v in own.items())
        display.event(
            f"job {job.metadata.namespace}/{job.metadata.name}: {describe(settings)}; "
            + where
            + ("; resuming from its latest checkpoint" if resumed else "")
        )
        # a resize stops the chief first, with its pod's grace: it saves its checkpoint within it
        lead_grace = float(job.spec.run_policy.termination_grace_period_seconds)
        supervisor = Supervisor(local_job, display, lead_grace=lead_grace, resizes=resizes)
        trained = supervisor.run(deadline_s=job.spec.run_policy.active_deadline_seconds)
        supervisor.stop()
        if not trained.ok:
            display.close()
            print(f"tfps run: training failed: {trained.message}", file=sys.stderr)
            return EXIT_FAILED
        # the chief exits 0 only at the target step; its last status may predate that
        if settings.script is None:
            display.update(
                dataclasses.replace(trained.status or Status(), step=settings.steps, checkpoint_step=settings.steps)
            )
        display.event(
            f"training finished after {time.monotonic() - started:.0f}s"
            + (f" and {trained.restarts} restart(s)" if trained.restarts else "")
            + f": {trained.message}"
        )
        display.close()
        if not settings.export.enabled:
            print(f"done (export disabled); checkpoints in {local_job.on_host(settings.checkpoint_dir)}")
            return 0
        exported = run_export(local_job, display, trained)
        if exported.artifacts or exported.failed:
            _print_artifacts(exported, tty)
        if not exported.ok:
            print(f"tfps run: {exported.message}", file=sys.stderr)
            return EXIT_FAILED
        print(f"done in {time.monotonic() - started:.0f}s; logs in {local_job.logs}")
        return 0
    except Interrupted as exc:
        if display is not None:
            display.event(f"{exc}: stopping every process")
        if supervisor is not None:
            supervisor.stop()
        if display is not None:
            display.close()
        print(
            f"tfps run: interrupted by {exc}; rerun the same command to resume from the latest checkpoint",
            file=sys.stderr,
        )
        return 128 + exc.signum
    finally:
        for s in previous:
            signal.signal(s, signal.SIG_IGN)
        if supervisor is not None:
            supervisor.stop()
        for s, h in previous.items():
            signal.signal(s, h)
