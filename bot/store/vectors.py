"""Embeddings beside the memories, without a vector extension: each vector normalised and packed as float32s
(the `embedding` column), compared by cosine over the keyword search's candidates, and the rankings merged by
reciprocal rank fusion."""

from __future__ import annotations

import math
import sys
from array import array
from collections.abc import Hashable, Sequence
from operator import mul
from typing import TypeVar

K = TypeVar("K", bound=Hashable)
RRF_K = 60  # the usual constant of reciprocal rank fusion: a rank's weight is 1 / (60 + rank)


def pack(vector: Sequence[float]) -> bytes:
    """The vector scaled to length 1, as little-endian float32s (cosine is then a dot product)."""
    norm = math.sqrt(sum(x * x for x in vector)) or 1.0
    packed = array("f", (x / norm for x in vector))
    if sys.byteorder == "big":
        packed.byteswap()
    return packed.tobytes()


def unpack(data: bytes) -> array[float]:
    values = array("f")
    values.frombytes(data[: len(data) - len(data) % 4])
    if sys.byteorder == "big":
        values.byteswap()
    return values


def similarity(query: bytes, vector: bytes) -> float:
    """Cosine of two packed vectors (0 when their lengths differ: another model made one)."""
    if len(query) != len(vector):
        return 0.0
    return sum(map(mul, unpack(query), unpack(vector)))


def fuse(*rankings: Sequence[K]) -> dict[K, float]:
    """Reciprocal rank fusion: each key's sum of 1 / (RRF_K + rank) over the rankings it is in (rank from 1)."""
    scores: dict[K, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, 1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (RRF_K + rank)
    return scores
