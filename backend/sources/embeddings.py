"""Embeddings: passages and queries as vectors, for hybrid ranking.

`Embedder` is the seam; `backend/llm/openai_compat/embedder.py` is the one
implementation (imported only when `LOOPWIRE_EMBEDDINGS_MODEL` is set, so
a server without embeddings never loads the `openai` SDK for them).

Vectors are kept normalised, as float32 blobs (`pack` / `unpack`), so a
cosine is a dot product (`dot`).
"""

from __future__ import annotations

import math
import operator
from array import array
from collections.abc import Sequence
from typing import Protocol


class Embedder(Protocol):
    @property
    def model(self) -> str: ...

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order; an `LLMError` when that fails."""
        ...

    async def aclose(self) -> None: ...


def pack(vector: Sequence[float]) -> bytes:
    """`vector`, normalised, as float32 bytes."""
    return normalised(vector).tobytes()


def unpack(blob: bytes) -> array[float]:
    values: array[float] = array("f")
    values.frombytes(blob)
    return values


def normalised(vector: Sequence[float]) -> array[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return array("f", (x / norm for x in vector) if norm else vector)


def dot(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two normalised vectors (0 when their sizes differ)."""
    if len(a) != len(b):
        return 0.0
    return float(sum(map(operator.mul, a, b)))
