"""Sparse vs dense updates: the same loss curve on the same data and steps?

Usage: ``.venv/bin/python benchmarks/sparse_dense_bench.py [--steps 1200] [--seeds 3] [--vocab 200000]``

Trains ``tfps_trainer.examples.wide_deep`` (skewed ids, two embedding tables and an MLP) in one process,
once per (optimizer, seed), a seed fixing the initial weights and the stream of training batches, so that
both optimizers of a pair see the same weights and batches in the same order: Keras 3's optimizer
(which densifies the embedding gradient: every row of the table and its slots is updated every step) and
tfps' sparse one (:mod:`tfps_trainer.optimizers`: only the rows a batch used). Adagrad is the same update
applied to fewer rows (a zero gradient changes nothing in Keras' Adagrad). The others differ by design on
the rows a batch did not use: Keras' FTRL recomputes every weight from its accumulators, so its first
dense step sets every row not yet seen to zero (its ``z`` is zero), where the sparse FTRL keeps their
initial values; the sparse SGD momentum and LazyAdam are lazy (a row's momentum moves only when the row
is used).

Noise is measured, not assumed: the spread of the dense optimizer's held-out loss across seeds (other
initial weights, other batches: what two runs of the same job differ by; at least 1e-4). For each pair
the table gives the held-out loss and AUC at the end (mean over seeds), the largest gap between the two
curves (same seed, held-out loss every ``--eval-every`` steps), and the verdict: "same" when every gap
is within the seed spread at that point; "better" when the sparse curve leaves that band only below the
dense one; "WORSE" when it is ever above it by more than the spread (exit code 1).
Writes benchmarks/results/sparse_dense.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "sparse_dense.json"


@dataclass(frozen=True)
class Pair:
    name: str
    dense: str
    sparse: str
    kwargs: dict[str, float]
    exact: bool


PAIRS = (
    Pair("Adagrad", "keras.optimizers.Adagrad", "tfps_trainer.optimizers.Adagrad", {"learning_rate": 0.05}, True),
    Pair("FTRL", "keras.optimizers.Ftrl", "tfps_trainer.optimizers.Ftrl", {"learning_rate": 0.05}, False),
    Pair(
        "SGD momentum 0.9",
        "keras.optimizers.SGD",
        "tfps_trainer.optimizers.SGD",
        {"learning_rate": 0.05, "momentum": 0.9},
        False,
    ),
    Pair(
        "Adam / LazyAdam",
        "keras.optimizers.Adam",
        "tfps_trainer.optimizers.LazyAdam",
        {"learning_rate": 0.002},
        False,
    ),
)


def _resolve(path: str) -> type:
    import importlib

    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def train(
    pair: Pair, sparse: bool, seed: int, args: dict, steps: int, batch: int, eval_every: int, eval_set: tuple
) -> dict:
    """One run: the held-out loss and AUC every ``eval_every`` steps, and the time a step took."""
    import keras
    import tensorflow as tf

    from tfps_trainer.examples import wide_deep

    keras.utils.set_random_seed(seed)
    model = wide_deep.build_model(args)
    opt = _resolve(pair.sparse if sparse else pair.dense)(**pair.kwargs)
    # a seed is a run: its initial weights and its stream of training batches (the same labelling)
    stream = tf.distribute.InputContext(num_input_pipelines=1000, input_pipeline_id=seed)
    data = iter(wide_deep.dataset(stream, batch, args).take(steps))

    @tf.function
    def step(x: dict, y: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(wide_deep.loss(y, model(x, training=True)))
        opt.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    ex, ey = eval_set
    auc = keras.metrics.AUC()

    def evaluate() -> tuple[float, float]:
        p = model(ex, training=False)
        auc.reset_state()
        auc.update_state(ey, p)
        return float(tf.reduce_mean(wide_deep.loss(ey, p))), float(auc.result())

    curve = [(0, *evaluate())]
    started = time.perf_counter()
    for i, (x, y) in enumerate(data, start=1):
        step(x, y)
        if i % eval_every == 0:
            curve.append((i, *evaluate()))
    seconds = time.perf_counter() - started
    return {"curve": curve, "ms_per_step": 1000 * seconds / steps}


def compare(pair: Pair, dense_runs: list[dict], sparse_runs: list[dict]) -> dict:
    """Mean end loss/AUC, the largest same-seed gap, and whether every gap is within the dense seeds' spread."""
    points = len(dense_runs[0]["curve"])
    spread = [
        max(r["curve"][k][1] for r in dense_runs) - min(r["curve"][k][1] for r in dense_runs) for k in range(points)
    ]
    # sparse minus dense, same seed: the one farthest from zero at each evaluation
    deltas = [
        max((s["curve"][k][1] - d["curve"][k][1] for d, s in zip(dense_runs, sparse_runs)), key=abs)
        for k in range(points)
    ]
    gaps = [abs(x) for x in deltas]
    band = [max(sp, 1e-4) for sp in spread]
    if all(g <= b for g, b in zip(gaps, band)):
        verdict = "same"
    elif all(x <= b for x, b in zip(deltas, band)):
        verdict = "better"
    else:
        verdict = "WORSE"

    def mean(runs: list[dict], col: int) -> float:
        return sum(r["curve"][-1][col] for r in runs) / len(runs)

    return {
        "pair": pair.name,
        "exact": pair.exact,
        "dense_loss": mean(dense_runs, 1),
        "sparse_loss": mean(sparse_runs, 1),
        "dense_auc": mean(dense_runs, 2),
        "sparse_auc": mean(sparse_runs, 2),
        "max_gap": max(gaps),
        "seed_spread_at_max_gap": spread[gaps.index(max(gaps))],
        "end_seed_spread": spread[-1],
        "dense_ms": sum(r["ms_per_step"] for r in dense_runs) / len(dense_runs),
        "sparse_ms": sum(r["ms_per_step"] for r in sparse_runs) / len(sparse_runs),
        "verdict": verdict,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=1200)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--seeds", type=int, default=3, help="runs per optimizer (>= 2: their spread is the noise)")
    ap.add_argument("--vocab", type=int, default=200_000)
    ap.add_argument("--eval-every", type=int, default=100)
    ap.add_argument("--pairs", default=",".join(p.name for p in PAIRS), help="comma-separated pair names")
    ap.add_argument("--out", type=Path, default=RESULTS)
    a = ap.parse_args(argv)
    if a.seeds < 2:
        ap.error("--seeds must be at least 2: the noise is the spread across seeds")
    sys.path.insert(0, str(ROOT / "trainer_image"))
    import tensorflow as tf

    from tfps_trainer.examples import wide_deep

    args = {"vocab_size": a.vocab, "data_seed": 7}
    # held out: the same labelling, another input pipeline's random stream than the training batches'
    held_out = tf.distribute.InputContext(num_input_pipelines=1000, input_pipeline_id=999)
    eval_set = next(iter(wide_deep.dataset(held_out, 4096, args).take(1)))
    chosen = [p for p in PAIRS if p.name in a.pairs.split(",")]
    rows, runs = [], {}
    for pair in chosen:
        dense = [train(pair, False, s, args, a.steps, a.batch, a.eval_every, eval_set) for s in range(a.seeds)]
        sparse = [train(pair, True, s, args, a.steps, a.batch, a.eval_every, eval_set) for s in range(a.seeds)]
        rows.append(compare(pair, dense, sparse))
        runs[pair.name] = {"dense": dense, "sparse": sparse}
        print(f"  {pair.name}: done", file=sys.stderr, flush=True)
    head = (
        f"{'pair':<18} {'loss dense':>10} {'sparse':>8} {'AUC dense':>9} {'sparse':>7} {'max gap':>8} "
        f"{'seed spread':>11} {'ms/step d/s':>12}  verdict"
    )
    print(
        f"wide-deep {a.vocab:,} rows, batch {a.batch}, {a.steps} steps, {a.seeds} seeds; held-out loss on 4096 examples"
    )
    print(head)
    for r in rows:
        print(
            f"{r['pair']:<18} {r['dense_loss']:>10.4f} {r['sparse_loss']:>8.4f} {r['dense_auc']:>9.4f} "
            f"{r['sparse_auc']:>7.4f} {r['max_gap']:>8.4f} {r['seed_spread_at_max_gap']:>11.4f} "
            f"{r['dense_ms']:>5.1f}/{r['sparse_ms']:<5.1f}  {r['verdict']}"
        )
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(
        json.dumps(
            {
                "config": {**vars(a), "out": str(a.out), "pairs": [asdict(p) for p in chosen]},
                "machine": {"python": platform.python_version(), "tensorflow": tf.__version__, "cpus": os.cpu_count()},
                "rows": rows,
                "runs": runs,
            },
            indent=1,
        )
    )
    return 1 if any(r["verdict"] == "WORSE" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
