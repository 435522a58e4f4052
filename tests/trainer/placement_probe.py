"""Run as the chief of a real cluster (TF_CONFIG/TFPS_JOB in env): train ``steps`` with the real
:class:`tfps_trainer.chief.Trainer`, then print one JSON line describing where each variable lives."""

from __future__ import annotations

import json
import os
import sys

from tfps_trainer import contract
from tfps_trainer.chief import Trainer
from tfps_trainer.status_server import Progress
from tfps_wire.job_settings import JobSettings


def main() -> None:
    settings = JobSettings.from_env()
    progress = Progress(role="chief", target_steps=settings.steps)
    trainer = Trainer(settings, contract.load(settings.model_module), progress)
    from tfps_trainer import sharding

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
    print("PLACEMENT " + json.dumps({"final_step": final, "loss": progress.snapshot()["loss"], "variables": placement}))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
