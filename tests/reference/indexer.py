"""Indexer of an index-source layer: index queries and weights, scores over the owner's index keys, visibility,
the candidate pool of the candidate-source layer, and the pool restriction of Reindex layers (MODEL.md §5.4, §5.5).
"""

from __future__ import annotations

import numpy as np

from .config import Config
from .numerics import Numerics
from .ops import linear, relu
from .rope import Rope
from .topk import top_k


def visible_entries(positions: np.ndarray, ratio: int) -> np.ndarray:
    """§5.4: entry j of a ratio-r cache is visible to query s iff j < floor((s+1)/r) (its last token ≤ s)."""
    return (np.asarray(positions) + 1) // ratio


def index_queries(cq: np.ndarray, positions: np.ndarray, weights: dict, prefix: str, config: Config, rope: Rope,
                  numerics: Numerics) -> np.ndarray:
    """q^I = MXFP4(RoPE_s(indexer.wq_b·cq)) → [n, index_n_heads, index_head_dim] (cq shared with §5.1)."""
    q = numerics.bf16(linear(cq, weights[prefix + "attn.indexer.wq_b.weight"]))
    q = q.reshape(cq.shape[0], config.index_n_heads, config.index_head_dim)
    return numerics.index_vector(numerics.bf16(rope.apply(q, positions)))


def index_weights(u: np.ndarray, weights: dict, prefix: str, config: Config, numerics: Numerics) -> np.ndarray:
    """w = (indexer.weights_proj·u) × index_head_dim^-½ × index_n_heads^-½ → [n, index_n_heads]."""
    w = numerics.bf16(linear(u, weights[prefix + "attn.indexer.weights_proj.weight"]))
    return numerics.bf16(w * (config.index_head_dim ** -0.5 * config.index_n_heads ** -0.5))


def index_scores(queries: np.ndarray, head_weights: np.ndarray, keys: np.ndarray, n_visible: np.ndarray,
                 numerics: Numerics) -> np.ndarray:
    """score(s, j) = Σ_h w_h·ReLU(q^I_h·K^I_j) over visible j, −∞ elsewhere → [n, m]. In faithful mode each stage
    (dot product, ReLU·w, head sum) ends in BF16, as the reference computes it."""
    dots = numerics.bf16(np.einsum("nhd,md->nhm", queries, keys))
    weighted = numerics.bf16(relu(dots) * head_weights[:, :, None])
    scores = numerics.bf16(weighted.sum(axis=1))
    invisible = np.arange(keys.shape[0])[None, :] >= np.asarray(n_visible)[:, None]
    return np.where(invisible, -np.inf, scores)


def candidate_pool(scores: np.ndarray, n_visible: np.ndarray, block_size: int, topk_blocks: int) -> np.ndarray:
    """§5.5 candidate pool [n, m] (bool) of the candidate-source layer, from its own scores before its top-k.

    Blocks b = entries [b·B, b·B+B); block score = max over its entries; the block holding the newest visible entry
    ((n_vis−1)//B) is forced to +∞; the top `topk_blocks` blocks (lowest index first among equals) whose value is
    > −∞ are kept; the pool is the union of their visible entries."""
    n, m = scores.shape
    n_blocks = -(-m // block_size)
    padded = np.full((n, n_blocks * block_size), -np.inf)
    padded[:, :m] = scores
    block_scores = padded.reshape(n, n_blocks, block_size).max(axis=2)
    n_visible = np.asarray(n_visible)
    newest = (n_visible - 1) // block_size
    has_visible = n_visible > 0
    block_scores[np.flatnonzero(has_visible), newest[has_visible]] = np.inf
    kept_blocks = top_k(block_scores, topk_blocks)
    keep = np.zeros((n, n_blocks + 1), dtype=bool)  # column n_blocks absorbs the −1 padding
    np.put_along_axis(keep, np.where(kept_blocks >= 0, kept_blocks, n_blocks), True, axis=1)
    pool = np.repeat(keep[:, :n_blocks], block_size, axis=1)[:, :m]
    return pool & (np.arange(m)[None, :] < n_visible[:, None])


def restrict_to_pool(scores: np.ndarray, pool: np.ndarray) -> np.ndarray:
    """Reindex layers (§5.5): entries outside the query's pool score −∞."""
    return np.where(pool, scores, -np.inf)
