"""Attention of every layer: query path, window KV row, attention core with the per-head sink, inverse RoPE and
grouped output projection (MODEL.md §5.1, §5.2, §5.7, §5.8).
"""

from __future__ import annotations

import numpy as np

from .config import Config
from .numerics import Numerics
from .ops import linear, rms_norm
from .rope import Rope


def query_path(u: np.ndarray, positions: np.ndarray, weights: dict, prefix: str, config: Config, rope: Rope,
               numerics: Numerics) -> tuple[np.ndarray, np.ndarray]:
    """§5.1: cq = RMSNorm_q(wq_a·u) [n, q_lora_rank]; q = RoPE_s(wq_b·cq) [n, H, head_dim]. No per-head q norm."""
    cq = numerics.bf16(linear(u, weights[prefix + "attn.wq_a.weight"]))
    cq = numerics.bf16(rms_norm(cq, weights[prefix + "attn.q_norm.weight"], config.rms_norm_eps))
    q = numerics.bf16(linear(cq, weights[prefix + "attn.wq_b.weight"]))
    q = q.reshape(u.shape[0], config.num_attention_heads, config.head_dim)
    return cq, numerics.bf16(rope.apply(q, positions))


def window_row(u: np.ndarray, positions: np.ndarray, weights: dict, prefix: str, config: Config, rope: Rope,
               numerics: Numerics) -> np.ndarray:
    """§5.2: kv_s = FP8(RoPE_s(RMSNorm_kv(wkv·u))) [n, head_dim]; K = V."""
    kv = numerics.bf16(linear(u, weights[prefix + "attn.wkv.weight"]))
    kv = numerics.bf16(rms_norm(kv, weights[prefix + "attn.kv_norm.weight"], config.rms_norm_eps))
    return numerics.window_row(numerics.bf16(rope.apply(kv, positions)))


def attention_with_sink(q: np.ndarray, window_keys: np.ndarray, window_visible: np.ndarray,
                        entries: np.ndarray | None, selection: np.ndarray | None, sink: np.ndarray,
                        numerics: Numerics) -> np.ndarray:
    """§5.7: one softmax per head over window(s) ∪ {C_j : j ∈ topk(s)} plus the sink logit in the denominator.

    q [n, H, d]; window_keys [m, d] with window_visible [n, m]; entries [E, d] with selection [n, k] (−1 skipped).
    l_t = q_h·k_t/√d; P_t = exp(l_t)/(Σ exp(l_t') + exp(sink_h)); o_h = Σ P_t·k_t (V = K). In faithful mode P is
    rounded to BF16 before the PV product (TileLang kernel). Returns o [n, H, d]."""
    scale = 1.0 / np.sqrt(q.shape[-1])
    logits = np.einsum("nhd,md->nhm", q, window_keys) * scale
    logits = np.where(window_visible[:, None, :], logits, -np.inf)
    values = None
    if selection is not None and entries is not None and entries.shape[0] > 0:
        valid = selection >= 0
        gathered = entries[np.where(valid, selection, 0)]  # [n, k, d]
        entry_logits = np.einsum("nhd,nkd->nhk", q, gathered) * scale
        logits = np.concatenate([logits, np.where(valid[:, None, :], entry_logits, -np.inf)], axis=2)
        values = gathered
    sink = sink[None, :, None]
    peak = np.maximum(logits.max(axis=2, keepdims=True), sink)
    numerators = np.exp(logits - peak)
    probs = numerics.fp32(numerators / (numerators.sum(axis=2, keepdims=True) + np.exp(sink - peak)))
    probs = numerics.bf16(probs)
    m = window_keys.shape[0]
    out = np.einsum("nhm,md->nhd", probs[:, :, :m], window_keys)
    if values is not None:
        out = out + np.einsum("nhk,nkd->nhd", probs[:, :, m:], values)
    return numerics.bf16(out)


def output_projection(o: np.ndarray, positions: np.ndarray, weights: dict, prefix: str, config: Config, rope: Rope,
                      numerics: Numerics) -> np.ndarray:
    """§5.8: o_h ← RoPE_s⁻¹(o_h); a_g = wo_a[g]·concat(o_{8g..8g+7}) (rows g·o_lora_rank…); y = wo_b·concat(a)."""
    o = numerics.bf16(rope.apply(o, positions, inverse=True))
    groups, rank = config.o_groups, config.o_lora_rank
    grouped = o.reshape(o.shape[0], groups, -1)  # heads g·H/G … (g+1)·H/G − 1, concatenated
    wo_a = weights[prefix + "attn.wo_a.weight"].reshape(groups, rank, -1)
    a = numerics.bf16(np.einsum("ngi,gri->ngr", grouped, wo_a))
    return numerics.bf16(linear(a.reshape(o.shape[0], groups * rank), weights[prefix + "attn.wo_b.weight"]))
