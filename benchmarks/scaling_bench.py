"""Scaling, measured in a cluster in a box: each process its own CPU quota, so that more workers or PS add CPU.

Usage: ``hack/netns-run .venv/bin/python benchmarks/scaling_bench.py [--parts mlp,embedding,overhead] [--quick]``

Every TensorFlow process (chief, each PS, each worker) runs in its own cgroup (``benchmarks/cluster_box.py``)
with a CPU quota and a memory limit, on 127.0.0.1 inside ``hack/netns-run``'s namespace. The chief is the real
``tfps_trainer.chief.Trainer`` at the default steps per closure (``trainer_bench.chief_tfps``): a warm-up, then a
timed window whose start and end it reports in ``time.monotonic()``, the clock the box's sampler uses; what each
process used in that window (CPU, throttling, run-queue wait, peak memory) comes from its cgroup.

- ``mlp``: the "medium" MLP (``benchmarks/models/medium.py``: Dense 256-256-10, Adam) at batch 2048, so that a
  step is compute on the worker (~16 ms of CPU) rather than the PS's fixed 3-4 ms; 1 PS at 0.4 core, workers
  1 -> 2 -> 4 at 0.25 core each, the chief at 0.1: steps/s, the limit N x rate(1) and the scaling efficiency
  rate(N) / (N x rate(1)) (goal >= 0.85 at 4).
- ``embedding``: ``tfps_trainer.examples.wide_deep`` with 2,000,000 rows, 16 ids a row, batch 512,
  ``spread_rows`` (the hot low ids spread over every shard), ``variablePartitioner`` ``maxShards`` = number of
  PS, PS 1 -> 2 -> 4 at 0.2 core each, 2 workers at 0.3: steps/s, efficiency (goal >= 0.7 at 4), each PS's
  CPU, anonymous memory and peak memory. It measures whatever optimizer the model uses.
- ``embedding_contiguous`` (not run by default): the same with ``spread_rows`` false, each shard a contiguous
  range of rows, so the first PS holds the hot ones.
- ``overhead``: the mlp at 1 PS and 1 worker with no cgroup, with every process in a cell with no quota (the
  box's own cost), and in a cell at a whole core, in a rotated order (windows not judged: 3 cores of quota on
  a 2-core machine are over-committed by design).

Quotas sum to at most 1.5 cores (of 2): the rest is for the machine's other work and the sampler. Every flag
changes one of these choices; ``--quick`` is a smoke run (1 -> 2 workers and PS, 100,000 rows, one window).
benchmarks/README.md has the figures and why these choices.

A window in which any process was denied CPU its quota allowed (``cluster_box.starvation``) is refused: the
repeat is run again after a pause (``--retries``), and a curve with a point that stayed refused is not printed,
only the refusals (exit code 3). Writes benchmarks/results/scaling.json (refused windows included, marked;
``--merge`` replaces only the parts run).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import cluster_box as cb
import trainer_bench as tb

ROOT = tb.ROOT
GiB = 1 << 30
MLP_MODULE = "medium"
EMBEDDING_MODULE = "tfps_trainer.examples.wide_deep"


# ---- pure parts --------------------------------------------------------------------------------------------


def efficiency(rates: Mapping[int, float]) -> dict[int, dict[str, float]]:
    """n -> rate, the limit n x rate(base) / base and rate / limit, ``base`` the smallest n measured (1 on a
    1 -> 2 -> 4 curve, where the efficiency is rate(N) / (N x rate(1)))."""
    if not rates:
        return {}
    base = min(rates)
    per_unit = rates[base] / base
    return {n: {"rate": r, "limit": n * per_unit, "efficiency": r / (n * per_unit)} for n, r in sorted(rates.items())}


@dataclass(frozen=True)
class Shape:
    """One point of a curve: the cluster and each role's limits."""

    workers: int
    ps: int
    chief: cb.Limits
    ps_limits: cb.Limits
    worker: cb.Limits

    def limits(self) -> dict[str, cb.Limits]:
        out = {"chief-0": self.chief}
        out |= {f"ps-{i}": self.ps_limits for i in range(self.ps)}
        out |= {f"worker-{i}": self.worker for i in range(self.workers)}
        return out

    @property
    def quota_cores(self) -> float:
        return sum(lim.cores or 0.0 for lim in self.limits().values())


