"""The V4 parts of attention that differ from V4.1: the query path with its per-head unweighted RMSNorm, the window
row with V4's KV storage, the CSA lightning indexer (queries, weights, scores over its own compressor's keys) and
the HCA selection (every visible entry). The attention core with sink and the grouped output projection are
shared with V4.1 (attention.py).
"""

from __future__ import annotations

import numpy as np

from .ops import linear, relu, rms_norm
from .rope import Rope


def unweighted_rms_norm(x: np.ndarray, eps: float) -> np.ndarray:
    """x·(mean(x²)+eps)^-½ over the last axis (no weight)."""
    return x / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + eps)


def query_path_v4(u, positions, weights: dict, prefix: str, config, rope: Rope, numerics):
    """cq = RMSNorm_q(wq_a·u); q = RoPE_s(RMSNorm_head(wq_b·cq)) [n, H, head_dim] -- V4 normalizes every head
    without a weight before RoPE (V4.1 dropped this, MODEL.md §5.1)."""
    cq = numerics.bf16(linear(u, weights[prefix + "attn.wq_a.weight"]))
    cq = numerics.bf16(rms_norm(cq, weights[prefix + "attn.q_norm.weight"], config.rms_norm_eps))
    q = numerics.bf16(linear(cq, weights[prefix + "attn.wq_b.weight"]))
    q = q.reshape(u.shape[0], config.num_attention_heads, config.head_dim)
    q = numerics.bf16(unweighted_rms_norm(q, config.rms_norm_eps))
    return cq, numerics.bf16(rope.apply(q, positions))


def window_row_v4(u, positions, weights: dict, prefix: str, config, rope: Rope, numerics):
    """kv_s = KV_v4(RoPE_s(RMSNorm_kv(wkv·u))) [n, head_dim]; K = V."""
    kv = numerics.bf16(linear(u, weights[prefix + "attn.wkv.weight"]))
    kv = numerics.bf16(rms_norm(kv, weights[prefix + "attn.kv_norm.weight"], config.rms_norm_eps))
    return numerics.kv_row(numerics.bf16(rope.apply(kv, positions)))


def index_queries_v4(cq, positions, weights: dict, prefix: str, config, rope: Rope, numerics):
    """q^I = Q_index(RoPE_s(indexer.wq_b·cq)) [n, index_n_heads, index_head_dim]; no normalization."""
    q = numerics.bf16(linear(cq, weights[prefix + "attn.indexer.wq_b.weight"]))
    q = q.reshape(cq.shape[0], config.index_n_heads, config.index_head_dim)
    return numerics.index_vector(numerics.bf16(rope.apply(q, positions)))


def index_weights_v4(u, weights: dict, prefix: str, config, numerics):
    """w = (indexer.weights_proj·u) · index_head_dim^-½ · index_n_heads^-½ [n, index_n_heads] (fp32)."""
    w = numerics.bf16(linear(u, weights[prefix + "attn.indexer.weights_proj.weight"]))
    return numerics.fp32(w * (config.index_head_dim**-0.5 * config.index_n_heads**-0.5))


def index_scores_v4(queries, head_weights, keys, n_visible, numerics):
    """score(s, j) = Σ_h w_h·ReLU(q_h·K_j) over visible j (j < n_visible[s]), −∞ elsewhere [n, m]; fp32 (the
    official V4 indexer scores in fp32, V4.1's in BF16)."""
    dots = np.einsum("nhd,md->nhm", queries, keys)
    scores = numerics.fp32(np.sum(relu(dots) * head_weights[:, :, None], axis=1))
    invisible = np.arange(keys.shape[0])[None, :] >= np.asarray(n_visible)[:, None]
    return np.where(invisible, -np.inf, scores)


def all_visible(n_visible: np.ndarray, entries: int) -> np.ndarray:
    """HCA selection [n, entries]: every entry j < n_visible[s], −1 for the rest."""
    j = np.arange(entries)[None, :]
    return np.where(j < np.asarray(n_visible)[:, None], j, -1)
