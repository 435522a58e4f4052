"""Where a spread embedding table stores each row (pure: no TensorFlow).

Row ``r`` of a ``V``-row table is stored at position ``p(r) = (r * a) mod V``. With ``a`` coprime to
``V`` this is a bijection of ``0 .. V-1`` (``a`` has an inverse modulo ``V``). ``a`` is the integer
nearest ``V / φ`` (0.618 V), stepped up until it is coprime to ``V``: the fractional parts of
``r * a / V`` for consecutive ``r`` then follow a golden-ratio sequence, the most even one for every
run length (the three-distance theorem), so any range of consecutive rows, such as the hot head of a
frequency-sorted vocabulary, lands about evenly in any number of equal contiguous slices of the
positions: the shards of a partitioned variable, whatever their count.

The position is computed in int64 by ``tfps_trainer.layers.ShardedEmbedding``; ``(V-1)²`` must fit in
int64, so ``V`` is at most :data:`MAX_VOCAB`.
"""

from __future__ import annotations

import math

_INVERSE_GOLDEN_RATIO = (math.sqrt(5.0) - 1.0) / 2.0
MAX_VOCAB = math.isqrt(2**63 - 1) + 1  # the largest V whose (V-1)² fits in int64


def multiplier(vocab_size: int) -> int:
    """The ``a`` of ``p(r) = (r * a) mod vocab_size``: near ``0.618 * vocab_size``, coprime to it."""
    if not 1 <= vocab_size <= MAX_VOCAB:
        raise ValueError(f"spread_rows: input_dim must be between 1 and {MAX_VOCAB} (got {vocab_size})")
    a = max(1, round(vocab_size * _INVERSE_GOLDEN_RATIO))
    while math.gcd(a, vocab_size) != 1:
        a += 1
    return a


def position(row: int, vocab_size: int) -> int:
    """Where row ``row`` (``0 <= row < vocab_size``) is stored."""
    return row * multiplier(vocab_size) % vocab_size


__all__ = ["MAX_VOCAB", "multiplier", "position"]
