"""Trainer benchmark: tfps at several steps per closure vs a bare ClusterCoordinator loop, tf_keras ``fit``
and single-process training, side by side; optimizer-step drift; input waiting; checkpoint cost.

Usage: ``hack/netns-run .venv/bin/python benchmarks/trainer_bench.py [--steps N] [--repeats R] [--quick]``

For each model, ``tiny`` (Dense 1 on 8 features, SGD: ``tfps_trainer.examples.linear``) and ``medium``
(Dense 256-256-10, Adam: ``benchmarks/models/medium.py``), one run starts a real cluster on 127.0.0.1
(1 PS + 2 workers, TF_CONFIG from the one builder, batch 32) and, against the same servers, runs one
chief process per variant, ``repeats`` times in a rotated order (so each variant sees similar load):

- ``tfps_k1``, ``tfps_k<K>``: the real :class:`tfps_trainer.chief.Trainer` (progress, TensorBoard,
  restore, final checkpoint) at ``steps_per_closure`` 1 and at each K of ``--ks``; ``tfps`` is the
  default (:data:`tfps_wire.job_settings.DEFAULT_STEPS_PER_CLOSURE`). Timed from after the restore to the
  final checkpoint's save (the final join included), after a warm-up run;
- ``bare``: the PSS tutorial's loop with ``--k`` steps per closure (``tf.range`` loop in one
  ``tf.function``), same model module, data, loss and optimizer; schedule all, join;
- ``fit``: ``tf_keras`` ``model.fit`` under ParameterServerStrategy with ``steps_per_execution`` 20 on the
  ``tf_keras`` twin of the model (same data and loss);
- ``input``: closures that only take ``--k`` batches from the per-worker iterators: what the input
  pipelines deliver; far above the training rate means the workers do not wait on input;
- ``single``: the same model, data and optimizer trained in one process (no PS, no coordinator), ``--k``
  steps per ``tf.function`` call: the ceiling on this machine without PS traffic.

Every variant reports steps/s and steps per CPU-second of all its processes (chief + PS + workers, read
from ``/proc`` over the timed window; ``single`` its own), the optimizer's step counter against the
global step (Keras 3 optimizers undercount under PSS unless the trainer makes the count atomic, see
trainer_image/README.md), and its last loss.

Then, for the wide-and-deep model at several vocabulary sizes (tables partitioned over 2 PS), the time of
one ``CheckpointManager.save`` (model + Adagrad slots + step) as the chief sees it.

Prints tables and writes benchmarks/results/trainer.json. Goals (benchmarks/README.md): tfps at its
default >= 1.9x tfps_k1 on tiny and >= 1.5x on medium, within 5 % of ``bare``, >= 1.3x ``fit``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODELS_DIR = ROOT / "benchmarks" / "models"
sys.path.insert(0, str(ROOT / "tests" / "trainer"))

WARMUP = 200
"""Steps each variant runs before its timed window (tracing, pipelines filled); a multiple of every K."""
BATCH = 32
PIDS_ENV = "TFPS_BENCH_PIDS"
"""Process ids of the PS and workers, whose CPU time a chief adds to its own."""
PS_PIDS_ENV = "TFPS_BENCH_PS_PIDS"
"""Process ids of the PS, whose resident memory a chief reports at the end of its timed window."""

MODELS = {
    "tiny": {
        "module": "tfps_trainer.examples.linear",
        "tf_keras": "tfps_trainer.examples.linear_tf_keras",
        "args": {"features": 8},
    },
    "medium": {"module": "medium", "tf_keras": "medium_tf_keras", "args": {}},
}


# ---- measurement helpers (in the chief / single process) ---------------------------------------


def _cpu() -> float:
    """CPU seconds (user + system, all threads) used by this process so far."""
    import resource

    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _cpu_of(pid: str) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _pids(name: str) -> list[str]:
    """The process ids the environment variable ``name`` lists (comma-separated)."""
    return [p for p in os.environ.get(name, "").split(",") if p]


def _cpu_all() -> float:
    """CPU seconds of this process and of the PS and workers named in :data:`PIDS_ENV`."""
    return _cpu() + sum(_cpu_of(p) for p in _pids(PIDS_ENV))


def _rss_bytes(pid: str, field: str = "VmRSS") -> int:
    """A process's resident memory now (``VmHWM``: its peak)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    return 0


