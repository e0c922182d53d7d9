"""Top-k selection with deterministic tie-breaking, and tie-aware comparison of selections (MODEL.md §5.5, §11.3).

The official reference uses torch.topk on BF16 scores, whose order among equal scores is undefined; exact ties at
the k-th score are common at long context. The reference here breaks ties by the lowest index, and comparisons
against any other implementation must accept any choice among the entries tied with the k-th score.
"""

from __future__ import annotations

import numpy as np


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Per row of scores [n, m]: the k largest entries (lowest index first among equals), sorted ascending by
    index; entries whose score is −∞ become −1, placed after the valid ones. Shape [n, k] (k ≥ m pads with −1)."""
    n, m = scores.shape
    out = np.full((n, k), -1, dtype=np.int64)
    take = min(k, m)
    if take == 0:
        return out
    # stable sort of −score keeps equal scores in index order, so the lowest index wins a tie
    order = np.argsort(-scores, axis=1, kind="stable")[:, :take]
    chosen_scores = np.take_along_axis(scores, order, axis=1)
    order = np.where(np.isneginf(chosen_scores), m, order)  # m sorts after every real index
    order = np.sort(order, axis=1)
    out[:, :take] = np.where(order == m, -1, order)
    return out


def selection_sets(selection: np.ndarray) -> list[set[int]]:
    """Row-wise sets of the valid (≥ 0) indices of a selection [n, k]."""
    return [set(int(i) for i in row if i >= 0) for row in selection]


def topk_row_equivalent(scores: np.ndarray, a, b, k: int, tolerance: float = 0.0) -> bool:
    """True when selections a and b of one row are both valid top-k sets of `scores` [m]: same size
    (min(k, #finite)), every entry scoring above the k-th score (+tolerance) in both, nothing below the k-th score
    (−tolerance) and nothing with score −∞ in either. They may differ only among entries tied with the k-th."""
    a = {int(i) for i in np.asarray(a) if i >= 0}
    b = {int(i) for i in np.asarray(b) if i >= 0}
    finite = np.isfinite(scores)
    expected = min(k, int(finite.sum()))
    if len(a) != expected or len(b) != expected:
        return False
    if expected == 0:
        return True
    chosen = a | b
    if any(i >= scores.shape[0] or not finite[i] for i in chosen):
        return False
    kth = np.sort(scores[finite])[::-1][expected - 1]
    must = set(np.flatnonzero(finite & (scores > kth + tolerance)).tolist())
    return must <= a and must <= b and all(scores[i] >= kth - tolerance for i in chosen)


def topk_equivalent(scores: np.ndarray, a: np.ndarray, b: np.ndarray, k: int, tolerance: float = 0.0) -> np.ndarray:
    """Row-wise topk_row_equivalent over scores [n, m] and selections [n, ·]: bool [n]."""
    return np.array([topk_row_equivalent(scores[r], a[r], b[r], k, tolerance) for r in range(scores.shape[0])])
