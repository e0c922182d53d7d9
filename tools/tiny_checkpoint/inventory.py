"""Every tensor a V4.1 checkpoint of a given config holds: name, logical shape, storage format, initializer.

Names and storage formats follow the released checkpoint (MODEL.md §2.4; see docs/tiny-checkpoints.md for the
public sources checked): prefix `layers.{i}.`, torch [out, in] order, quantized weights as `<base>.weight` with a
`<base>.scale` companion. The logical shape is the float matrix before quantization.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .model_config import Config, LayerRole, is_v4, layer_plan

# Storage formats (MODEL.md §2.1).
FP8_BLOCK32 = "fp8_block32"  # F8_E4M3 weight + E8M0 scale per 32x32 block, scale [ceil(out/32), ceil(in/32)]
FP8_BLOCK128 = "fp8_block128"  # the same with 128x128 blocks (DeepSeek-V4-Flash)
MXFP4 = "mxfp4"  # E2M1 pairs packed in a byte (low nibble = even column) + E8M0 scale per 32 columns
FP8_ROWS32 = "fp8_rows32"  # F8_E4M3 table + E8M0 scale per row and 32 columns (Engram tables)
BF16 = "bf16"
F32 = "f32"
I32 = "i32"  # integer table (V4 ffn.gate.tid2eid)


@dataclass(frozen=True)
class Init:
    """A distribution to draw a tensor from: normal(mean, spread) or uniform[mean - spread, mean + spread]."""

    kind: str
    mean: float
    spread: float


def normal(mean: float, std: float) -> Init:
    return Init("normal", mean, std)


def uniform(low: float, high: float) -> Init:
    return Init("uniform", (low + high) / 2, (high - low) / 2)


def expert_ids(experts: int) -> Init:
    """Each row: distinct expert ids drawn uniformly from [0, experts) (V4 tid2eid); `mean` holds the count."""
    return Init("expert_ids", float(experts), 0.0)


NORM_WEIGHT = normal(1.0, 0.1)


def projection(fan_in: int) -> Init:
    """N(0, 1/sqrt(fan_in)): keeps a projection of an O(1) vector O(1), so every sublayer matters in a tiny
    model (MODEL.md §12 proposes N(0, 0.02), which is this rule for fan_in = 2500 but shrinks a 256-wide model's
    sublayer outputs to noise next to the residual stream)."""
    return normal(0.0, 1.0 / math.sqrt(fan_in))


@dataclass(frozen=True)
class TensorSpec:
    """One checkpoint tensor before quantization: `shape` is the logical float shape [out, in]."""

    name: str
    shape: tuple[int, ...]
    storage: str
    init: Init


def checkpoint_inventory(config: Config) -> list[TensorSpec]:
    """All tensors of the backbone in a stable order: global tensors, then layer by layer."""
    if is_v4(config):
        from .inventory_v4 import checkpoint_inventory_v4  # noqa: PLC0415 -- inventory_v4 imports this module

        return checkpoint_inventory_v4(config)
    specs = _global_tensors(config)
    for role in layer_plan(config):
        specs += _layer_tensors(config, role)
    return specs


def _dense(name: str, out_features: int, in_features: int, storage: str = FP8_BLOCK32) -> TensorSpec:
    return TensorSpec(name, (out_features, in_features), storage, projection(in_features))


def _global_tensors(config: Config) -> list[TensorSpec]:
    vocab, dim = config.vocab_size, config.hidden_size
    return [
        # Unit-variance rows: the embedding *is* the residual stream at layer 0.
        TensorSpec("embed.weight", (vocab, dim), BF16, normal(0.0, 1.0)),
        TensorSpec("norm.weight", (dim,), BF16, NORM_WEIGHT),
        TensorSpec("head.weight", (vocab, dim), BF16, projection(dim)),
    ]


def _layer_tensors(config: Config, role: LayerRole) -> list[TensorSpec]:
    prefix = f"layers.{role.index}."
    specs = norm_and_mixer_tensors(config) + _attention_tensors(config, role) + _moe_tensors(config)
    if role.engram_slot >= 0:  # table rows: engram_num_embeddings, checked against the prime rule on load
        specs += _engram_tensors(config, config.engram_num_embeddings[role.engram_slot])
    return [TensorSpec(prefix + spec.name, spec.shape, spec.storage, spec.init) for spec in specs]


def norm_and_mixer_tensors(config) -> list[TensorSpec]:
    """A layer's two RMSNorm weights and its two mHC mixers (shared with the V4 inventory)."""
    dim, mult = config.hidden_size, config.hc_mult
    mixer_width = 2 * mult + mult * mult  # pre (mult) + post (mult) + comb (mult x mult), MODEL.md §4
    specs = [
        TensorSpec("attn_norm.weight", (dim,), BF16, NORM_WEIGHT),
        TensorSpec("ffn_norm.weight", (dim,), BF16, NORM_WEIGHT),
    ]
    for site in ("attn", "ffn"):
        specs += [
            TensorSpec(f"hc_{site}_fn", (mixer_width, mult * dim), F32, normal(0.0, 0.02)),
            TensorSpec(f"hc_{site}_base", (mixer_width,), F32, normal(0.0, 0.1)),
            TensorSpec(f"hc_{site}_scale", (3,), F32, uniform(0.5, 1.5)),
        ]
    return specs


