"""Per-shard initial values (tfps_trainer.initializers), the calls ParameterServerStrategy makes per shard."""

from __future__ import annotations

import math

import pytest

pytestmark = [pytest.mark.tf, pytest.mark.timeout(120)]
np = pytest.importorskip("numpy")
keras = pytest.importorskip("keras")

from tfps_trainer.initializers import for_shard, initial_value  # noqa: E402

FULL = (20_000, 16)


def _shards(init: object, rows: list[int]) -> list[np.ndarray]:
    value, out, at = initial_value(init, FULL, "float32"), [], 0
    for n in rows:
        out.append(np.asarray(value(partition_shape=(n, 16), partition_offset=(at, 0))))
        at += n
    return out


def test_each_shard_is_drawn_at_its_own_shape_and_with_its_own_seed() -> None:
    a, b = _shards(keras.initializers.RandomUniform(-0.05, 0.05, seed=3), [10_000, 10_000])
    assert a.shape == b.shape == (10_000, 16) and not np.array_equal(a, b)
    assert a.min() >= -0.05 and a.max() <= 0.05 and abs(a.mean()) < 0.002
    again = _shards(keras.initializers.RandomUniform(-0.05, 0.05, seed=3), [10_000, 10_000])
    assert np.array_equal(a, again[0])  # a seeded initializer stays reproducible


def test_constants_are_the_same_for_every_shard_and_whole_without_partition() -> None:
    a, b = _shards(keras.initializers.Constant(0.1), [7, 3])
    assert a.shape == (7, 16) and b.shape == (3, 16) and (a == np.float32(0.1)).all() and (b == a[0, 0]).all()
    assert np.asarray(initial_value(keras.initializers.Zeros(), FULL, "float32")()).shape == FULL


def test_variance_scaling_keeps_the_whole_variables_scale() -> None:
    """Glorot uniform on [20000, 16]: limit sqrt(6 / (20000 + 16)) from the full shape, not the shard's."""
    (a,) = _shards(keras.initializers.GlorotUniform(seed=1), [5_000])
    limit = math.sqrt(6 / (FULL[0] + FULL[1]))
    assert a.shape == (5_000, 16) and np.abs(a).max() <= limit and np.abs(a).max() > 0.9 * limit
    (n,) = _shards(keras.initializers.HeNormal(seed=1), [5_000])
    assert abs(float(n.std()) - math.sqrt(2 / FULL[0])) < 0.1 * math.sqrt(2 / FULL[0])


def test_initializers_that_need_the_whole_variable_return_it() -> None:
    assert for_shard(keras.initializers.Orthogonal(seed=1), FULL, (0, 0)) is None
    value = initial_value(keras.initializers.Orthogonal(seed=1), (8, 8), "float32")
    assert np.asarray(value(partition_shape=(4, 8), partition_offset=(4, 0))).shape == (8, 8)  # TF slices it