def steps_for(steps: int, scale: int, k: int) -> int:
    """``steps`` x ``scale`` rounded up to a whole number of closures of ``k`` steps."""
    n = steps * scale
    return -(-n // k) * k


# ---- the chief (runs in its own process, inside its cell) ----------------------------------------------


def chief(steps: int, k: int) -> dict:
    """``trainer_bench.chief_tfps`` whose window also reports its start and end in ``time.monotonic()``."""

    class MonotonicWindow(tb.Window):
        def start(self) -> None:
            super().start()
            self.m0 = time.monotonic()

        def stop(self) -> None:
            if self.t1 is None:
                self.m1 = time.monotonic()
            super().stop()

        def result(self, steps: int, **extra: object) -> dict:
            return super().result(steps, t0=self.m0, t1=self.m1, **extra)

    tb.Window = MonotonicWindow  # type: ignore[misc]
    return tb.chief_tfps(steps, k)


# ---- the driver ------------------------------------------------------------------------------------------


def _boxed_cluster_class() -> type:
    from trainer_cluster import PYTHON, LocalCluster

    class BoxedCluster(LocalCluster):
        """LocalCluster whose processes each start inside their cell of ``box`` (None: no cgroups)."""

        box: cb.ClusterBox | None = None

        def start(self, role: str, index: int = 0) -> subprocess.Popen:
            argv = [PYTHON, "-m", "tfps_trainer"]
            if self.box is not None:
                argv = self.box.command(f"{role}-{index}", argv)
            with open(self.log(role, index), "ab") as out:
                proc = subprocess.Popen(
                    argv, env=self.env(role, index), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
                )
            self.procs[(role, index)] = proc
            return proc

    return BoxedCluster


def run_chief(box: cb.ClusterBox | None, env: dict[str, str], steps: int, k: int, timeout: float) -> dict:
    code = (
        f"import json,os,sys; sys.path.insert(0,{str(ROOT / 'benchmarks')!r}); import scaling_bench as s; "
        f"r=s.chief({steps}, {k}); print('RESULT '+json.dumps(r), flush=True); os._exit(0)"
    )
    argv = [sys.executable, "-c", code]
    if box is not None:
        argv = box.command("chief-0", argv)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if out.returncode != 0 or line is None:
        raise SystemExit(f"chief failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return json.loads(line[len("RESULT ") :])


@dataclass
class Bench:
    tmp: Path
    k: int
    repeats: int
    retries: int
    pause: float
    max_denied: float
    deadline: float
    """time.monotonic() after which no new repeat starts."""
    chief_timeout: float

    def point(
        self,
        label: str,
        shape: Shape,
        model: str,
        args: dict,
        batch: int,
        steps: int,
        boxed: bool = True,
        judge: bool = True,
    ) -> dict:
        """``repeats`` timed windows of one cluster shape; each starved window is retried up to ``retries``
        times. Returns the windows (refused ones marked) and the median rate of the accepted ones. ``boxed``
        False: plain processes, no cgroups; ``judge`` False: no starvation verdict (quotas that exceed the
        machine on purpose)."""
        from tfps_trainer.cluster import wait_for_addresses
        from tfps_wire.job_settings import PartitionerSettings, Paths

        settings = tb._settings(
            self.tmp / f"{label}-job",
            steps=tb.WARMUP + steps,
            batch_size=batch,
            model_module=model,
            model_args=args,
            steps_per_closure=self.k,
            partitioner=PartitionerSettings(max_shards=shape.ps) if model == EMBEDDING_MODULE else None,
        )
        pythonpath = os.pathsep.join([str(tb.MODELS_DIR), os.environ.get("PYTHONPATH", "")])
        windows: list[dict] = []
        box = cb.ClusterBox(shape.limits()) if boxed else None
        cluster_cls = _boxed_cluster_class()
        with (
            box or _nothing(),
            cluster_cls(
                self.tmp / f"{label}-procs",
                settings,
                ps=shape.ps,
                workers=shape.workers,
                extra_env={"PYTHONPATH": pythonpath},
            ) as cluster,
        ):
            cluster.box = box
            cluster.start_servers()
            addresses = [cluster.address(r, i) for (r, i) in cluster.procs]
            if missing := wait_for_addresses(addresses, 180):
                raise SystemExit(f"{label}: servers did not start: {missing}")
            attempt = 0
            while sum(not w["refused"] for w in windows) < self.repeats:
                if time.monotonic() > self.deadline:
                    print(f"  {label}: out of time after {len(windows)} windows", flush=True)
                    break
                cluster.settings = settings.model_copy(
                    update={"paths": Paths(root=str(self.tmp / f"{label}-{attempt}"))}
                )
                load = os.getloadavg()[0]
                r = run_chief(box, cluster.env("chief", 0), steps, self.k, self.chief_timeout)
                rate = r["steps"] / r["seconds"]
                w: dict = {"steps": r["steps"], "seconds": r["seconds"], "rate": rate, "load_average": load}
                if box is not None:
                    usage = box.usage(r["t0"], r["t1"])
                    verdicts = cb.starvation(usage.values(), self.max_denied) if judge else []
                    w |= {
                        "machine_cores": box.machine_cores(r["t0"], r["t1"]),
                        "processes": {n: u.as_dict() for n, u in usage.items()},
                        "refused": bool(verdicts),
                        "verdicts": verdicts,
                        "sampler_cores": box.sampler_cores(),
                    }
                else:
                    w |= {"refused": False, "verdicts": []}
                windows.append(w)
                print(f"  {label} window {attempt}: {_window_line(w)}", flush=True)
                attempt += 1
                if w["refused"]:
                    refused = sum(x["refused"] for x in windows)
                    if refused > self.retries:
                        print(f"  {label}: refused {refused} times, giving up on this point", flush=True)
                        break
                    time.sleep(self.pause)
        accepted = [w["rate"] for w in windows if not w["refused"]]
        return {
            "label": label,
            "workers": shape.workers,
            "ps": shape.ps,
            "limits": {n: {"cores": lim.cores, "memory_bytes": lim.memory_bytes} for n, lim in shape.limits().items()},
            "quota_cores": shape.quota_cores if boxed else None,
            "steps": steps,
            "windows": windows,
            "complete": len(accepted) >= self.repeats,
            "steps_per_second": statistics.median(accepted) if accepted else None,
        }


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def _window_line(w: dict) -> str:
    text = f"{w['rate']:7.1f} steps/s over {w['seconds']:.1f} s (load {w['load_average']:.1f})"
    if "processes" in w:
        cores = " ".join(f"{n} {p['cores']:.2f}" for n, p in w["processes"].items())
        text += f", machine {w['machine_cores']:.2f} cores; used: {cores}"
    if w["refused"]:
        text += "\n    REFUSED, starved: " + "\n    ".join(w["verdicts"])
    return text


def curve(
    bench: Bench, name: str, shapes: Sequence[Shape], model: str, args: dict, batch: int, steps: int, by: str
) -> dict:
    points = []
    for shape in shapes:
        n = getattr(shape, by)
        scale = n if by == "workers" else 1
        label = f"{name}-{by}{n}"
        print(f"{label}: {shape.limits()} (quotas sum to {shape.quota_cores:.2f} cores)", flush=True)
        points.append(bench.point(label, shape, model, args, batch, steps_for(steps, scale, bench.k)))
    complete = all(p["complete"] for p in points)
    out: dict = {
        "by": by,
        "model": model,
        "model_args": args,
        "batch_size": batch,
        "points": points,
        "complete": complete,
    }
    if complete:
        out["efficiency"] = {str(n): e for n, e in efficiency({p[by]: p["steps_per_second"] for p in points}).items()}
    return out


OVERHEAD_VARIANTS = ("none", "cells", "core")
"""The overhead run's variants: no cgroup; every process in a cell with no CPU quota (the cgroups, the wrapper,
the sampler: the box's own cost); every process in a cell at a whole core (the issue's comparison: it also caps
a worker whose two TensorFlow threads would use more)."""


def overhead(bench: Bench, memory_bytes: int, batch: int, steps: int) -> dict:
    """The mlp at 1 PS and 1 worker in each of :data:`OVERHEAD_VARIANTS`, in a rotated order per repeat."""
    rates: dict[str, list[float]] = {v: [] for v in OVERHEAD_VARIANTS}
    used: dict[str, list[dict[str, float]]] = {v: [] for v in OVERHEAD_VARIANTS}
    sampler: list[float] = []
    one = dataclass_replace(bench, repeats=1, retries=0)
    for rep in range(bench.repeats):
        for variant in OVERHEAD_VARIANTS[rep % 3 :] + OVERHEAD_VARIANTS[: rep % 3]:
            lim = cb.Limits(1.0 if variant == "core" else None, memory_bytes)
            p = one.point(
                f"overhead-{variant}-{rep}",
                Shape(1, 1, lim, lim, lim),
                MLP_MODULE,
                {},
                batch,
                steps,
                boxed=variant != "none",
                judge=False,
            )
            rates[variant] += [w["rate"] for w in p["windows"]]
            used[variant] += [
                {n: u["cores"] for n, u in w["processes"].items()} for w in p["windows"] if "processes" in w
            ]
            sampler += [w["sampler_cores"] for w in p["windows"] if "sampler_cores" in w]

    def ratio(a: str) -> dict[str, float | None]:
        pairs = list(zip(rates[a], rates["none"]))
        if not pairs:
            return {"ratio_of_medians": None, "median_of_ratios": None}
        return {
            "ratio_of_medians": statistics.median(rates[a]) / statistics.median(rates["none"]),
            "median_of_ratios": statistics.median(x / y for x, y in pairs),
        }

    return {
        "steps": steps,
        "steps_per_second": rates,
        "cores_used": used,
        "cells_over_none": ratio("cells"),
        "core_over_none": ratio("core"),
        "sampler_cores": statistics.median(sampler) if sampler else None,
    }


def dataclass_replace(bench: Bench, **kw: object) -> Bench:
    from dataclasses import replace

    return replace(bench, **kw)  # type: ignore[arg-type]


def _limits(cores: float, memory_gib: float) -> cb.Limits:
    return cb.Limits(cores, int(memory_gib * GiB))


def main() -> None:
    from tfps_wire.job_settings import DEFAULT_STEPS_PER_CLOSURE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="mlp,embedding,overhead", help="also: embedding_contiguous")
    parser.add_argument("--workers", default="1,2,4", help="mlp: worker counts")
    parser.add_argument("--ps", default="1,2,4", help="embedding: PS counts")
    parser.add_argument("--chief-cores", type=float, default=0.1)
    parser.add_argument("--worker-cores", type=float, default=0.25, help="mlp: each worker's quota")
    parser.add_argument("--ps-cores", type=float, default=0.4, help="mlp: the one PS's quota")
    parser.add_argument("--emb-workers", type=int, default=2)
    parser.add_argument("--emb-worker-cores", type=float, default=0.3)
    parser.add_argument("--emb-ps-cores", type=float, default=0.2)
    parser.add_argument("--memory-gib", type=float, default=3.0, help="memory limit of each process")
    parser.add_argument("--vocab", type=int, default=2_000_000)
    parser.add_argument("--ids", type=int, default=16, help="embedding: ids per example")
    parser.add_argument("--mlp-batch", type=int, default=2048, help="mlp: batch per worker and step")
    parser.add_argument("--emb-batch", type=int, default=512, help="embedding: batch per worker and step")
    parser.add_argument("--steps", type=int, default=300, help="timed steps (mlp: per worker)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--retries", type=int, default=2, help="refused windows tolerated per point")
    parser.add_argument("--pause", type=float, default=30, help="seconds to wait after a refused window")
    parser.add_argument("--max-denied", type=float, default=cb.MAX_DENIED_SHARE)
    parser.add_argument("--max-minutes", type=float, default=90, help="no new window starts after this")
    parser.add_argument("--quick", action="store_true", help="a short smoke run")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "scaling.json"))
    parser.add_argument("--merge", action="store_true", help="replace only the parts run in an existing --out")
    a = parser.parse_args()
    if a.quick:
        a.steps, a.repeats, a.retries, a.pause, a.vocab, a.workers, a.ps = 200, 1, 0, 5, 100_000, "1,2", "1,2"
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the boxes kill their processes, remove cgroups
    reason = cb.unavailable_reason()
    if reason:
        raise SystemExit(f"no cluster box here: {reason}")
    mem = a.memory_gib
    bench = Bench(
        tmp=Path(),
        k=DEFAULT_STEPS_PER_CLOSURE,
        repeats=a.repeats,
        retries=a.retries,
        pause=a.pause,
        max_denied=a.max_denied,
        deadline=time.monotonic() + 60 * a.max_minutes,
        chief_timeout=600,
    )
    parts = a.parts.split(",")
    results: dict = {
        "host": {"python": platform.python_version(), "cpus": os.cpu_count(), "cgroup": cb.current_layout().version},
        "steps_per_closure": bench.k,
        "max_denied_share": a.max_denied,
        "load_average_start": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="tfps-scaling-") as tmp:
        bench.tmp = Path(tmp)
        if "mlp" in parts:
            shapes = [
                Shape(n, 1, _limits(a.chief_cores, mem), _limits(a.ps_cores, mem), _limits(a.worker_cores, mem))
                for n in map(int, a.workers.split(","))
            ]
            results["mlp"] = curve(bench, "mlp", shapes, MLP_MODULE, {}, a.mlp_batch, a.steps, "workers")
        emb_shapes = [
            Shape(
                a.emb_workers,
                n,
                _limits(a.chief_cores, mem),
                _limits(a.emb_ps_cores, mem),
                _limits(a.emb_worker_cores, mem),
            )
            for n in map(int, a.ps.split(","))
        ]
        if "embedding" in parts:
            args = {"vocab_size": a.vocab, "ids_per_example": a.ids, "spread_rows": True}
            results["embedding"] = curve(
                bench, "embedding", emb_shapes, EMBEDDING_MODULE, args, a.emb_batch, a.steps, "ps"
            )
        if "embedding_contiguous" in parts:
            args = {"vocab_size": a.vocab, "ids_per_example": a.ids, "spread_rows": False}
            results["embedding_contiguous"] = curve(
                bench, "embedding_contiguous", emb_shapes, EMBEDDING_MODULE, args, a.emb_batch, a.steps, "ps"
            )
        if "overhead" in parts:
            results["overhead"] = overhead(bench, int(mem * GiB), a.mlp_batch, steps_for(a.steps, 5, bench.k))
    results["load_average"] = os.getloadavg()
    run = {
        "parts": parts,
        "started": started,
        "finished": time.strftime("%Y-%m-%d %H:%M:%S"),
        "code": subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
        ).stdout.strip(),
        "load_average_start": results["load_average_start"],
        "load_average": results["load_average"],
    }
    if a.merge and Path(a.out).exists():
        old = json.loads(Path(a.out).read_text())
        results = {**old, **{k: v for k, v in results.items() if k in parts}, "runs": old.get("runs", [])}
    results.setdefault("runs", []).append(run)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(results, indent=2) + "\n")
    refused = report(results)
    print(f"\nwrote {a.out}")
    if refused:
        sys.exit(3)


