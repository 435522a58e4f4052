"""Run as the chief of a real cluster (TF_CONFIG/TFPS_JOB in env): train ``steps`` with the real
:class:`tfps_trainer.chief.Trainer`, then print one JSON line describing where each variable lives.

With ``PROBE_SPARSE=1`` it then runs one more step on a batch of known ids through the trainer's own
closures and reports what that step did to the partitioned tables and their optimizer slots (read back
from the PS), and the op types of the traced training functions."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from graph_ops import all_ops

from tfps_trainer import contract, sharding
from tfps_trainer.chief import Trainer
from tfps_trainer.status_server import Progress
from tfps_wire.job_settings import JobSettings


def main() -> None:
    settings = JobSettings.from_env()
    progress = Progress(role="chief", target_steps=settings.steps)
    trainer = Trainer(settings, contract.load(settings.model_module), progress)
    final = trainer.run()
    placement = {}
    for v in trainer.model.weights:
        tf_var = sharding.backing(v)
        shards = getattr(tf_var, "variables", None)
        placement[v.path if hasattr(v, "path") else v.name] = {
            "type": type(tf_var).__name__,
            "shape": list(v.shape),
            "devices": [s.device for s in shards] if shards else [tf_var.device],
            "shard_shapes": [list(s.shape) for s in shards] if shards else [list(v.shape)],
            "shard_first_rows": [s[0].numpy().tolist() for s in shards] if shards else [],
        }
    report = {"final_step": final, "loss": progress.snapshot()["loss"], "variables": placement}
    if os.environ.get("PROBE_SPARSE"):
        report["sparse"] = sparse_step(trainer, settings)
    print("PLACEMENT " + json.dumps(report))
    sys.stdout.flush()
    os._exit(0)


def sparse_step(trainer: Any, settings: JobSettings) -> dict[str, Any]:
    """One step on a batch of known ids; which rows of each table shard and slot shard changed."""
    import numpy as np
    import tensorflow as tf

    from tfps_trainer.closures import TrainClosures

    args = settings.model_args
    sample = trainer.contract.module.sample_inputs(16, args)
    batch = ({k: tf.constant(v) for k, v in sample.items()}, tf.ones([16, 1], tf.float32))
    shards = {}
    for v in trainer.model.weights:
        tf_var = sharding.backing(v)
        if getattr(tf_var, "variables", None):
            shards[v.path] = list(tf_var.variables)
    slots = {}
    for name, parts in shards.items():
        for s in parts:
            idx = trainer.optimizer._get_variable_index(s)
            for slot_list in ("_accumulators", "momentums", "_momentums", "_velocities", "_linears"):
                held = getattr(trainer.optimizer, slot_list, None)
                if held:
                    slots.setdefault(f"{name} {slot_list}", []).append(held[idx])
    watched = {**shards, **slots}
    before = {k: [np.array(sharding.backing(p).numpy()) for p in parts] for k, parts in watched.items()}
    closures = TrainClosures(
        trainer.strategy, trainer.model, trainer.optimizer, trainer.train_vars, trainer.contract.loss, 1
    )
    data = trainer.coordinator.create_per_worker_dataset(lambda: tf.data.Dataset.from_tensors(batch).repeat())
    closures.schedule(trainer.coordinator, iter(data), 1)
    trainer.coordinator.join()
    ids = sorted({int(i) for i in np.asarray(sample["ids"]).ravel()})
    changed = {}
    for k, parts in watched.items():
        rows, offset = [], 0
        for p, old in zip(parts, before[k]):
            new = sharding.backing(p).numpy()
            rows += [offset + int(r) for r in np.nonzero((new != old).reshape(len(old), -1).any(axis=1))[0]]
            offset += len(old)
        changed[k] = rows
    big = {int(p.shape[0]) for parts in shards.values() for p in parts}
    traced = [*closures._full._list_all_concrete_functions(), *trainer.closures._full._list_all_concrete_functions()]
    op_types: dict[str, int] = {}
    over_table = set()
    for fn in traced:
        for op in all_ops(fn.graph):
            op_types[op.type] = op_types.get(op.type, 0) + 1
            for out in op.outputs:
                dims = out.shape.as_list() if out.shape.rank else []
                if dims and dims[0] in big:
                    over_table.add(op.type)
    return {"ids": ids, "changed_rows": changed, "op_types": op_types, "ops_over_a_whole_shard": sorted(over_table)}


if __name__ == "__main__":
    main()
