"""The V4 MoE: hash-routed layers (the first `num_hash_layers`: experts fixed per token id by `ffn.gate.tid2eid`,
weights from the learned sqrtsoftplus scores, no selection bias) and learned-routed layers (moe.py's router).
Experts and the shared expert are V4.1's (MODEL.md §6)."""

from __future__ import annotations

import numpy as np

from .moe import ROUTER_SUM_EPS, combine, route
from .ops import linear, softplus


def hash_route(v, ids, weights: dict, prefix: str, config, numerics) -> tuple[np.ndarray, np.ndarray]:
    """experts = tid2eid[token id] [n, k]; w_e = routed_scaling · σ_e / Σ_selected σ with σ = sqrt(softplus(gate·v))."""
    logits = numerics.fp32(linear(v, weights[prefix + "ffn.gate.weight"]))
    sigma = numerics.fp32(np.sqrt(softplus(logits)))
    experts = weights[prefix + "ffn.gate.tid2eid"][np.asarray(ids)].astype(np.int64)
    chosen = np.take_along_axis(sigma, experts, axis=1)
    routing = chosen / (chosen.sum(axis=1, keepdims=True) + ROUTER_SUM_EPS) * config.routed_scaling_factor
    return experts, numerics.fp32(routing)


def moe_v4(v, ids, role, weights: dict, config, numerics) -> tuple[np.ndarray, dict]:
    """MoE(v) with the layer's routing; returns the output and the routing (for dumps)."""
    prefix = f"layers.{role.index}."
    if role.is_hash:
        experts, routing = hash_route(v, ids, weights, prefix, config, numerics)
    else:
        experts, routing = route(v, weights, prefix, config, numerics)
    return combine(v, experts, routing, weights, prefix, config, numerics), {"experts": experts, "routing": routing}
