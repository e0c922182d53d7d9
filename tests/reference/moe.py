"""MoE FFN: sqrtsoftplus router with selection bias, routed scaling, SwiGLU experts with clamps, shared expert
(MODEL.md §6)."""

from __future__ import annotations

import numpy as np

from .config import Config
from .numerics import Numerics
from .ops import linear, silu, softplus

ROUTER_SUM_EPS = 1e-20  # guard on Σσ of the selected experts, as reported for TRT-LLM [R]


def route(v: np.ndarray, weights: dict, prefix: str, config: Config,
          numerics: Numerics) -> tuple[np.ndarray, np.ndarray]:
    """σ_e = sqrt(softplus(gate_e·v)) in fp32; select the top-k of σ + bias (lowest index first among equals);
    w_e = routed_scaling · σ_e / Σ_selected σ (unbiased σ). Returns (experts [n, k], weights [n, k])."""
    logits = numerics.fp32(linear(v, weights[prefix + "ffn.gate.weight"]))
    sigma = numerics.fp32(np.sqrt(softplus(logits)))
    biased = numerics.fp32(sigma + weights[prefix + "ffn.gate.bias"])
    experts = np.argsort(-biased, axis=1, kind="stable")[:, : config.num_experts_per_tok]
    chosen = np.take_along_axis(sigma, experts, axis=1)
    routing = chosen / (chosen.sum(axis=1, keepdims=True) + ROUTER_SUM_EPS) * config.routed_scaling_factor
    return experts, numerics.fp32(routing)


def expert_ffn(v: np.ndarray, w1: np.ndarray, w3: np.ndarray, w2: np.ndarray, scale: np.ndarray, limit: float,
               numerics: Numerics) -> np.ndarray:
    """e(v) = W2(scale·silu(min(W1 v, limit))·clamp(W3 v, ±limit)); the routing weight `scale` [n] multiplies the
    hidden before W2 (V4 reference order), activation math in fp32."""
    gate = np.minimum(numerics.bf16(linear(v, w1)), limit)
    up = np.clip(numerics.bf16(linear(v, w3)), -limit, limit)
    hidden = numerics.bf16(numerics.fp32(silu(gate) * up) * scale[:, None])
    return numerics.bf16(linear(hidden, w2))


def moe(v: np.ndarray, weights: dict, prefix: str, config: Config, numerics: Numerics) -> tuple[np.ndarray, dict]:
    """MoE(v) = Σ_selected w_e·e_e(v) + shared(v), combined in fp32 then BF16. Also returns the routing, for dumps."""
    experts, routing = route(v, weights, prefix, config, numerics)
    return combine(v, experts, routing, weights, prefix, config, numerics), {"experts": experts, "routing": routing}


def combine(v: np.ndarray, experts: np.ndarray, routing: np.ndarray, weights: dict, prefix: str, config,
            numerics: Numerics) -> np.ndarray:
    """Σ_selected w_e·e_e(v) + shared(v) for given selections experts [n, k] and weights routing [n, k]."""
    total = np.zeros_like(v)
    for expert in np.unique(experts):
        rows, slot = np.nonzero(experts == expert)
        base = f"{prefix}ffn.experts.{expert}."
        # add.at: a row may name one expert twice (a hash table is free to), and each pick counts
        np.add.at(total, rows, expert_ffn(v[rows], weights[base + "w1.weight"], weights[base + "w3.weight"],
                                          weights[base + "w2.weight"], routing[rows, slot], config.swiglu_limit,
                                          numerics))
    if config.n_shared_experts:
        base = prefix + "ffn.shared_experts."
        total += expert_ffn(v, weights[base + "w1.weight"], weights[base + "w3.weight"], weights[base + "w2.weight"],
                            np.ones(v.shape[0]), config.swiglu_limit, numerics)
    return numerics.bf16(total)
