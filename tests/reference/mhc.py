"""Single-pass manifold hyper-connections: the mixer with Sinkhorn, collapse and expand (MODEL.md §3, §4).

Streams X ∈ R^{n×hc×D}. Each site (attention, FFN) computes (pre, post, comb) from its own input streams; its `pre`
is applied at the NEXT site (one-sublayer lag, §3) -- the caller carries it.
"""

from __future__ import annotations

import numpy as np

from .config import Config
from .numerics import Numerics
from .ops import sigmoid


def sinkhorn(logits: np.ndarray, iterations: int, eps: float) -> np.ndarray:
    """§4 Sinkhorn on [..., i, j] (row = input stream i, column = output stream j).

    softmax over j (each row) + eps, divide by (column sums + eps); then iterations−1 more rounds of
    {row-normalize by (row sum + eps); column-normalize by (column sum + eps)}."""
    shifted = np.exp(logits - logits.max(axis=-1, keepdims=True))
    m = shifted / shifted.sum(axis=-1, keepdims=True) + eps
    m = m / (m.sum(axis=-2, keepdims=True) + eps)
    for _ in range(iterations - 1):
        m = m / (m.sum(axis=-1, keepdims=True) + eps)
        m = m / (m.sum(axis=-2, keepdims=True) + eps)
    return m


def hc_mixer(streams: np.ndarray, fn: np.ndarray, base: np.ndarray, scale: np.ndarray, config: Config,
             numerics: Numerics) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """§4: (pre [n,hc], post [n,hc], comb [n,hc,hc]) of one site, in fp32.

    f = flatten(X); m = (fn·f)·(mean(f²)+eps)^-½; z = base + m ⊙ [scale0×hc, scale1×hc, scale2×hc²];
    pre = sigmoid(z[:hc]) + hc_eps; post = 2·sigmoid(z[hc:2hc]); comb = Sinkhorn(reshape(z[2hc:], hc×hc))."""
    hc = config.hc_mult
    flat = streams.reshape(streams.shape[0], -1)
    mixes = (flat @ fn.T) / np.sqrt(np.mean(np.square(flat), axis=-1, keepdims=True) + config.rms_norm_eps)
    scales = np.concatenate([np.full(hc, scale[0]), np.full(hc, scale[1]), np.full(hc * hc, scale[2])])
    z = numerics.fp32(base + mixes * scales)
    pre = numerics.fp32(sigmoid(z[:, :hc]) + config.hc_eps)
    post = numerics.fp32(2.0 * sigmoid(z[:, hc : 2 * hc]))
    comb = sinkhorn(z[:, 2 * hc :].reshape(-1, hc, hc), config.hc_sinkhorn_iters, config.hc_eps)
    return pre, post, numerics.fp32(comb)


def collapse(streams: np.ndarray, pre: np.ndarray, numerics: Numerics) -> np.ndarray:
    """Σ_i pre_i·X_i [n, D] (fp32, then the BF16 sublayer input)."""
    return numerics.bf16(np.einsum("ni,nid->nd", pre, streams))


def expand(y: np.ndarray, streams: np.ndarray, post: np.ndarray, comb: np.ndarray, numerics: Numerics) -> np.ndarray:
    """§4 Expand: X'_j = post_j·y + Σ_i comb[i][j]·X_i (fp32, cast to BF16). Sums over the INPUT axis i."""
    return numerics.bf16(post[:, :, None] * y[:, None, :] + np.einsum("nij,nid->njd", comb, streams))