class Window:
    """The timed window of one variant: wall time, CPU of all processes, CPU of this process."""

    def __init__(self) -> None:
        self.t0 = self.t1 = self.all0 = self.all1 = self.own0 = self.own1 = None
        self.ps_rss: list[int] = []

    def start(self) -> None:
        self.t0, self.all0, self.own0 = time.perf_counter(), _cpu_all(), _cpu()

    def stop(self) -> None:
        if self.t1 is None:
            self.t1, self.all1, self.own1 = time.perf_counter(), _cpu_all(), _cpu()
            self.ps_rss = [_rss_bytes(p) for p in _pids(PS_PIDS_ENV)]

    def result(self, steps: int, **extra: object) -> dict:
        return {
            "steps": steps,
            "seconds": self.t1 - self.t0,
            "cpu_seconds": self.all1 - self.all0,
            "chief_cpu_seconds": self.own1 - self.own0,
            **({"ps_rss_bytes": self.ps_rss} if self.ps_rss else {}),
            **extra,
        }


def _loaded(module_name: str | None = None):
    from tfps_trainer import contract
    from tfps_wire.job_settings import JobSettings

    settings = JobSettings.from_env()
    return settings, contract.load(module_name or settings.model_module), dict(settings.model_args)


def _coordinated():
    import tensorflow as tf

    strategy = tf.distribute.ParameterServerStrategy(tf.distribute.cluster_resolver.TFConfigClusterResolver())
    return strategy, tf.distribute.coordinator.ClusterCoordinator(strategy)


# ---- the variants (each in its own process) -------------------------------------------------------


def chief_tfps(steps: int, k: int) -> dict:
    from tfps_trainer.chief import Trainer
    from tfps_trainer.status_server import Progress

    settings, c, _ = _loaded()
    settings = settings.model_copy(update={"steps_per_closure": k})
    warm = settings.model_copy(update={"steps": WARMUP})
    trainer = Trainer(warm, c, Progress("chief", WARMUP))
    trainer.run()  # traces, fills the pipelines, writes ckpt-WARMUP
    target = WARMUP + steps
    trainer.settings = settings.model_copy(update={"steps": target})
    window = Window()
    restore, save = trainer.restore, trainer._save

    def timed_restore() -> int:
        start = restore()
        window.start()
        return start

    def timed_save(step: int) -> None:
        if step == target:
            window.stop()
        save(step)

    trainer.restore = timed_restore  # type: ignore[method-assign]
    trainer._save = timed_save  # type: ignore[method-assign]
    final = trainer.run()  # restores ckpt-WARMUP, trains `steps`, joins, writes the final checkpoint
    assert final == target, final
    return window.result(
        steps,
        final_loss=trainer.progress.snapshot()["loss"],
        optimizer_step=trainer.optimizer_step_before_sync,
        global_step=target,
    )


def _bare_parts(k: int):
    import tensorflow as tf

    settings, c, args = _loaded()
    strategy, coordinator = _coordinated()
    with strategy.scope():
        model = c.build_model(args)
        optimizer = c.optimizer(args)
        optimizer.build(model.trainable_variables)
    per_worker = strategy.distribute_datasets_from_function(lambda ctx: c.dataset(ctx, settings.batch_size, args))
    iterator = iter(coordinator.create_per_worker_dataset(per_worker))

    def replica_fn(batch):
        x, y = batch
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(c.loss(y, model(x, training=True)))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def train_k(it):
        total = tf.constant(0.0)
        for _ in tf.range(k):
            total += tf.cast(strategy.run(replica_fn, args=(next(it),)), tf.float32)
        return total / k

    @tf.function
    def input_k(it):
        total = tf.constant(0.0)
        for _ in tf.range(k):
            _, y = next(it)
            total += tf.cast(tf.reduce_sum(y), tf.float32)
        return total

    return coordinator, iterator, optimizer, train_k, input_k


