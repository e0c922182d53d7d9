"""V4's per-sublayer mHC (each site's `pre` collapses its own input streams at once, no one-sublayer lag as in
V4.1's single pass) and the `hc_head` collapse before the final norm. The mixer, Sinkhorn, collapse and expand
are mhc.py's (MODEL.md §4)."""

from __future__ import annotations

import numpy as np

from .mhc import collapse, expand, hc_mixer
from .ops import sigmoid


def hc_site(streams, fn, base, scale, sublayer, config, numerics):
    """One per-sublayer mHC site: (pre, post, comb) from the streams, the sublayer on their `pre` collapse,
    expanded back: X'_j = post_j·y + Σ_i comb[i][j]·X_i. `sublayer` maps the collapsed [n, D] to (y, extra)."""
    pre, post, comb = hc_mixer(streams, fn, base, scale, config, numerics)
    y, extra = sublayer(collapse(streams, pre, numerics))
    return expand(y, streams, post, comb, numerics), extra


def hc_head(streams, fn, base, scale, config, numerics) -> np.ndarray:
    """Final collapse: pre = sigmoid(scale·(fn·f)·(mean(f²)+eps)^-½ + base) + hc_eps over f = flatten(X)
    (no post, no Sinkhorn); returns Σ_i pre_i·X_i [n, D]."""
    flat = streams.reshape(streams.shape[0], -1)
    mixes = (flat @ fn.T) / np.sqrt(np.mean(np.square(flat), axis=-1, keepdims=True) + config.rms_norm_eps)
    pre = numerics.fp32(sigmoid(numerics.fp32(mixes * scale[0] + base)) + config.hc_eps)
    return collapse(streams, pre, numerics)
