"""The wide-and-deep example really partitions its embedding tables across both PS, updates them
sparsely on the PS, and its checkpoint restores into another PS count."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from trainer_cluster import LocalCluster, checkpoint_steps, make_settings

from tfps_trainer import row_spread
from tfps_wire.job_settings import PartitionerSettings

pytestmark = [pytest.mark.tf, pytest.mark.timeout(300)]
np = pytest.importorskip("numpy")  # comes with the trainer extra; without it the module is skipped

PROBE = Path(__file__).with_name("placement_probe.py")
VOCAB = 100_000


def _probe(cluster: LocalCluster, **env: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(PROBE)],
        env={**cluster.env("chief", 0), **env},
        capture_output=True,
        text=True,
        timeout=240,
    )
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("PLACEMENT ")), None)
    assert out.returncode == 0 and line, out.stdout[-2000:] + out.stderr[-3000:]
    return json.loads(line[len("PLACEMENT ") :])


def test_embedding_is_sharded_updated_sparsely_and_restores_unsharded_and_into_3_ps(tmp_path: Path) -> None:
    settings = make_settings(
        tmp_path / "job",
        steps=60,
        batch_size=64,
        model_module="tfps_trainer.examples.wide_deep",
        model_args={"vocab_size": VOCAB},
        partitioner=PartitionerSettings(max_shards=2),
    )
    with LocalCluster(tmp_path / "procs", settings) as cluster:
        cluster.start_servers()
        # The real Trainer, run as the chief, then asked where its variables live; then one more step
        # on a batch of known ids through its closures (written after the checkpoint at 60).
        report = _probe(cluster, PROBE_SPARSE="1")
    assert report["final_step"] == 60 and np.isfinite(report["loss"])

    # Sparse updates: the step changed the batch's rows of each table and of its Adagrad accumulator,
    # and nothing else, bit for bit; the PS ran the sparse kernel, and no op of the traced training
    # functions produced a tensor the size of a table shard (a dense read or update).
    # The example spreads its rows (spread_rows): id r is stored at row_spread.position(r).
    sparse = report["sparse"]
    rows = sorted({row_spread.position(i, VOCAB) for i in sparse["ids"]})
    for name in ("deep_embedding/embeddings", "wide_embedding/embeddings"):
        for key in (name, f"{name} _accumulators"):
            changed = sparse["changed_rows"][key]
            assert changed and set(changed) <= set(rows), (key, changed[:20], rows)
    assert sparse["op_types"].get("ResourceSparseApplyAdagradV2", 0) >= 4, sparse["op_types"]
    assert sparse["ops_over_a_whole_shard"] == [], sparse["ops_over_a_whole_shard"]

    deep = report["variables"]["deep_embedding/embeddings"]
    assert deep["type"] == "ShardedVariable" and deep["shape"] == [VOCAB, 16]
    assert sorted(d.split("/device:")[0] for d in deep["devices"]) == [
        "/job:ps/replica:0/task:0",
        "/job:ps/replica:0/task:1",
    ]
    assert sum(s[0] for s in deep["shard_shapes"]) == VOCAB
    wide = report["variables"]["wide_embedding/embeddings"]
    assert wide["type"] == "ShardedVariable" and len(set(wide["devices"])) == 2
    # Small dense weights stay whole (below min_shard_bytes), each on one PS.
    assert len(report["variables"]["deep_hidden/kernel"]["devices"]) == 1

    # The checkpoint written from the sharded tables restores into an unsharded model (export path).
    assert checkpoint_steps(settings.paths.checkpoints) == [60]
    import tensorflow as tf

    from tfps_trainer import contract

    c = contract.load(settings.model_module)
    model = c.build_model(settings.model_args)
    step = tf.Variable(0, dtype=tf.int64)
    tf.train.Checkpoint(model=model, step=step).restore(
        f"{settings.paths.checkpoints}/ckpt-60"
    ).expect_partial().assert_existing_objects_matched()
    assert int(step.numpy()) == 60
    table = model.get_layer("deep_embedding").embeddings.numpy()
    assert table.shape == (VOCAB, 16) and np.isfinite(table).all()
    offset = 0  # each shard's first row, read from the PS after training, is where it belongs
    for rows, first_row in zip(deep["shard_shapes"], deep["shard_first_rows"]):
        np.testing.assert_allclose(table[offset], first_row, rtol=1e-6)
        offset += rows[0]
    probs = model(c.module.sample_inputs(8, settings.model_args)).numpy()
    assert probs.shape == (8, 1) and ((probs >= 0) & (probs <= 1)).all()

    # The same checkpoint restores into 3 PS (3 shards of other sizes): the chief resumes at 60 and
    # every shard holds the rows of the 2-PS run at its place.
    three = settings.model_copy(update={"partitioner": PartitionerSettings(max_shards=3)})
    with LocalCluster(tmp_path / "procs3", three, ps=3) as cluster:
        cluster.start_servers()
        resumed = _probe(cluster)
    deep3 = resumed["variables"]["deep_embedding/embeddings"]
    assert resumed["final_step"] == 60 and len(deep3["devices"]) == 3, deep3
    assert len({d.split("/device:")[0] for d in deep3["devices"]}) == 3
    offset = 0
    for rows, first_row in zip(deep3["shard_shapes"], deep3["shard_first_rows"]):
        np.testing.assert_array_equal(table[offset], np.asarray(first_row, np.float32))
        offset += rows[0]
    assert offset == VOCAB
