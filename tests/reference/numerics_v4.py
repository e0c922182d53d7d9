"""Numerics of the V4 mode (deepseek_v4): the cast points of numerics.py plus V4's KV storage (MODEL.md §2.2 last
paragraph) in faithful mode.

- Window rows and compressed entries: FP8 E4M3 for the non-RoPE channels with a UE8M0 scale per 64 channels, the
  RoPE channels kept in BF16 (584 B per 512-channel row) -- `formats.v4_kv_fakequant`.
- Index keys (the indexer's own compressor) and index queries: a Hadamard rotation (Sylvester order, scaled by
  d^-½, rounded to BF16) then MXFP4 (E2M1, E8M0 scale per 32 channels), as the official code's
  `rotate_activation` + `fp4_act_quant`. The rotation is orthogonal, so clean mode (which quantizes nothing)
  leaves it out: q·k is unchanged.
"""

from __future__ import annotations

import numpy as np

from .numerics import Numerics


def hadamard(dim: int) -> np.ndarray:
    """Sylvester Hadamard matrix [dim, dim] (dim a power of two), unscaled."""
    if dim <= 0 or dim & (dim - 1):
        raise ValueError(f"Hadamard rotation needs a power-of-two width, got {dim}")
    h = np.ones((1, 1))
    while h.shape[0] < dim:
        h = np.block([[h, h], [h, -h]])
    return h


class NumericsV4(Numerics):
    """Numerics plus the V4 KV quantizers; `rope_dim` is the config's qk_rope_head_dim."""

    def __init__(self, mode: str, rope_dim: int) -> None:
        super().__init__(mode)
        self.rope_dim = rope_dim

    def kv_row(self, x: np.ndarray) -> np.ndarray:
        """A window row or compressed entry after RoPE: FP8 non-RoPE part + BF16 RoPE part (faithful)."""
        if not self.faithful or x.size == 0:  # a call may close no window: nothing to quantize
            return x
        from . import formats  # noqa: PLC0415 -- clean mode needs nothing but numpy

        return np.asarray(formats.v4_kv_fakequant(np.asarray(x, dtype=np.float32), self.rope_dim), dtype=np.float64)

    def index_vector(self, x: np.ndarray) -> np.ndarray:
        """An index key or query after RoPE: Hadamard-rotated, BF16, then MXFP4 (faithful); unchanged in clean."""
        if not self.faithful or x.size == 0:
            return x
        width = x.shape[-1]
        rotated = self.bf16(x @ hadamard(width).T * width**-0.5)
        return super().index_vector(rotated)
