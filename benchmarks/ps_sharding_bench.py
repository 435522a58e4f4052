"""PS sharding, measured: the wide-and-deep model with a large embedding, tables partitioned over 1, 2, 4 PS.

Usage: ``hack/netns-run .venv/bin/python benchmarks/ps_sharding_bench.py [--vocab V] [--ps 1,2,4] [--quick]``,
or the vocabulary sweep ``... --sweep 100000:2,2000000:2,20000000:4`` (writes results/vocab_sweep.json);
``--restore-into 4,2`` also restores each point's last checkpoint on fresh clusters of 4 and 2 PS, timed.

For each PS count N, a real cluster on 127.0.0.1 (N PS + 2 workers) trains
``tfps_trainer.examples.wide_deep`` with ``variablePartitioner`` ``maxShards: N`` (each table and its
Adagrad accumulator split in N shards, one per PS) with the real chief (``trainer_bench.chief_tfps``
at the default steps per closure): steps/s, steps per CPU-second of all processes, the resident memory
of each PS at the end of the timed window (and before any chief connected: the TF runtime alone), and
the time of one checkpoint save. Writes
benchmarks/results/ps_sharding.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import trainer_bench as tb


def _ps_pids(cluster, n_ps: int) -> list[str]:
    return [str(cluster.procs[("ps", i)].pid) for i in range(n_ps)]


def _idle_rss(cluster, n_ps: int) -> list[int]:
    """Resident memory of each PS once its server listens, before any chief connects (the TF runtime)."""
    from tfps_trainer.cluster import wait_for_addresses

    addresses = [cluster.address("ps", i) for i in range(n_ps)]
    assert not wait_for_addresses(addresses, 120), "PS did not start"
    time.sleep(2)
    return [tb._rss_bytes(p) for p in _ps_pids(cluster, n_ps)]


def measure(n_ps: int, vocab: int, steps: int, repeats: int, tmp: Path, restore_into: list[int]) -> dict:
    from trainer_cluster import LocalCluster

    from tfps_wire.job_settings import DEFAULT_STEPS_PER_CLOSURE, PartitionerSettings, Paths

    settings = tb._settings(
        tmp / f"ps{n_ps}-job",
        steps=tb.WARMUP + steps,
        batch_size=tb.BATCH,
        model_module="tfps_trainer.examples.wide_deep",
        model_args={"vocab_size": vocab},
        partitioner=PartitionerSettings(max_shards=n_ps),
    )
    runs = []
    with LocalCluster(tmp / f"ps{n_ps}-procs", settings, ps=n_ps, workers=2) as cluster:
        cluster.start_servers()
        pids = ",".join(str(p.pid) for p in cluster.procs.values())
        ps_pids = ",".join(_ps_pids(cluster, n_ps))
        idle_rss = _idle_rss(cluster, n_ps)
        for rep in range(repeats):
            cluster.settings = settings.model_copy(update={"paths": Paths(root=str(tmp / f"ps{n_ps}-{rep}"))})
            env = {**cluster.env("chief", 0), tb.PIDS_ENV: pids, tb.PS_PIDS_ENV: ps_pids}
            load = os.getloadavg()[0]
            r = tb._run(env, f"chief_tfps({steps}, {DEFAULT_STEPS_PER_CLOSURE})")
            r["load_average"] = load
            runs.append(r)
            print(
                f"  {n_ps} PS, repeat {rep}: {r['steps'] / r['seconds']:7.1f} steps/s, "
                f"{r['steps'] / r['cpu_seconds']:6.1f} steps/CPU-s, PS RSS MB "
                f"{[round(b / 2**20) for b in r['ps_rss_bytes']]} (load {load:.1f})",
                flush=True,
            )
        ckpt = tb._run(cluster.env("chief", 0), "chief_checkpoint([])")
        saved = cluster.settings
    restores = [restore(saved, m, tmp / f"ps{n_ps}-into{m}") for m in restore_into]
    return {
        "ps": n_ps,
        "runs": runs,
        "idle_ps_rss_bytes": idle_rss,
        "steps_per_second": statistics.median(r["steps"] / r["seconds"] for r in runs),
        "steps_per_cpu_second": statistics.median(r["steps"] / r["cpu_seconds"] for r in runs),
        "max_ps_rss_bytes": max(max(r["ps_rss_bytes"]) for r in runs),
        "checkpoint_save_seconds": statistics.median(ckpt["save_seconds"]),
        "checkpoint_bytes": ckpt["bytes"],
        "restores": restores,
    }


def restore(saved, n_ps: int, workdir: Path) -> dict:
    """The newest checkpoint of ``saved``'s run restored on a fresh cluster of ``n_ps`` PS (``maxShards`` =
    ``n_ps``): the model's build and the restore timed apart, and each PS's resident memory after the build,
    after the restore and at its peak."""
    from trainer_cluster import LocalCluster

    from tfps_wire.job_settings import PartitionerSettings

    settings = saved.model_copy(update={"partitioner": PartitionerSettings(max_shards=n_ps)})
    with LocalCluster(workdir, settings, ps=n_ps, workers=1) as cluster:
        cluster.start_servers()
        pids = _ps_pids(cluster, n_ps)
        r = tb._run({**cluster.env("chief", 0), tb.PS_PIDS_ENV: ",".join(pids)}, "chief_restore()")
        r["ps_rss_bytes"] = [tb._rss_bytes(p) for p in pids]
        r["ps_peak_rss_bytes"] = [tb._rss_bytes(p, "VmHWM") for p in pids]
    r["ps"] = n_ps
    print(
        f"  restored step {r['step']} into {n_ps} PS ({r['shards_per_table']} shards a table): build "
        f"{r['build_seconds']:.2f} s, restore {r['restore_seconds']:.2f} s, PS RSS MB built "
        f"{[round(b / 2**20) for b in r['ps_rss_bytes_built']]}, restored "
        f"{[round(b / 2**20) for b in r['ps_rss_bytes']]}, peak {[round(b / 2**20) for b in r['ps_peak_rss_bytes']]}",
        flush=True,
    )
    return r


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=2_000_000)
    parser.add_argument("--ps", default="1,2,4")
    parser.add_argument(
        "--sweep",
        help="VOCAB:PS,... instead of --vocab/--ps: the vocabulary sweep, e.g. 100000:2,2000000:2,20000000:4",
    )
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--restore-into", default="", help="PS,...: restore each point's last checkpoint on that many PS, timed"
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out", default=None, help="default: results/ps_sharding.json (results/vocab_sweep.json)")
    a = parser.parse_args()
    if a.quick:
        a.vocab, a.steps, a.repeats = 100_000, 200, 1
    if a.sweep:
        configs = [(int(v), int(p)) for v, p in (c.split(":") for c in a.sweep.split(","))]
    else:
        configs = [(a.vocab, int(n)) for n in a.ps.split(",")]
    out = a.out or str(tb.ROOT / "benchmarks" / "results" / ("vocab_sweep.json" if a.sweep else "ps_sharding.json"))
    results: dict = {
        "host": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "model": {"module": "tfps_trainer.examples.wide_deep", "row_floats": 17},
        "workers": 2,
        "batch_size": tb.BATCH,
        "steps_timed": a.steps,
        "load_average_start": os.getloadavg(),
        "runs": [],
    }
    into = [int(m) for m in a.restore_into.split(",") if m]
    with tempfile.TemporaryDirectory(prefix="tfps-ps-bench-") as tmp:
        for vocab, n in configs:
            r = measure(n, vocab, a.steps, a.repeats, Path(tmp) / f"v{vocab}", into)
            r["vocab_size"], r["params"] = vocab, _params(vocab)
            results["runs"].append(r)
    results["load_average"] = os.getloadavg()
    base = results["runs"][0]["steps_per_second"]
    print("\nwide-deep, 2 workers, batch 64 (tables: 17 floats a row, + as much Adagrad state)")
    print(
        f"{'vocab':>11}{'params MB':>10}{'PS':>4}{'steps/s':>9}{'x first':>8}{'steps/CPU-s':>12}"
        f"{'max PS RSS MB':>14}{'idle PS RSS MB':>15}{'ckpt save s':>12}"
    )
    for r in results["runs"]:
        print(
            f"{r['vocab_size']:>11,}{r['params'] * 4 / 1e6:>10.0f}{r['ps']:>4}{r['steps_per_second']:>9.1f}"
            f"{r['steps_per_second'] / base:>8.2f}{r['steps_per_cpu_second']:>12.1f}"
            f"{r['max_ps_rss_bytes'] / 2**20:>14.0f}{max(r['idle_ps_rss_bytes']) / 2**20:>15.0f}"
            f"{r['checkpoint_save_seconds']:>12.3f}"
        )
    for r in results["runs"]:
        for x in r["restores"]:
            print(
                f"{r['vocab_size']:>11,} rows saved on {r['ps']} PS ({r['checkpoint_bytes'] / 1e6:,.0f} MB), restored "
                f"on {x['ps']} PS: build {x['build_seconds']:.2f} s, restore {x['restore_seconds']:.2f} s, "
                f"max PS RSS {max(x['ps_rss_bytes']) / 2**20:,.0f} MB (peak {max(x['ps_peak_rss_bytes']) / 2**20:,.0f})"
            )
    print(f"load average {results['load_average_start'][0]:.1f} at start, {results['load_average'][0]:.1f} at end")
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"\nwrote {out}")


def _params(vocab: int) -> int:
    return vocab * 17 + (24 * 32 + 32 + 32 + 1)  # the two tables (16 + 1 wide) and the MLP


if __name__ == "__main__":
    main()
