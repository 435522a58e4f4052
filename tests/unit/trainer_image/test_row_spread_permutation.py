"""tfps_trainer.row_spread: the stored position of each row of a spread embedding table (pure)."""

from __future__ import annotations

import math
import random

import pytest

from tfps_trainer import row_spread


def _shard_of(vocab: int, shards: int) -> list[int]:
    """Which shard holds each position under TensorFlow's contiguous split (the first ``vocab % shards``
    shards one row longer)."""
    base, extra = divmod(vocab, shards)
    return [k for k in range(shards) for _ in range(base + (k < extra))]


@pytest.mark.parametrize(
    "vocab",
    [1, 2, 3, 4, 5, 7, 8, 10, 12, 60, 64, 97, 100, 210, 256, 997, 1000, 1024, 2310, 4096, 7919, 30030, 65536, 65537],
)
def test_positions_are_a_permutation(vocab: int) -> None:
    a = row_spread.multiplier(vocab)
    assert 1 <= a <= max(1, vocab - 1) and math.gcd(a, vocab) == 1
    assert sorted(row_spread.position(r, vocab) for r in range(vocab)) == list(range(vocab))


def test_random_sizes_are_permutations_and_the_multiplier_is_near_0_618() -> None:
    rng = random.Random(3)
    for vocab in [rng.randrange(2, 50_000) for _ in range(40)]:
        a = row_spread.multiplier(vocab)
        assert sorted(r * a % vocab for r in range(vocab)) == list(range(vocab)), vocab
        assert abs(a / vocab - 0.618) < 0.01 or vocab < 100, (vocab, a)


def test_the_largest_vocabulary_fits_int64_and_bad_sizes_are_refused() -> None:
    big = row_spread.MAX_VOCAB
    assert (big - 1) * row_spread.multiplier(big) < 2**63
    for bad in (0, -5, big + 1):
        with pytest.raises(ValueError, match="input_dim"):
            row_spread.multiplier(bad)


@pytest.mark.parametrize("shards", [2, 3, 4, 5, 8])
@pytest.mark.parametrize("head", [10, 100, 1000, 20_000])
def test_a_hot_head_of_consecutive_ids_lands_about_evenly_on_any_number_of_shards(head: int, shards: int) -> None:
    vocab = 200_000
    owner = _shard_of(vocab, shards)
    counts = [0] * shards
    for r in range(head):
        counts[owner[row_spread.position(r, vocab)]] += 1
    # Contiguous placement puts all of them on shard 0; spread, every shard holds its share within a few
    # rows (a golden-ratio sequence is within O(log head) of even; 3 rows at most here).
    assert max(abs(c - head / shards) for c in counts) <= 4, counts
