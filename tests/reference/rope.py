"""Rotary position embedding with frequency-only YaRN (MODEL.md §2.3, §5.8).

Adjacent-pair ("interleaved") rotation of the LAST `qk_rope_head_dim` channels: pair i = channels
(d−r+2i, d−r+2i+1) is a complex number rotated by angle s·f_i. SWA-only layers use `rope_theta` without YaRN; every
ratio≠0 layer uses `compress_rope_theta` with YaRN (query, window KV, index query, compressed entries, index keys).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .config import Config, RopeScaling
from .numerics import Numerics


def yarn_low_high(rope_dim: int, theta: float, scaling: RopeScaling) -> tuple[int, int]:
    """The YaRN ramp bounds of §2.3: low = max(floor(d·ln(L0/(β_f·2π))/(2 ln θ)), 0),
    high = min(ceil(d·ln(L0/(β_s·2π))/(2 ln θ)), d−1). Official: (15, 25); §12 tiny: (0, 2)."""
    length = scaling.original_max_position_embeddings

    def bound(beta: float) -> float:
        return rope_dim * math.log(length / (beta * 2 * math.pi)) / (2 * math.log(theta))

    low = max(math.floor(bound(scaling.beta_fast)), 0)
    high = min(math.ceil(bound(scaling.beta_slow)), rope_dim - 1)
    return low, high


def rope_frequencies(rope_dim: int, theta: float, scaling: RopeScaling | None, numerics: Numerics) -> np.ndarray:
    """f_i = θ^(−2i/d), i = 0..d/2−1, blended towards f_i/factor over the YaRN ramp when `scaling` is given."""
    dtype = np.float32 if numerics.faithful else np.float64  # the reference builds them in fp32
    exponents = np.arange(0, rope_dim, 2, dtype=dtype) / dtype(rope_dim)
    # θ^e correctly rounded to the table's dtype: numpy's float32 `**` is a SIMD approximation whose last bit
    # depends on the machine (AVX-512 / AVX2 / baseline), which would make the oracle machine-dependent.
    freqs = dtype(1.0) / (np.float64(theta) ** exponents.astype(np.float64)).astype(dtype)
    if scaling is not None:
        low, high = yarn_low_high(rope_dim, theta, scaling)
        ramp = np.clip((np.arange(rope_dim // 2, dtype=dtype) - low) / dtype(max(high - low, 1e-3)), 0, 1)
        freqs = freqs / dtype(scaling.factor) * ramp + freqs * (dtype(1) - ramp)
    return freqs.astype(dtype)


@dataclass(frozen=True)
class Rope:
    """One RoPE flavour (base or compress) of a config; `apply` rotates the last `rope_dim` channels."""

    rope_dim: int
    freqs: np.ndarray
    numerics: Numerics

    def cos_sin(self, positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        positions = np.asarray(positions)
        if self.numerics.faithful:
            angles = positions.astype(np.float32)[:, None] * self.freqs  # fp32 angles, as the reference
            # cos/sin of the fp32 angle correctly rounded to fp32 (computed in float64): numpy's float32 sin/cos
            # are SIMD approximations off by an ulp for ~15% of angles on AVX-512, machine-dependent.
            wide = angles.astype(np.float64)
            return (np.cos(wide).astype(np.float32).astype(np.float64),
                    np.sin(wide).astype(np.float32).astype(np.float64))
        angles = positions.astype(np.float64)[:, None] * self.freqs
        return np.cos(angles), np.sin(angles)

    def apply(self, x: np.ndarray, positions: np.ndarray, inverse: bool = False) -> np.ndarray:
        """Rotates x [n, ..., d] (row t at positions[t]); inverse=True rotates by −angle (§5.8).

        The caller applies the cast; in faithful mode the complex product is rounded to fp32 here."""
        cos, sin = self.cos_sin(positions)
        if inverse:
            sin = -sin
        shape = (x.shape[0],) + (1,) * (x.ndim - 2) + (self.rope_dim // 2,)
        cos, sin = cos.reshape(shape), sin.reshape(shape)
        head = x[..., : x.shape[-1] - self.rope_dim]
        pairs = x[..., x.shape[-1] - self.rope_dim :]
        real, imag = pairs[..., 0::2], pairs[..., 1::2]
        rotated = np.empty_like(pairs)
        rotated[..., 0::2] = real * cos - imag * sin
        rotated[..., 1::2] = real * sin + imag * cos
        return np.concatenate([head, self.numerics.fp32(rotated)], axis=-1)


def make_ropes(config: Config, numerics: Numerics) -> dict[str, Rope]:
    """{'base': rope_theta without YaRN, 'compress': compress_rope_theta with YaRN} (§2.3)."""
    dim = config.qk_rope_head_dim
    return {
        "base": Rope(dim, rope_frequencies(dim, config.rope_theta, None, numerics), numerics),
        "compress": Rope(dim, rope_frequencies(dim, config.compress_rope_theta, config.rope_scaling, numerics),
                         numerics),
    }
