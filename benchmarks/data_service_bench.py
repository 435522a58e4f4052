"""The tf.data service on an input-bound model, measured in a cluster in a box (docs/data-service.md).

Usage: ``hack/netns-run .venv/bin/python benchmarks/data_service_bench.py [--data-workers 0,1,2,4] [--quick]``

``benchmarks/models/input_bound.py``: a CPU-bound preprocessing ``map`` (``rounds`` dense tanh layers over each
batch's features) that costs several times the training step (one Dense layer). Every process (chief, PS, two
training workers, the dispatcher, each data worker) runs in its own cgroup (``benchmarks/cluster_box.py``) with
a CPU quota, on 127.0.0.1 inside ``hack/netns-run``'s namespace; the chief is the real
``tfps_trainer.chief.Trainer`` (``scaling_bench.chief``: a warm-up, then a timed window). Points:

- ``0`` data workers: no service, each training worker runs the pipeline on its own quota (today's jobs);
- ``N`` = 1, 2, 4 data workers at ``--data-worker-cores`` each: the chief registers the module's dataset with the
  service and both training workers read one iteration of it (dynamic sharding).

Printed and written to benchmarks/results/data_service.json: steps/s, the scaling efficiency
rate(N) / (N x rate(1)) (goal >= 0.8 while the training side is not the bottleneck), and where the CPU went:
each role's cores in the window (training workers' input CPU falls as the data workers take it). A window in
which a process was denied CPU its quota allowed (``cluster_box.starvation``) is refused and run again.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cluster_box as cb
import scaling_bench as sb
import trainer_bench as tb

ROOT = tb.ROOT
GiB = 1 << 30
MODULE = "input_bound"
RESULTS = ROOT / "benchmarks" / "results" / "data_service.json"


@dataclass(frozen=True)
class Quotas:
    chief: float = 0.1
    ps: float = 0.15
    worker: float = 0.15
    dispatcher: float = 0.1
    data_worker: float = 0.15
    memory_gib: float = 1.5

    def limits(self, workers: int, data_workers: int) -> dict[str, cb.Limits]:
        mem = int(self.memory_gib * GiB)
        out = {"chief-0": cb.Limits(self.chief, mem), "ps-0": cb.Limits(self.ps, mem)}
        out |= {f"worker-{i}": cb.Limits(self.worker, mem) for i in range(workers)}
        if data_workers:
            out["dispatcher-0"] = cb.Limits(self.dispatcher, mem)
            out |= {f"dataworker-{i}": cb.Limits(self.data_worker, mem) for i in range(data_workers)}
        return out


def _served_cluster_class() -> type:
    from dataclasses import dataclass as dc

    boxed = sb._boxed_cluster_class()

    @dc
    class ServedCluster(boxed):  # type: ignore[misc, valid-type]
        """The box's LocalCluster with the tf.data service's processes (TF_CONFIG from the one builder)."""

        data_workers: int = 0

        @property
        def counts(self) -> dict[str, int]:
            c = dict(super().counts)
            if self.data_workers:
                c |= {"dispatcher": 1, "dataworker": self.data_workers}
            return c

        def start_servers(self) -> None:
            if self.data_workers:
                self.start("dispatcher", 0)
                for i in range(self.data_workers):
                    self.start("dataworker", i)
            super().start_servers()

    return ServedCluster


def point(
    tmp: Path, data_workers: int, quotas: Quotas, args: dict, batch: int, steps: int, k: int, repeats: int, retries: int
) -> dict:
    from tfps_trainer.cluster import wait_for_addresses
    from tfps_wire.job_settings import DataServiceSettings, Paths

    label = f"data-workers-{data_workers}"
    workers = 2
    limits = quotas.limits(workers, data_workers)
    print(f"{label}: {', '.join(f'{n} {lim.cores}' for n, lim in limits.items())} cores", flush=True)
    settings = tb._settings(
        tmp / f"{label}-job",
        steps=tb.WARMUP + steps,
        batch_size=batch,
        model_module=MODULE,
        model_args=args,
        steps_per_closure=k,
    )
    pythonpath = os.pathsep.join([str(tb.MODELS_DIR), os.environ.get("PYTHONPATH", "")])
    windows: list[dict] = []
    with (
        cb.ClusterBox(limits) as box,
        _served_cluster_class()(
            tmp / f"{label}-procs",
            settings,
            ps=1,
            workers=workers,
            data_workers=data_workers,
            extra_env={"PYTHONPATH": pythonpath},
        ) as cluster,
    ):
        if data_workers:
            service = DataServiceSettings(
                dispatcher=cluster.address("dispatcher", 0),
                work_dir=str(tmp / f"{label}-journal"),
                dataset_id="tfps-train",
                iteration="tfps-train",
            )
            settings = settings.model_copy(update={"data_service": service})
            cluster.settings = settings
        cluster.box = box
        cluster.start_servers()
        if missing := wait_for_addresses([cluster.address(r, i) for (r, i) in cluster.procs], 300):
            raise SystemExit(f"{label}: servers did not start: {missing}")
        attempt = 0
        while sum(not w["refused"] for w in windows) < repeats:
            cluster.settings = settings.model_copy(update={"paths": Paths(root=str(tmp / f"{label}-{attempt}"))})
            load = os.getloadavg()[0]
            r = sb.run_chief(box, cluster.env("chief", 0), steps, k, 900)
            usage = box.usage(r["t0"], r["t1"])
            verdicts = cb.starvation(usage.values())
            w = {
                "steps": r["steps"],
                "seconds": r["seconds"],
                "rate": r["steps"] / r["seconds"],
                "load_average": load,
                "machine_cores": box.machine_cores(r["t0"], r["t1"]),
                "processes": {n: u.as_dict() for n, u in usage.items()},
                "refused": bool(verdicts),
                "verdicts": verdicts,
            }
            windows.append(w)
            print(f"  {label} window {attempt}: {sb._window_line(w)}", flush=True)
            attempt += 1
            if w["refused"] and sum(x["refused"] for x in windows) > retries:
                print(f"  {label}: refused too often, giving up on this point", flush=True)
                break
    accepted = [w for w in windows if not w["refused"]]
    return {
        "data_workers": data_workers,
        "limits": {n: lim.cores for n, lim in limits.items()},
        "windows": windows,
        "complete": len(accepted) >= repeats,
        "steps_per_second": statistics.median(w["rate"] for w in accepted) if accepted else None,
        "cores": _median_cores(accepted),
    }


def _median_cores(windows: list[dict]) -> dict[str, float]:
    """Median cores per role over the windows: chief, ps, worker (both summed), dispatcher, dataworker (all)."""
    out: dict[str, list[float]] = {}
    for w in windows:
        per: dict[str, float] = {}
        for name, p in w["processes"].items():
            role = name.rsplit("-", 1)[0]
            per[role] = per.get(role, 0.0) + p["cores"]
        for role, c in per.items():
            out.setdefault(role, []).append(c)
    return {role: statistics.median(v) for role, v in out.items()}


def _rate(p: dict) -> tuple[float | None, bool]:
    """The point's rate and whether it was judged: the median of its accepted windows, else (every window
    refused: the machine was over-committed) the median of all of them, marked."""
    if p["steps_per_second"] is not None:
        return p["steps_per_second"], True
    rates = [w["rate"] for w in p["windows"]]
    return (statistics.median(rates) if rates else None), False


def table(points: list[dict]) -> str:
    """steps/s, x linear (rate(N) / (N x rate(1))) and the median cores of each role; ``*``: from refused
    windows only."""
    base, _ = next((_rate(p) for p in points if p["data_workers"] == 1), (None, False))
    lines = [
        "data workers   steps/s  x linear(1)  chief    ps  workers(2)  dispatcher  data workers",
    ]
    for p in points:
        n, c = p["data_workers"], p["cores"] or _median_cores(p["windows"])
        rate, judged = _rate(p)
        eff = f"{rate / (n * base):.2f}" if base and rate and n else "-"
        mark = " " if judged else "*"
        lines.append(
            f"{n:>12}  {rate or 0:7.1f}{mark}  {eff:>11}  {c.get('chief', 0):5.2f}  {c.get('ps', 0):4.2f}  "
            f"{c.get('worker', 0):10.2f}  {c.get('dispatcher', 0):10.2f}  {c.get('dataworker', 0):12.2f}"
        )
    if any(not _rate(p)[1] for p in points):
        lines.append("* every window refused (a process denied CPU its quota allowed): the median of all windows")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-workers", default="0,1,2,4")
    ap.add_argument("--data-worker-cores", type=float, default=Quotas.data_worker)
    ap.add_argument("--rounds", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--steps", type=int, default=300, help="steps in a timed window at 1 data worker")
    ap.add_argument("--k", type=int, default=10, help="steps per closure")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--retries", type=int, default=2)
    ap.add_argument("--quick", action="store_true", help="0,1,2 data workers, one window each")
    ap.add_argument("--print", action="store_true", help=f"only print the table of {RESULTS.name}")
    a = ap.parse_args()
    if a.print:
        print(table(json.loads(RESULTS.read_text())["points"]))
        return
    if reason := cb.unavailable_reason():
        raise SystemExit(f"no cluster box here: {reason}")
    counts = [0, 1, 2] if a.quick else [int(x) for x in a.data_workers.split(",")]
    repeats = 1 if a.quick else a.repeats
    quotas = Quotas(data_worker=a.data_worker_cores)
    args = {"rounds": a.rounds}
    points: list[dict] = []

    def save() -> None:  # after every point: a run stopped midway keeps what it measured
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(
            json.dumps(
                {
                    "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
                    "model": MODULE,
                    "model_args": args,
                    "batch_size": a.batch,
                    "steps_per_closure": a.k,
                    "quotas": quotas.__dict__,
                    "points": points,
                },
                indent=1,
            )
        )

    with tempfile.TemporaryDirectory(prefix="tfps-data-service-bench-") as tmp:
        for n in counts:
            steps = sb.steps_for(a.steps, max(n, 1), a.k)
            points.append(point(Path(tmp), n, quotas, args, a.batch, steps, a.k, repeats, a.retries))
            save()
    print(table(points))
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
