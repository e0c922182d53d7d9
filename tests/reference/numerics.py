"""The two numerics modes of the reference (MODEL.md §2.1, §2.2; DESIGN.md "Numerics modes").

All arithmetic is carried in float64 arrays. The mode decides what happens at the cast points the spec names:

- `clean`: nothing -- float64 math, quantizers off. The oracle for the engine's clean mode.
- `faithful`: the storage formats and cast points of the official reference. `bf16(x)` rounds to BF16 where §2.1
  says activations are BF16 between ops, `fp32(x)` rounds to float32 where a value is kept in fp32 (router, mHC,
  compressor state, gate, softmax), and the three KV quantizers of §2.2 fake-quantize window rows (FP8), compressed
  entries (NVFP4) and index keys/queries (MXFP4). Computing in float64 and rounding at these points makes the
  result independent of how rows are batched (a GEMM over 96 rows and over 1 row give the same bits), which is what
  lets prefill + decode equal the full forward in this mode too. Every cast point is listed in docs/model-notes.md.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np


MODES = ("clean", "faithful")


class Numerics:
    """Cast points and KV quantizers of one mode. Stateless; shareable."""

    def __init__(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"numerics mode {mode!r} is not one of {MODES}")
        self.mode = mode
        self.faithful = mode == "faithful"

    def bf16(self, x: np.ndarray) -> np.ndarray:
        """A BF16 activation boundary (§2.1): round-to-nearest-even to bfloat16 in faithful mode."""
        if not self.faithful:
            return x
        return np.asarray(x).astype(ml_dtypes.bfloat16).astype(np.float64)

    def fp32(self, x: np.ndarray) -> np.ndarray:
        """A value the reference keeps in float32 (router, mHC coefficients, softmax, compressor state)."""
        if not self.faithful:
            return x
        return np.asarray(x).astype(np.float32).astype(np.float64)

    def window_row(self, x: np.ndarray) -> np.ndarray:
        """SWA window KV row, after RoPE: FP8 E4M3 with a UE8M0 scale per 32 channels (§2.2.1)."""
        return self._quantized("fp8_window_fakequant", x)

    def compressed_entry(self, x: np.ndarray) -> np.ndarray:
        """Compressed (global) KV entry, after RoPE: NVFP4, E4M3 scale per 16 channels (§2.2.2)."""
        return self._quantized("nvfp4_fakequant", x)

    def index_vector(self, x: np.ndarray) -> np.ndarray:
        """Index key or index query, after RoPE: MXFP4, E8M0 scale per 32 channels (§2.2.3)."""
        return self._quantized("mxfp4_fakequant", x)

    def _quantized(self, quantizer: str, x: np.ndarray) -> np.ndarray:
        if not self.faithful:
            return x
        # Imported on first use, so clean mode needs nothing but numpy. The quantizers take float32 input: the
        # rounded BF16/fp32 value the kernel would see.
        from . import formats  # noqa: PLC0415

        return np.asarray(getattr(formats, quantizer)(np.asarray(x, dtype=np.float32)), dtype=np.float64)