def chief_bare(steps: int, k: int) -> dict:
    coordinator, iterator, optimizer, train_k, _ = _bare_parts(k)
    for _ in range(WARMUP // k):
        coordinator.schedule(train_k, args=(iterator,))
    coordinator.join()
    window = Window()
    window.start()
    for _ in range(steps // k):
        rv = coordinator.schedule(train_k, args=(iterator,))
    coordinator.join()
    loss = float(rv.fetch())
    window.stop()
    return window.result(
        steps, final_loss=loss, optimizer_step=int(optimizer.iterations.numpy()), global_step=WARMUP + steps
    )


def chief_input(steps: int, k: int) -> dict:
    coordinator, iterator, _, _, input_k = _bare_parts(k)
    for _ in range(WARMUP // k):
        coordinator.schedule(input_k, args=(iterator,))
    coordinator.join()
    window = Window()
    window.start()
    for _ in range(steps // k):
        coordinator.schedule(input_k, args=(iterator,))
    coordinator.join()
    window.stop()
    return window.result(steps)


def chief_fit(steps: int, steps_per_execution: int, module: str) -> dict:
    import tf_keras

    settings, c, args = _loaded(module)
    strategy, _ = _coordinated()
    with strategy.scope():
        model = c.build_model(args)
        model.compile(optimizer=c.optimizer(args), loss=c.loss, steps_per_execution=steps_per_execution)
    data = tf_keras.utils.experimental.DatasetCreator(lambda ctx: c.dataset(ctx, settings.batch_size, args))
    model.fit(data, epochs=1, steps_per_epoch=WARMUP, verbose=0)
    window = Window()
    window.start()
    history = model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
    window.stop()
    return window.result(
        steps,
        final_loss=float(history.history["loss"][-1]),
        optimizer_step=int(model.optimizer.iterations.numpy()),
        global_step=WARMUP + steps,
    )


def single(steps: int, k: int) -> dict:
    import tensorflow as tf

    settings, c, args = _loaded()
    model = c.build_model(args)
    optimizer = c.optimizer(args)
    optimizer.build(model.trainable_variables)
    iterator = iter(c.dataset(None, settings.batch_size, args))

    @tf.function
    def train_k():
        total = tf.constant(0.0)
        for _ in tf.range(k):
            x, y = next(iterator)
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(c.loss(y, model(x, training=True)))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))
            total += tf.cast(loss, tf.float32)
        return total / k

    for _ in range(WARMUP // k):
        train_k()
    window = Window()
    window.start()
    for _ in range(steps // k):
        loss = train_k()
    loss = float(loss)
    window.stop()
    return window.result(
        steps, final_loss=loss, optimizer_step=int(optimizer.iterations.numpy()), global_step=WARMUP + steps
    )


def chief_checkpoint(vocabs: list[int]) -> dict:
    from tfps_trainer.chief import Trainer
    from tfps_trainer.status_server import Progress

    settings, c, _ = _loaded()
    trainer = Trainer(settings, c, Progress("chief", settings.steps))
    trainer.run()  # a few steps so optimizer slots hold real values
    saves = []
    for i in range(3):
        t0 = time.perf_counter()
        path = trainer.checkpointer.save(settings.steps + 1 + i).path
        saves.append(time.perf_counter() - t0)
    size = sum(p.stat().st_size for p in Path(path).parent.glob(Path(path).name + ".*"))
    return {"save_seconds": saves, "bytes": size}


def chief_restore() -> dict:
    """Build the model on this cluster's PS and restore the newest checkpoint into it, timed apart.

    The cluster's ``variablePartitioner`` may split the tables differently from the run that saved: each
    PS reads the slices of the checkpoint's whole tensors that its shards hold."""
    from tfps_trainer import sharding
    from tfps_trainer.chief import Trainer
    from tfps_trainer.status_server import Progress

    settings, c, _ = _loaded()
    ps = _pids(PS_PIDS_ENV)
    t0 = time.perf_counter()
    trainer = Trainer(settings, c, Progress("chief", settings.steps))
    built = time.perf_counter() - t0
    rss_built = [_rss_bytes(p) for p in ps]
    t0 = time.perf_counter()
    step = trainer.restore()
    restored = time.perf_counter() - t0
    shards = [len(sharding.backing(v).variables) for v in trainer.model.weights if sharding.is_sharded(v)]
    return {
        "ps_rss_bytes_built": rss_built,
        "build_seconds": built,
        "restore_seconds": restored,
        "step": step,
        "shards_per_table": max(shards, default=1),
    }


# ---- the driver ----------------------------------------------------------------------------------------


def _run(env: dict[str, str], call: str, timeout: float = 600) -> dict:
    code = (
        f"import json,os,sys; sys.path.insert(0,{str(ROOT / 'benchmarks')!r}); import trainer_bench as b; "
        f"r=b.{call}; print('RESULT '+json.dumps(r), flush=True); os._exit(0)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if out.returncode != 0 or line is None:
        raise SystemExit(f"{call} failed ({out.returncode}):\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}")
    return json.loads(line[len("RESULT ") :])


def _variants(default_k: int, ks: list[int], k: int) -> dict[str, str]:
    """Variant name -> the call that runs it (``{steps}`` filled in later)."""
    out = {"tfps_k1": "chief_tfps({steps}, 1)", "tfps": f"chief_tfps({{steps}}, {default_k})"}
    for x in ks:
        if x not in (1, default_k):
            out[f"tfps_k{x}"] = f"chief_tfps({{steps}}, {x})"
    out["bare"] = f"chief_bare({{steps}}, {k})"
    out["fit"] = "chief_fit({steps}, 20, {tf_keras!r})"
    out["input"] = f"chief_input({{steps}}, {k})"
    out["single"] = f"single({{steps}}, {k})"
    return out


def _median(runs: list[dict], key) -> float:
    return statistics.median(key(r) for r in runs)


def measure_model(name: str, spec: dict, variants: dict[str, str], steps: int, repeats: int, tmp: Path) -> dict:
    from trainer_cluster import LocalCluster

    from tfps_wire.job_settings import Paths

    settings = _settings(
        tmp / f"{name}-job",
        steps=WARMUP + steps,
        batch_size=BATCH,
        model_module=spec["module"],
        model_args=spec["args"],
    )
    pythonpath = os.pathsep.join([str(MODELS_DIR), os.environ.get("PYTHONPATH", "")])
    runs: dict[str, list[dict]] = {v: [] for v in variants}
    with LocalCluster(
        tmp / f"{name}-procs", settings, ps=1, workers=2, extra_env={"PYTHONPATH": pythonpath}
    ) as cluster:
        cluster.start_servers()
        pids = ",".join(str(p.pid) for p in cluster.procs.values())
        names = list(variants)
        for rep in range(repeats):
            order = names[rep % len(names) :] + names[: rep % len(names)]
            for variant in order:
                cluster.settings = settings.model_copy(
                    update={"paths": Paths(root=str(tmp / f"{name}-{rep}-{variant}"))}
                )
                env = cluster.env("chief", 0)
                if variant == "single":
                    env.pop("TF_CONFIG")
                else:
                    env[PIDS_ENV] = pids
                load = os.getloadavg()[0]
                r = _run(env, variants[variant].format(steps=steps, tf_keras=spec["tf_keras"]))
                r["load_average"] = load
                runs[variant].append(r)
                print(
                    f"  {name} repeat {rep} {variant:8s}: {r['steps'] / r['seconds']:8.1f} steps/s, "
                    f"{r['steps'] / r['cpu_seconds']:7.1f} steps/CPU-s, loss {r.get('final_loss')}, "
                    f"optimizer step {r.get('optimizer_step')}/{r.get('global_step')} (load {load:.1f})",
                    flush=True,
                )
    return summarize(runs, repeats)


def summarize(runs: dict[str, list[dict]], repeats: int) -> dict:
    out: dict = {"runs": runs, "variants": {}}
    for variant, rs in runs.items():
        row = {
            "steps_per_second": _median(rs, lambda r: r["steps"] / r["seconds"]),
            "steps_per_cpu_second": _median(rs, lambda r: r["steps"] / r["cpu_seconds"]),
            "chief_cpu_ms_per_step": _median(rs, lambda r: 1000 * r["chief_cpu_seconds"] / r["steps"]),
        }
        if rs[0].get("optimizer_step") is not None:
            row["optimizer_step_share"] = _median(rs, lambda r: r["optimizer_step"] / r["global_step"])
        out["variants"][variant] = row

    def ratio(a: str, b: str, key: str = "steps_per_second") -> float | None:
        """Median over repeats of a/b (each repeat's pair ran under similar load)."""
        if a not in runs or b not in runs:
            return None
        get = (
            (lambda r: r["steps"] / r["seconds"])
            if key == "steps_per_second"
            else (lambda r: r["steps"] / r["cpu_seconds"])
        )
        return statistics.median(get(x) / get(y) for x, y in zip(runs[a], runs[b]))

    out["ratios"] = {
        "tfps_over_tfps_k1": ratio("tfps", "tfps_k1"),
        "tfps_over_bare": ratio("tfps", "bare"),
        "tfps_over_fit": ratio("tfps", "fit"),
        "input_over_tfps": ratio("input", "tfps"),
        "cpu_efficiency_over_single": {
            v: ratio(v, "single", "steps_per_cpu_second") for v in runs if v not in ("single", "input")
        },
    }
    return out


def _settings(root: Path, **kw):
    from trainer_cluster import make_settings

    return make_settings(root, **kw)


def measure_checkpoints(vocabs: list[int], tmp: Path) -> list[dict]:
    from trainer_cluster import LocalCluster

    from tfps_wire.job_settings import PartitionerSettings

    ckpts = []
    for vocab in vocabs:
        s = _settings(
            tmp / f"ckpt-{vocab}",
            steps=20,
            batch_size=64,
            model_module="tfps_trainer.examples.wide_deep",
            model_args={"vocab_size": vocab},
            partitioner=PartitionerSettings(max_shards=2),
        )
        with LocalCluster(tmp / f"procs-ckpt-{vocab}", s) as cluster:
            cluster.start_servers()
            r = _run(cluster.env("chief", 0), "chief_checkpoint([])")
        params = vocab * 17 + (24 * 32 + 32 + 32 + 1)
        ckpts.append(
            {
                "vocab_size": vocab,
                "params": params,
                "bytes": r["bytes"],
                "save_seconds_median": statistics.median(r["save_seconds"]),
                "save_seconds": r["save_seconds"],
            }
        )
    return ckpts


GOALS = {"tiny": 1.9, "medium": 1.5}


def print_model(name: str, m: dict, default_k: int) -> None:
    rows, ratios = m["variants"], m["ratios"]
    k1 = rows["tfps_k1"]["steps_per_second"]
    single_eff = rows["single"]["steps_per_cpu_second"] if "single" in rows else None
    print(f"\n{name}: median of {len(m['runs']['tfps'])} repeats")
    print(
        f"{'variant':<10}{'steps/s':>10}{'x k1':>7}{'steps/CPU-s':>13}{'/single':>9}{'chief ms/step':>15}"
        f"{'opt step':>10}"
    )
    for variant, row in rows.items():
        share = row.get("optimizer_step_share")
        eff = "" if single_eff is None else f"{row['steps_per_cpu_second'] / single_eff:.2f}"
        print(
            f"{variant:<10}{row['steps_per_second']:>10.1f}{row['steps_per_second'] / k1:>7.2f}"
            f"{row['steps_per_cpu_second']:>13.1f}{eff:>9}"
            f"{row['chief_cpu_ms_per_step']:>15.3f}{'' if share is None else f'{100 * share:.1f} %':>10}"
        )
    goal = GOALS[name]
    checks = [
        (f"tfps (K={default_k}) / tfps_k1 >= {goal}", "tfps", "tfps_k1", goal),
        ("tfps / bare >= 0.95", "tfps", "bare", 0.95),
        ("tfps / fit >= 1.3", "tfps", "fit", 1.3),
    ]
    for what, a, b, need in checks:
        value = ratios.get(f"{a}_over_{b}")
        if value is None:
            continue
        of_medians = rows[a]["steps_per_second"] / rows[b]["steps_per_second"]
        verdict = "met" if min(value, of_medians) >= need else "NOT met" if max(value, of_medians) < need else "mixed"
        print(f"  {what}: median of repeat ratios {value:.3f}, ratio of medians {of_medians:.3f} ({verdict})")
    waits = ratios.get("input_over_tfps")
    if waits is not None:
        print(
            f"  input pipelines deliver {waits:.1f}x the training rate: workers "
            f"{'do not wait' if waits >= 2 else 'may wait'} on input"
        )


def main() -> None:
    from tfps_wire.job_settings import DEFAULT_STEPS_PER_CLOSURE

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3000, help="timed steps per variant (a multiple of every K)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--k", type=int, default=DEFAULT_STEPS_PER_CLOSURE, help="K of bare, input and single")
    parser.add_argument("--ks", default="5,50", help="tfps runs at these K too (the default K and 1 always)")
    parser.add_argument("--models", default="tiny,medium")
    parser.add_argument(
        "--variants", default="", help="run only these variants (comma-separated; tfps_k1 and tfps are always run)"
    )
    parser.add_argument("--vocabs", default="10000,100000,1000000")
    parser.add_argument("--quick", action="store_true", help="tiny run to check the benchmark itself")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "trainer.json"))
    a = parser.parse_args()
    if a.quick:
        a.steps, a.repeats, a.vocabs, a.ks = 400, 1, "10000", ""
    ks = [int(x) for x in a.ks.split(",") if x]
    variants = _variants(DEFAULT_STEPS_PER_CLOSURE, ks, a.k)
    if a.variants:
        keep = {"tfps_k1", "tfps", *a.variants.split(",")}
        variants = {name: call for name, call in variants.items() if name in keep}
    results: dict = {
        "host": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "cluster": {"ps": 1, "workers": 2, "batch_size": BATCH},
        "steps_timed": a.steps,
        "warmup_steps": WARMUP,
        "repeats": a.repeats,
        "default_steps_per_closure": DEFAULT_STEPS_PER_CLOSURE,
        "k": a.k,
        "models": {},
        "load_average_start": os.getloadavg(),
    }
    with tempfile.TemporaryDirectory(prefix="tfps-bench-") as tmp:
        for name in a.models.split(","):
            spec = MODELS[name]
            results["models"][name] = {
                "module": spec["module"],
                "tf_keras_module": spec["tf_keras"],
                "args": spec["args"],
                **measure_model(name, spec, variants, a.steps, a.repeats, Path(tmp)),
            }
        results["load_average"] = os.getloadavg()
        results["checkpoint_write"] = measure_checkpoints([int(v) for v in a.vocabs.split(",") if v], Path(tmp))

    for name, m in results["models"].items():
        print_model(name, m, DEFAULT_STEPS_PER_CLOSURE)
    start, end = results["load_average_start"][0], results["load_average"][0]
    print(f"\nload average {start:.1f} at start, {end:.1f} at end, on {os.cpu_count()} CPUs")
    print(f"\n{'vocab':>10}{'params':>12}{'ckpt MB':>10}{'save s (median)':>18}{'MB/s':>10}")
    for c in results["checkpoint_write"]:
        mb = c["bytes"] / 1e6
        print(
            f"{c['vocab_size']:>10}{c['params']:>12}{mb:>10.2f}{c['save_seconds_median']:>18.3f}"
            f"{mb / c['save_seconds_median']:>10.1f}"
        )
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {a.out}")


if __name__ == "__main__":
    main()
