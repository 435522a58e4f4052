"""The chief's partitioner call and its log line of each split variable (pure: no TensorFlow)."""

from __future__ import annotations

import subprocess
import sys

from tfps_trainer.partitioning import constructor, describe_partitioner, human_bytes, short_device, split_line
from tfps_wire.job_settings import PartitionerSettings


def test_each_kind_names_its_tensorflow_partitioner_and_arguments() -> None:
    assert constructor(PartitionerSettings(kind="fixed_shards", num_shards=3)) == (
        "FixedShardsPartitioner",
        {"num_shards": 3},
    )
    assert constructor(PartitionerSettings(max_shards=2)) == (
        "MinSizePartitioner",
        {"min_shard_bytes": 262144, "max_shards": 2},
    )
    assert constructor(PartitionerSettings(kind="max_size", max_shard_bytes=1 << 20)) == (
        "MaxSizePartitioner",
        {"max_shard_bytes": 1048576, "max_shards": None},
    )
    assert (
        describe_partitioner(PartitionerSettings(kind="max_size", max_shard_bytes=1 << 20, max_shards=4))
        == "MaxSizePartitioner(max_shard_bytes=1048576, max_shards=4)"
    )


def test_the_line_of_a_split_variable() -> None:
    devices = [f"/job:ps/replica:0/task:{i}/device:CPU:0" for i in (0, 1, 2, 3)]
    line = split_line("deep_embedding/embeddings", [2_000_000, 16], "float32", 4, [500_000] * 4, devices)
    assert line == (
        "deep_embedding/embeddings [2000000, 16] float32 122.1 MiB -> 4 shards [500000, 500000, 500000, 500000] "
        "rows on ps/0,ps/1,ps/2,ps/3"
    )
    # more shards than parameter servers: uneven rows, a server named once per shard it holds
    three = split_line("w", [10, 3], "float64", 8, [4, 3, 3], [devices[1], devices[0], devices[1]])
    assert three == "w [10, 3] float64 240 B -> 3 shards [4, 3, 3] rows on ps/1,ps/0,ps/1"


def test_devices_and_sizes_read_short() -> None:
    assert short_device("/job:ps/replica:0/task:12/device:CPU:0") == "ps/12"
    assert short_device("/job:ps/task:1") == "ps/1"
    assert short_device("/device:CPU:0") == "/device:CPU:0"
    assert [human_bytes(n) for n in (0, 1023, 1024, 256 << 10, 61 << 20, 3 << 30)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "256.0 KiB",
        "61.0 MiB",
        "3.0 GiB",
    ]


def test_the_module_imports_no_tensorflow() -> None:
    code = "import sys, tfps_trainer.partitioning; print('tensorflow' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
