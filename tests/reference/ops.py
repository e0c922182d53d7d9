"""Elementary operations shared by the mechanisms (MODEL.md §2.1)."""

from __future__ import annotations

import numpy as np


def linear(x: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """x · weightᵀ with torch's [out, in] weight layout."""
    return x @ weight.T


def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """RMSNorm(x; w) = w ⊙ x·(mean(x²)+eps)^-½ over the last axis (§2.1; the caller applies the cast)."""
    return weight * (x / np.sqrt(np.mean(np.square(x), axis=-1, keepdims=True) + eps))


def sigmoid(x: np.ndarray) -> np.ndarray:
    # exp of a negative magnitude only, so large |x| never overflows
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def silu(x: np.ndarray) -> np.ndarray:
    return x * sigmoid(x)


def softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x)


def relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0)
