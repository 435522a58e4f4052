"""The partitioner in the trainer's job settings: one kind with only its own fields, and the JSON the
settings carried before there were kinds still read as the min-size partitioner they meant."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tfps_wire.job_settings import PartitionerSettings


def test_settings_without_a_kind_are_a_min_size_partitioner() -> None:
    old = PartitionerSettings.model_validate_json('{"min_shard_bytes": 262144, "max_shards": 2}')
    assert old.kind == "min_size"
    assert old.arguments() == {"min_shard_bytes": 262144, "max_shards": 2}
    assert PartitionerSettings(max_shards=3).arguments() == {"min_shard_bytes": 262144, "max_shards": 3}
    assert PartitionerSettings().arguments() == {"min_shard_bytes": 262144, "max_shards": 1}


def test_each_kind_gives_its_own_arguments() -> None:
    assert PartitionerSettings(kind="fixed_shards", num_shards=3).arguments() == {"num_shards": 3}
    assert PartitionerSettings(kind="max_size", max_shard_bytes=4096).arguments() == {
        "max_shard_bytes": 4096,
        "max_shards": None,
    }
    assert PartitionerSettings(kind="max_size", max_shard_bytes=4096, max_shards=2).arguments() == {
        "max_shard_bytes": 4096,
        "max_shards": 2,
    }


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"kind": "fixed_shards"}, "needs num_shards"),
        ({"kind": "max_size", "max_shards": 2}, "needs max_shard_bytes"),
        ({"kind": "fixed_shards", "num_shards": 3, "max_shards": 2}, "max_shards do not apply"),
        ({"kind": "min_size", "num_shards": 3}, "num_shards do not apply"),
        ({"kind": "max_size", "max_shard_bytes": 9, "min_shard_bytes": 9}, "min_shard_bytes do not apply"),
        ({"kind": "fixed_shards", "num_shards": 0}, "greater than or equal to 1"),
        ({"kind": "round_robin"}, "kind"),
    ],
)
def test_fields_of_another_kind_are_refused(fields: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        PartitionerSettings(**fields)
