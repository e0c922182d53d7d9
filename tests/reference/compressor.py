"""Compressor of a KV-source layer: per-token latents (ratio 1) or softmax pooling over groups (ratio r ≥ 2), and
the two records every entry publishes -- the compressed entry and its index key (MODEL.md §5.3).

Groups are {r·j, …, r·j+r−1}, aligned to absolute positions. An incomplete trailing group publishes nothing; its
tokens' fp32 (v, g) stay pending until the group completes (in the next chunk or decode step).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .config import Config
from .numerics import Numerics
from .ops import linear, rms_norm
from .rope import Rope


class CompressorError(ValueError):
    """A chunk that cannot continue the compressor's state (a gap, or a group whose start was never seen)."""


@dataclass(frozen=True)
class Pending:
    """The tokens of the open group: first position and their fp32 (v, g) rows [k, head_dim], k < ratio."""

    position: int
    v: np.ndarray
    g: np.ndarray


@dataclass(frozen=True)
class Published:
    """Entries a chunk adds to its owner's cache: indices first..first+n−1, their rows, and the unrotated latents."""

    first: int
    entries: np.ndarray  # [n, head_dim], RoPE'd at j·r and NVFP4-quantized
    index_keys: np.ndarray  # [n, index_head_dim], RoPE'd at j·r and MXFP4-quantized
    latents: np.ndarray  # [n, head_dim], the normalized latent before RoPE


def compress(u: np.ndarray, positions: np.ndarray, pending: Pending | None, published: int, weights: dict,
             prefix: str, ratio: int, config: Config, rope: Rope,
             numerics: Numerics) -> tuple[Published, Pending | None]:
    """Runs the compressor of one KV source over new rows `u` [n, D] at consecutive `positions`.

    `published` is the owner's entry count so far: groups below it exist already (bounded replay, CED) and are
    not published again. Returns the new entries and the pending state to keep."""
    if ratio == 1:
        latents, first = _per_token_latents(u, positions, published, weights, prefix, config, numerics)
        return _publish(latents, first, ratio, weights, prefix, config, rope, numerics), None
    latents, first, pending = _pooled_latents(u, positions, pending, published, weights, prefix, ratio, config,
                                              numerics)
    return _publish(latents, first, ratio, weights, prefix, config, rope, numerics), pending


def _per_token_latents(u, positions, published, weights, prefix, config, numerics):
    """r = 1: latent_t = RMSNorm_c(Wc·u_t), computed in BF16; one entry per token."""
    keep = positions >= published
    if keep.any() and positions[keep][0] != published:
        raise CompressorError(f"{prefix}compressor: entry {positions[keep][0]} would follow {published} entries")
    projected = numerics.bf16(linear(u[keep], weights[prefix + "attn.compressor.wkv.weight"]))
    latents = numerics.bf16(rms_norm(projected, weights[prefix + "attn.compressor.norm.weight"],
                                     config.rms_norm_eps))
    return latents, published


def _pooled_latents(u, positions, pending, published, weights, prefix, ratio, config, numerics):
    """r ≥ 2 in fp32: v_t = Wc·u_t, g_t = Wg·u_t; pooled_j[c] = Σ_{t∈group} softmax_t(g_t[c])·v_t[c];
    latent_j = RMSNorm_c(bf16(pooled_j))."""
    v = numerics.fp32(linear(u, weights[prefix + "attn.compressor.wkv.weight"]))
    g = numerics.fp32(linear(u, weights[prefix + "attn.compressor.wgate.weight"]))
    start = int(positions[0])
    if pending is not None:
        if pending.position + pending.v.shape[0] != start:
            raise CompressorError(f"{prefix}compressor: pending group at {pending.position} does not continue at "
                                  f"position {start}")
        v, g, start = np.concatenate([pending.v, v]), np.concatenate([pending.g, g]), pending.position
    end = start + v.shape[0]
    lead = (-start) % ratio  # rows of a group whose first token lies before this chunk
    if lead and start // ratio >= published:
        raise CompressorError(f"{prefix}compressor: position {start} is inside group {start // ratio}, whose "
                              f"start was never seen (no pending state)")
    first_group = -(-start // ratio)
    complete = max(0, (end - first_group * ratio) // ratio)
    body_v = v[lead : lead + complete * ratio].reshape(complete, ratio, v.shape[1])
    body_g = g[lead : lead + complete * ratio].reshape(complete, ratio, g.shape[1])
    gate = np.exp(body_g - body_g.max(axis=1, keepdims=True))
    pooled = numerics.fp32(np.sum(gate / gate.sum(axis=1, keepdims=True) * body_v, axis=1))
    groups = first_group + np.arange(complete)
    new = groups >= published
    if new.any() and groups[new][0] != published:
        raise CompressorError(f"{prefix}compressor: entry {groups[new][0]} would follow {published} entries")
    latents = numerics.bf16(rms_norm(numerics.bf16(pooled[new]), weights[prefix + "attn.compressor.norm.weight"],
                                     config.rms_norm_eps))
    tail_start = lead + complete * ratio
    new_pending = None
    if tail_start < v.shape[0]:
        new_pending = Pending(start + tail_start, v[tail_start:], g[tail_start:])
    return latents, max(published, first_group), new_pending


def _publish(latents, first, ratio, weights, prefix, config, rope, numerics) -> Published:
    """C_j = NVFP4(RoPE_{j·r}(latent_j)); K^I_j = MXFP4(RoPE_{j·r}(RMSNorm_k(indexer.wk·latent_j))). The index
    key is projected from the un-rotated, un-quantized latent."""
    if latents.shape[0] == 0:
        empty = np.zeros((0, config.head_dim)), np.zeros((0, config.index_head_dim))
        return Published(first, empty[0], empty[1], np.zeros((0, config.head_dim)))
    positions = (first + np.arange(latents.shape[0])) * ratio
    entries = numerics.compressed_entry(numerics.bf16(rope.apply(latents, positions)))
    key = numerics.bf16(linear(latents, weights[prefix + "attn.indexer.wk.weight"]))
    key = numerics.bf16(rms_norm(key, weights[prefix + "attn.indexer.k_norm.weight"], config.rms_norm_eps))
    index_keys = numerics.index_vector(numerics.bf16(rope.apply(key, positions)))
    return Published(first, entries, index_keys, latents)
