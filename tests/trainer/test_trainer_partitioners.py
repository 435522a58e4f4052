"""The partitioner a job names is the one its variables are split by: fixedShards 3 over 2 PS and a
maxShardBytes job give the shard counts TensorFlow's partitioners promise, and the chief's log says so."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytestmark = [pytest.mark.tf, pytest.mark.timeout(120)]

PROBE = Path(__file__).with_name("partitioner_probe.py")
PS = ["/job:ps/replica:0/task:0/device:CPU:0", "/job:ps/replica:0/task:1/device:CPU:0"]


def _job(name: str, partitioner: dict) -> dict:
    return {
        "apiVersion": "tfps.dev/v1alpha1",
        "kind": "PSTrainingJob",
        "metadata": {"name": name},
        "spec": {
            # deep table 1000 x 16 float32 (62.5 KiB), wide table 1000 x 1, an MLP of 24 -> 32 -> 1
            "model": {"module": "tfps_trainer.examples.wide_deep", "args": {"vocab_size": 1000, "embed_dim": 16}},
            "replicas": {"ps": {"replicas": 2}, "worker": {"replicas": 1}},
            "training": {"steps": 10, "variablePartitioner": partitioner},
        },
    }


def test_fixed_shards_and_max_shard_bytes_split_as_promised(tmp_path: Path) -> None:
    files = []
    for name, part in (("fixed", {"fixedShards": 3}), ("max-size", {"maxShardBytes": 16384})):
        files.append(tmp_path / f"{name}.yaml")
        files[-1].write_text(yaml.safe_dump(_job(name, part)))
    out = subprocess.run(
        [sys.executable, str(PROBE), *map(str, files)],
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"},
        capture_output=True,
        text=True,
        timeout=100,
    )
    reports = [json.loads(ln[len("SHARDS ") :]) for ln in out.stdout.splitlines() if ln.startswith("SHARDS ")]
    assert out.returncode == 0 and len(reports) == 2, out.stdout[-2000:] + out.stderr[-3000:]
    fixed, max_size = reports

    # fixedShards: 3 over 2 PS: every variable in 3 shards (a 1-row bias stays whole), round robin on both PS
    assert fixed["partitioner"] == "FixedShardsPartitioner(num_shards=3)"
    rows = {name: v["rows"] for name, v in fixed["variables"].items()}
    assert rows == {
        "deep_embedding/embeddings": [334, 333, 333],
        "wide_embedding/embeddings": [334, 333, 333],
        "deep_hidden/kernel": [8, 8, 8],
        "deep_hidden/bias": [11, 11, 10],
        "deep_logit/kernel": [11, 11, 10],
        "deep_logit/bias": [1],
    }
    for name, v in fixed["variables"].items():
        if len(v["rows"]) == 3:
            assert sorted(set(v["devices"])) == PS and v["devices"][0] == v["devices"][2], (name, v["devices"])
    deep = fixed["variables"]["deep_embedding/embeddings"]["devices"]
    where = ",".join("ps/" + d.split("task:")[1][0] for d in deep)
    assert fixed["log"][0] == (
        f"deep_embedding/embeddings [1000, 16] float32 62.5 KiB -> 3 shards [334, 333, 333] rows on {where}"
    )
    assert len(fixed["log"]) == 5  # every split variable has its line; the whole bias none

    # maxShardBytes 16 KiB: the 62.5 KiB table in the fewest shards of at most 16 KiB (4 x 250 rows x 64 B),
    # more shards than PS; everything smaller stays whole
    assert max_size["partitioner"] == "MaxSizePartitioner(max_shard_bytes=16384, max_shards=None)"
    split = {name: v["rows"] for name, v in max_size["variables"].items() if len(v["rows"]) > 1}
    assert split == {"deep_embedding/embeddings": [250, 250, 250, 250]}
    assert sorted(set(max_size["variables"]["deep_embedding/embeddings"]["devices"])) == PS
    assert len(max_size["log"]) == 1 and max_size["log"][0].startswith(
        "deep_embedding/embeddings [1000, 16] float32 62.5 KiB -> 4 shards [250, 250, 250, 250] rows on "
    )
