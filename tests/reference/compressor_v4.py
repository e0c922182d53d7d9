"""The V4 compressor: softmax pooling with a learned absolute position bias (`ape`), overlapping for CSA layers
(ratio 4: two half-windows, width 2r, stride r) and plain for HCA layers (one window of r tokens). The CSA indexer
runs a second one of these at index_head_dim (its keys).

Per token t the projections give kv_t = Wkv·u_t and gate logits g_t = Wgate·u_t + ape[t mod r], each `coff·d` wide
(coff = 2 when overlapping). Windows are the aligned groups {r·j, …, r·j+r−1}. Entry j pools, per channel c:
  HCA: softmax over the r tokens of window j of g[c], weighting kv[c];
  CSA: softmax over 2r slots: the first half (channels [0, d)) of window j−1's tokens and the second half
       (channels [d, 2d)) of window j's tokens -- window −1 does not exist (weight 0).
latent_j = RMSNorm(pooled_j), rotated by RoPE at position j·r. An incomplete trailing window publishes nothing;
its rows stay pending, and an overlapping compressor also keeps the last closed window's first half, so a later
call continues exactly where a single long call would have been (transformers: DeepseekV4CSACache).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .compressor import CompressorError
from .numerics import Numerics
from .ops import linear, rms_norm
from .rope import Rope


@dataclass(frozen=True)
class CompressorStateV4:
    """Between calls: the open window's rows from `position` (a multiple of r) -- kv and gate logits with ape added,
    [k, coff·d], k < r -- and, when overlapping, the last closed window's first halves [r, d] (None before any)."""

    position: int
    kv: np.ndarray
    gate: np.ndarray
    prior_kv: np.ndarray | None = None
    prior_gate: np.ndarray | None = None

    @staticmethod
    def empty(width: int) -> CompressorStateV4:
        return CompressorStateV4(0, np.zeros((0, width)), np.zeros((0, width)))


@dataclass(frozen=True)
class CompressorWeights:
    """One compressor's tensors: wkv, wgate [coff·d, D], ape [r, coff·d], norm [d]."""

    wkv: np.ndarray
    wgate: np.ndarray
    ape: np.ndarray
    norm: np.ndarray

    @staticmethod
    def at(weights: dict, prefix: str) -> CompressorWeights:
        """`prefix` is e.g. 'layers.3.attn.compressor.' or 'layers.3.attn.indexer.compressor.'."""
        return CompressorWeights(weights[prefix + "wkv.weight"], weights[prefix + "wgate.weight"],
                                 weights[prefix + "ape"], weights[prefix + "norm.weight"])


def compress_v4(u: np.ndarray, positions: np.ndarray, state: CompressorStateV4, w: CompressorWeights, ratio: int,
                overlapping: bool, eps: float, rope: Rope,
                numerics: Numerics) -> tuple[np.ndarray, int, CompressorStateV4]:
    """Runs one compressor over the call's rows u [n, D] at consecutive `positions`.

    Returns (latents [m, d]: normalized and RoPE'd at j·r, not quantized; the index j of the first; new state)."""
    kv = numerics.fp32(linear(u, w.wkv))
    gate = numerics.fp32(linear(u, w.wgate) + w.ape[np.asarray(positions) % ratio])
    if int(positions[0]) != state.position + state.kv.shape[0]:
        raise CompressorError(f"compressor state ends at {state.position + state.kv.shape[0]}, the call starts at "
                              f"position {int(positions[0])}")
    kv, gate = np.concatenate([state.kv, kv]), np.concatenate([state.gate, gate])
    windows = kv.shape[0] // ratio
    body_kv = kv[: windows * ratio].reshape(windows, ratio, kv.shape[1])
    body_gate = gate[: windows * ratio].reshape(windows, ratio, gate.shape[1])
    prior = (state.prior_kv, state.prior_gate)
    if overlapping:
        slots_kv, slots_gate, prior = _overlap(body_kv, body_gate, prior)
    else:
        slots_kv, slots_gate = body_kv, body_gate
    pooled = numerics.fp32(np.sum(_softmax(slots_gate) * slots_kv, axis=1))
    latents = numerics.bf16(rms_norm(numerics.bf16(pooled), w.norm, eps))
    first = state.position // ratio
    latents = numerics.bf16(rope.apply(latents, (first + np.arange(windows)) * ratio))
    rest = windows * ratio
    new_state = CompressorStateV4(state.position + rest, kv[rest:], gate[rest:], prior[0], prior[1])
    return latents, first, new_state


def _overlap(body_kv, body_gate, prior):
    """[w, r, 2d] windows -> [w, 2r, d] slots: window j−1's first halves, then window j's second halves; the
    slots before window 0 come from `prior` (the previous call's last window) or are absent (gate −∞)."""
    windows, ratio, width = body_kv.shape
    d = width // 2
    slots_kv = np.zeros((windows, 2 * ratio, d))
    slots_gate = np.full((windows, 2 * ratio, d), -np.inf)
    slots_kv[:, ratio:] = body_kv[:, :, d:]
    slots_gate[:, ratio:] = body_gate[:, :, d:]
    slots_kv[1:, :ratio] = body_kv[:-1, :, :d]
    slots_gate[1:, :ratio] = body_gate[:-1, :, :d]
    if windows and prior[0] is not None:
        slots_kv[0, :ratio], slots_gate[0, :ratio] = prior
    if windows:
        prior = (body_kv[-1, :, :d].copy(), body_gate[-1, :, :d].copy())
    return slots_kv, slots_gate, prior


def _softmax(logits: np.ndarray) -> np.ndarray:
    """Softmax over the slot axis (1), per channel; −∞ slots get weight 0."""
    shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
    return shifted / shifted.sum(axis=1, keepdims=True)