def attention_core_tensors(config, storage: str = FP8_BLOCK32) -> list[TensorSpec]:
    """Every layer's query, window KV and output projections and sinks; `storage` of the FP8 projections."""
    dim, heads, head_dim = config.hidden_size, config.num_attention_heads, config.head_dim
    q_rank, groups, o_rank = config.q_lora_rank, config.o_groups, config.o_lora_rank
    return [
        _dense("attn.wq_a.weight", q_rank, dim, storage),
        TensorSpec("attn.q_norm.weight", (q_rank,), BF16, NORM_WEIGHT),
        _dense("attn.wq_b.weight", heads * head_dim, q_rank, storage),
        _dense("attn.wkv.weight", head_dim, dim, storage),
        TensorSpec("attn.kv_norm.weight", (head_dim,), BF16, NORM_WEIGHT),
        _dense("attn.wo_a.weight", groups * o_rank, heads * head_dim // groups, storage),
        _dense("attn.wo_b.weight", dim, groups * o_rank, storage),
        TensorSpec("attn.attn_sink", (heads,), F32, normal(0.0, 1.0)),
    ]


def _attention_tensors(config: Config, role: LayerRole) -> list[TensorSpec]:
    dim, head_dim, q_rank = config.hidden_size, config.head_dim, config.q_lora_rank
    specs = attention_core_tensors(config)
    if role.is_kv_source:
        specs += [
            TensorSpec("attn.compressor.wkv.weight", (head_dim, dim), BF16, projection(dim)),
            TensorSpec("attn.compressor.norm.weight", (head_dim,), BF16, NORM_WEIGHT),
            TensorSpec("attn.indexer.wk.weight", (config.index_head_dim, head_dim), BF16, projection(head_dim)),
            TensorSpec("attn.indexer.k_norm.weight", (config.index_head_dim,), BF16, NORM_WEIGHT),
        ]
        if role.ratio > 1:  # softmax pooling over a group needs gate logits; ratio 1 has no group
            specs.append(TensorSpec("attn.compressor.wgate.weight", (head_dim, dim), BF16, projection(dim)))
    if role.is_index_source:
        specs += [
            _dense("attn.indexer.wq_b.weight", config.index_n_heads * config.index_head_dim, q_rank),
            TensorSpec("attn.indexer.weights_proj.weight", (config.index_n_heads, dim), BF16, projection(dim)),
        ]
    return specs


def _moe_tensors(config: Config) -> list[TensorSpec]:
    dim, experts = config.hidden_size, config.n_routed_experts
    return [
        TensorSpec("ffn.gate.weight", (experts, dim), BF16, projection(dim)),
        TensorSpec("ffn.gate.bias", (experts,), F32, normal(0.0, 0.1)),
        TensorSpec("ffn.gate.bias_vl", (experts,), F32, normal(0.0, 0.1)),
    ] + expert_tensors(config)


def expert_tensors(config, storage: str = FP8_BLOCK32) -> list[TensorSpec]:
    """Routed experts (MXFP4) and the shared expert (`storage`, FP8)."""
    dim, experts, inter = config.hidden_size, config.n_routed_experts, config.moe_intermediate_size
    specs = []
    for expert in range(experts):
        base = f"ffn.experts.{expert}."
        specs += [
            TensorSpec(base + "w1.weight", (inter, dim), MXFP4, projection(dim)),
            TensorSpec(base + "w2.weight", (dim, inter), MXFP4, projection(inter)),
            TensorSpec(base + "w3.weight", (inter, dim), MXFP4, projection(dim)),
        ]
    shared = inter * config.n_shared_experts
    specs += [
        _dense("ffn.shared_experts.w1.weight", shared, dim, storage),
        _dense("ffn.shared_experts.w2.weight", dim, shared, storage),
        _dense("ffn.shared_experts.w3.weight", shared, dim, storage),
    ]
    return specs


def _engram_tensors(config: Config, rows: int) -> list[TensorSpec]:
    dim, mult = config.hidden_size, config.hc_mult
    memory_width = config.engram_columns * config.engram_head_dim
    return [
        TensorSpec("engram.embed.weight", (rows, config.engram_head_dim), FP8_ROWS32, normal(0.0, 0.5)),
        # keys for each of the hc_mult streams, then one value (MODEL.md §7: keys first)
        _dense("engram.wkv.weight", (mult + 1) * dim, memory_width),
        TensorSpec("engram.q_weight", (mult, dim), BF16, NORM_WEIGHT),
        TensorSpec("engram.k_weight", (mult, dim), BF16, NORM_WEIGHT),
    ]
