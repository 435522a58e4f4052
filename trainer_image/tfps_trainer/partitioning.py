"""The variable partitioner of a job and the log line of each split variable, without TensorFlow.

:func:`constructor` says which ``tf.distribute.experimental.partitioners`` class the chief builds and
with what arguments (:func:`tfps_trainer.sharding.partitioner` builds it); :func:`split_line` says how
one variable was split, from its shape, dtype and shards (:func:`tfps_trainer.sharding.describe`
reads those from the variables).
"""

from __future__ import annotations

from collections.abc import Sequence

from tfps_wire.job_settings import PartitionerKind, PartitionerSettings

CLASSES: dict[PartitionerKind, str] = {
    "fixed_shards": "FixedShardsPartitioner",
    "min_size": "MinSizePartitioner",
    "max_size": "MaxSizePartitioner",
}
"""Each kind's class in ``tf.distribute.experimental.partitioners``."""


def constructor(settings: PartitionerSettings) -> tuple[str, dict[str, int | None]]:
    """The partitioner class's name and its keyword arguments."""
    return CLASSES[settings.kind], settings.arguments()


def describe_partitioner(settings: PartitionerSettings) -> str:
    """``MaxSizePartitioner(max_shard_bytes=1048576, max_shards=None)``: the call, as the chief makes it."""
    name, kwargs = constructor(settings)
    return f"{name}({', '.join(f'{k}={v}' for k, v in kwargs.items())})"


def short_device(device: str) -> str:
    """``/job:ps/replica:0/task:1/device:CPU:0`` -> ``ps/1``; a device of another form as it is."""
    job = device.split("/job:")[-1].split("/")[0] if "/job:" in device else ""
    task = device.split("/task:")[-1].split("/")[0] if "/task:" in device else ""
    return f"{job}/{task}" if job and task else device


def human_bytes(n: int) -> str:
    """``512 B``, ``256.0 KiB``, ``61.0 MiB``, ``1.5 GiB``."""
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024 or unit == "TiB":
            break
    return f"{size:.1f} {unit}"


def split_line(
    name: str, shape: Sequence[int], dtype: str, itemsize: int, shard_rows: Sequence[int], devices: Sequence[str]
) -> str:
    """How one variable was split, e.g. ``deep_embedding/embeddings [2000000, 16] float32 122.1 MiB ->
    4 shards [500000, 500000, 500000, 500000] rows on ps/0,ps/1,ps/0,ps/1``: its shape, dtype and size,
    then each shard's rows (along the first axis) and parameter server, in order."""
    count = 1
    for d in shape:
        count *= d
    where = ",".join(short_device(d) for d in devices)
    return (
        f"{name} [{', '.join(str(d) for d in shape)}] {dtype} {human_bytes(count * itemsize)} -> "
        f"{len(shard_rows)} shards [{', '.join(str(r) for r in shard_rows)}] rows on {where}"
    )


__all__ = ["CLASSES", "constructor", "describe_partitioner", "human_bytes", "short_device", "split_line"]