GOALS = {"mlp": 0.85, "embedding": 0.7, "embedding_contiguous": 0.7}
"""The issue's goals: scaling efficiency at the largest count (4 workers; 4 PS)."""


def role_cores(point: dict, prefix: str) -> list[float]:
    """Median cores used by each process whose name starts with ``prefix``, over the accepted windows."""
    windows = [w for w in point["windows"] if not w["refused"] and "processes" in w]
    names = sorted({n for w in windows for n in w["processes"] if n.startswith(prefix)})
    return [statistics.median(w["processes"][n]["cores"] for w in windows) for n in names]


def peak_mib(point: dict, prefix: str, key: str = "peak_memory_bytes") -> list[float]:
    """The largest ``key`` (the cgroup's memory high-water mark by default) of each process whose name starts
    with ``prefix``, over all windows, in MiB."""
    peaks: dict[str, float] = {}
    for w in point["windows"]:
        for n, u in w.get("processes", {}).items():
            if n.startswith(prefix) and key in u:  # files from before the key was recorded lack it
                peaks[n] = max(peaks.get(n, 0.0), u[key] / 2**20)
    return [peaks[n] for n in sorted(peaks)]


def report(results: dict) -> bool:
    """Print the curves that are complete, and the refusals of those that are not; True if any was refused."""
    refused = False
    for part, by, title in (
        ("mlp", "workers", "medium MLP, 1 PS"),
        ("embedding", "ps", "wide-deep, spread rows"),
        ("embedding_contiguous", "ps", "wide-deep, contiguous rows"),
    ):
        c = results.get(part)
        if c is None:
            continue
        if not c["complete"]:
            refused = True
            print(f"\n{title}: NO CURVE (a point was refused as starved, or ran out of time):")
            for p in c["points"]:
                for w in p["windows"]:
                    if w["refused"]:
                        print(f"  {p['label']}: " + "; ".join(w["verdicts"]))
                if not p["windows"]:
                    print(f"  {p['label']}: no window")
            continue
        print(f"\n{title}, batch {c['batch_size']}: {by} at fixed quotas, median of the accepted windows")
        print(
            f"{by:>8}{'quotas':>8}{'steps/s':>10}{'N x r(1)':>10}{'efficiency':>12}"
            f"{'PS cores':>22}{'worker cores':>14}{'PS anon MiB':>20}{'PS peak MiB':>22}"
        )
        for p in c["points"]:
            e = c["efficiency"][str(p[by])]
            ps = " ".join(f"{x:.2f}" for x in role_cores(p, "ps-"))
            workers = role_cores(p, "worker-")
            anon = " ".join(f"{x:.0f}" for x in peak_mib(p, "ps-", "max_sampled_anon_bytes")) or "-"
            mem = " ".join(f"{x:.0f}" for x in peak_mib(p, "ps-"))
            print(
                f"{p[by]:>8}{p['quota_cores']:>8.2f}{e['rate']:>10.1f}{e['limit']:>10.1f}{e['efficiency']:>12.2f}"
                f"{ps:>22}{statistics.mean(workers) if workers else 0:>14.3f}{anon:>20}{mem:>22}"
            )
        last = c["points"][-1][by]
        eff = c["efficiency"][str(last)]["efficiency"]
        goal = GOALS[part]
        print(f"  goal: efficiency >= {goal} at {last} {by}: {eff:.2f}, {'met' if eff >= goal else 'NOT met'}")
    o = results.get("overhead")
    if o and o["cells_over_none"]["ratio_of_medians"] is not None:
        med = {v: statistics.median(r) for v, r in o["steps_per_second"].items() if r}
        print(
            f"\noverhead: mlp, 1 PS, 1 worker, {o['steps']} steps; medians of "
            f"{len(o['steps_per_second']['none'])} windows each"
        )
        print(f"{'variant':<44}{'steps/s':>9}{'/ none':>8}{'median of pairs':>17}")
        rows = [
            ("none", "no cgroup", None),
            ("cells", "each process in a cell, no CPU quota", o["cells_over_none"]),
            ("core", "each process in a cell at a whole core", o["core_over_none"]),
        ]
        for v, what, r in rows:
            tail = "" if r is None else f"{r['ratio_of_medians']:>8.3f}{r['median_of_ratios']:>17.3f}"
            print(f"{what:<44}{med[v]:>9.2f}{tail}")
        print(f"the sampler thread: {o['sampler_cores']:.3f} cores")
    return refused


if __name__ == "__main__":
    main()
