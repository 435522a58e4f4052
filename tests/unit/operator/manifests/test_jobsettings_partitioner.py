"""spec.training.variablePartitioner into the trainer's settings: the field set picks the partitioner, and the
forms stored before there was a choice still mean a min-size partitioner with the same arguments."""

from __future__ import annotations

import pytest

from support.operator_helpers import make_job
from tfps_operator.manifests.jobsettings import job_settings
from tfps_wire.job_settings import JobSettings, PartitionerSettings


def settings_for(partitioner: dict | None) -> PartitionerSettings | None:
    training = {"steps": 100} if partitioner is None else {"steps": 100, "variablePartitioner": partitioner}
    return job_settings(make_job(training=training)).partitioner


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"fixedShards": 3}, PartitionerSettings(kind="fixed_shards", num_shards=3)),
        ({"maxShardBytes": 65536}, PartitionerSettings(kind="max_size", max_shard_bytes=65536)),
        (
            {"maxShardBytes": 65536, "maxShards": 4},
            PartitionerSettings(kind="max_size", max_shard_bytes=65536, max_shards=4),
        ),
        (
            {"minShardBytes": 1024, "maxShards": 3},
            PartitionerSettings(kind="min_size", min_shard_bytes=1024, max_shards=3),
        ),
        # the forms of jobs stored before fixedShards and maxShardBytes: min-size, its defaults filled in
        ({"maxShards": 2}, PartitionerSettings(kind="min_size", min_shard_bytes=262144, max_shards=2)),
        ({}, PartitionerSettings(kind="min_size", min_shard_bytes=262144, max_shards=1)),
        (
            {"minShardBytes": 262144, "maxShards": 1},
            PartitionerSettings(kind="min_size", min_shard_bytes=262144, max_shards=1),
        ),
    ],
    ids=["fixed", "max-size", "max-size-bounded", "min-size", "max-shards-only", "empty", "stored-defaults"],
)
def test_the_field_set_picks_the_partitioner(spec: dict, expected: PartitionerSettings) -> None:
    assert settings_for(spec) == expected


def test_no_partitioner_unless_asked() -> None:
    assert settings_for(None) is None


def test_the_settings_travel_to_the_trainer_as_json() -> None:
    settings = job_settings(make_job(training={"steps": 100, "variablePartitioner": {"fixedShards": 3}}))
    assert JobSettings.model_validate_json(settings.to_env()).partitioner == PartitionerSettings(
        kind="fixed_shards", num_shards=3
    )
