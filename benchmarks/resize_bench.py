"""Resize benchmark: what each resize of a running ParameterServer job costs, in steps and in seconds.

Usage: ``hack/netns-run .venv/bin/python benchmarks/resize_bench.py [--steps N]``

One real job (``tfps_trainer.examples.linear`` with a 64x256 hidden layer split in 2 shards, Adam, batch
32, 1 PS and 2 workers on 127.0.0.1) is trained by ``tfps run``'s supervisor in this process with the
resizes the operator makes (the strategy's ``resize_method``, ``reconcile.resize.in_effect``):
2 → 4 workers (Restart), 4 → 1 (Live), 1 worker and 1 → 2 PS (Restart), 1 → 3 workers (Restart).

For each resize it reports:

- ``steps lost``: steps the chief had reported and that are not in the checkpoint the next run resumed
  from (a Restart; the chief saves the steps it scheduled on SIGTERM). A Live resize loses no step: the
  coordinator re-runs the removed workers' closures elsewhere; ``re-run`` counts the optimizer steps those
  re-runs applied twice (the trainer sets the optimizer's counter back to the global step at the next
  checkpoint and logs the difference: the goal is at most one closure, ``stepsPerClosure`` steps, per
  worker removed);
- ``stop s``: the supervisor's own time to carry the resize out (stop, save, start processes);
- ``to progress s``: from the resize until the lead reports a step beyond where it resumed;
- ``to rate s``: from the resize until the reported rate is within 25 % of the median rate of the rest
  of that size's run;
- the rates before and after (steps/s the chief reports; all processes share this machine's cores, so
  more workers do not mean more speed here: ``ps_scaling_bench`` measures that under CPU quotas).

Prints a table and writes benchmarks/results/resize.json. Goal (benchmarks/README.md): no lost
checkpointed step on any resize, and at most one closure re-run per worker removed live.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "operator"), str(REPO / "wire"), str(REPO / "trainer_image")]

from tfps_operator.api.models import ClusterSize  # noqa: E402
from tfps_operator.manifests.jobsettings import job_settings  # noqa: E402
from tfps_operator.tools.jobfile import load_job  # noqa: E402
from tfps_operator.tools.local.progress_display import Status  # noqa: E402
from tfps_operator.tools.local.supervisor import LocalJob, Supervisor  # noqa: E402

RESULTS = REPO / "benchmarks" / "results" / "resize.json"
RESIZES = [(0.2, ClusterSize(ps=1, worker=4)), (0.4, ClusterSize(ps=1, worker=1)),
           (0.6, ClusterSize(ps=2, worker=1)), (0.8, ClusterSize(ps=2, worker=3))]  # fmt: skip
RATE_BAND = 0.25


@dataclass
class Recorder:
    """A Display that keeps every progress sample and event with its time."""

    samples: list[tuple[float, int, float | None]] = field(default_factory=list)
    events: list[tuple[float, str]] = field(default_factory=list)

    def event(self, message: str) -> None:
        self.events.append((time.monotonic(), message))
        print(f"  {message}", flush=True)

    def update(self, status: Status) -> None:
        if status.step is not None:
            self.samples.append((time.monotonic(), status.step, status.steps_per_second))

    def close(self) -> None:
        pass


def job_doc(steps: int) -> dict:
    return {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": "resize-bench"},
        "spec": {
            "model": {
                "module": "tfps_trainer.examples.linear",
                "args": {"features": 64, "hidden": 256, "learning_rate": 0.002},
            },
            "replicas": {"ps": {"replicas": 1}, "worker": {"replicas": 2, "minReplicas": 1}},
            "training": {
                "steps": steps,
                "batchSize": 32,
                "checkpoint": {"everySteps": max(steps // 10, 1), "keep": 20},
                "variablePartitioner": {"minShardBytes": 16384, "maxShards": 2},
            },
            "export": {"enabled": False},
        },
    }


def measure(steps: int, work: Path) -> list[dict]:
    import yaml

    path = work / "job.yaml"
    path.write_text(yaml.safe_dump(job_doc(steps)))
    job = load_job(str(path))
    local = LocalJob(job=job, settings=job_settings(job, mount_path=str(work)))
    rec = Recorder()
    plan = [(int(steps * f), size) for f, size in RESIZES]
    sup = Supervisor(local, rec, resizes=list(plan))  # type: ignore[arg-type]
    try:
        result = sup.run(deadline_s=900)
    finally:
        sup.stop()
    if not result.ok:
        raise SystemExit(f"training failed: {result.message}")
    chief_log = (local.logs / "chief-0.log").read_text(errors="replace")
    return rows(rec, chief_log, steps)


def rows(rec: Recorder, chief_log: str, steps: int) -> list[dict]:
    resized = [(t, m) for t, m in rec.events if m.startswith("resized (")]
    stopped = [int(s) for s in re.findall(r"preempted \(SIGTERM\) at step (\d+)", chief_log)]
    resumed = [int(s) for s in re.findall(r"resumed from checkpoint step (\d+)", chief_log)]
    runs = chief_log.split("===== tfps run: chief-0 start")[1:]  # one segment per run of the chief
    out = []
    restarts = 0
    bounds = [float("-inf")] + [t for t, _ in resized] + [float("inf")]
    for i, (t, msg) in enumerate(resized, start=1):
        m = re.match(r"resized \((\w+)\): workers (\d+) → (\d+), ps (\d+) → (\d+) at step (\d+), in ([\d.]+)s", msg)
        assert m, msg
        method = m[1]
        before = [s for s in rec.samples if bounds[i - 1] <= s[0] < t]
        after = [s for s in rec.samples if t <= s[0] < bounds[i + 1]]
        row: dict = {
            "resize": f"workers {m[2]}→{m[3]}, ps {m[4]}→{m[5]}",
            "method": method,
            "at_step": int(m[6]),
            "stop_s": float(m[7]),
        }
        if method == "Restart":
            row["steps_lost"] = max(0, stopped[restarts] - resumed[restarts]) if restarts < len(resumed) else None
            row["resumed_from"] = resumed[restarts] if restarts < len(resumed) else None
            restarts += 1
            start = row["resumed_from"] or 0
        else:
            row["steps_lost"] = 0
            start = int(m[6])
            found = re.findall(r"optimizer step (\d+) set to the global step (\d+)", runs[restarts])
            row["rerun_optimizer_steps"] = sum(int(a) - int(b) for a, b in found if int(a) > int(b))
        moved = next((s for s in after if s[1] > start), None)
        row["to_progress_s"] = round(moved[0] - t, 2) if moved else None
        rates = [r for _, _, r in after if r]
        steady = statistics.median(rates[len(rates) // 2 :]) if rates else None
        reached = next((s for s in after if s[2] and steady and abs(s[2] - steady) <= RATE_BAND * steady), None)
        row["to_rate_s"] = round(reached[0] - t, 2) if reached else None
        row["rate_before"] = (
            round(statistics.median([r for _, _, r in before if r]), 1) if any(r for _, _, r in before) else None
        )
        row["rate_after"] = round(steady, 1) if steady else None
        out.append(row)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=8000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="tfps-resize-bench-") as tmp:
        table = measure(args.steps, Path(tmp))
    cols = ["resize", "method", "at_step", "steps_lost", "rerun_optimizer_steps", "stop_s", "to_progress_s",
            "to_rate_s", "rate_before", "rate_after"]  # fmt: skip
    widths = [max(len(c), *(len(str(r.get(c, "-"))) for r in table)) for c in cols]
    print("  ".join(c.ljust(w) for c, w in zip(cols, widths)))
    for r in table:
        print("  ".join(str(r.get(c, "-")).ljust(w) for c, w in zip(cols, widths)))
    RESULTS.write_text(json.dumps({"steps": args.steps, "resizes": table}, indent=2) + "\n")
    print(f"wrote {RESULTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
