"""Every tensor a DeepSeek-V4-Flash (model_type `deepseek_v4`) checkpoint of a given config holds: name, logical
shape, storage format, initializer.

Names and storage formats of the released checkpoint (docs/tiny-checkpoints.md lists the public sources: the
released safetensors index as loaded by public ports, and transformers' conversion_mapping.py 'deepseek_v4'):
dense projections FP8 E4M3 with one E8M0 scale per 128x128 tile; routed experts MXFP4; compressors (wkv, wgate,
norm), indexer weights_proj and norms BF16; ape, sinks, mHC and router bias FP32; `ffn.gate.tid2eid` I32.
A separate statement of the inventory from lib/config/tensor_inventory.cpp, which the tests compare it with.
"""

from __future__ import annotations

from .inventory import (BF16, F32, FP8_BLOCK128, I32, NORM_WEIGHT, TensorSpec, attention_core_tensors, expert_ids,
                        expert_tensors, norm_and_mixer_tensors, normal, projection, uniform)
from .model_config import ConfigV4, LayerRoleV4, layer_plan_v4


def _dense(name: str, out_features: int, in_features: int) -> TensorSpec:
    return TensorSpec(name, (out_features, in_features), FP8_BLOCK128, projection(in_features))


def checkpoint_inventory_v4(config: ConfigV4) -> list[TensorSpec]:
    """All backbone tensors in a stable order: global tensors (hc_head included), then layer by layer."""
    vocab, dim, mult = config.vocab_size, config.hidden_size, config.hc_mult
    specs = [
        TensorSpec("embed.weight", (vocab, dim), BF16, normal(0.0, 1.0)),
        TensorSpec("norm.weight", (dim,), BF16, NORM_WEIGHT),
        TensorSpec("head.weight", (vocab, dim), BF16, projection(dim)),
        # The final collapse of the hc_mult streams: pre weights only (sigmoid(scale * fn . x + base)).
        TensorSpec("hc_head_fn", (mult, mult * dim), F32, normal(0.0, 0.02)),
        TensorSpec("hc_head_base", (mult,), F32, normal(0.0, 0.1)),
        TensorSpec("hc_head_scale", (1,), F32, uniform(0.5, 1.5)),
    ]
    for role in layer_plan_v4(config):
        prefix = f"layers.{role.index}."
        layer = norm_and_mixer_tensors(config) + _attention_tensors(config, role) + _moe_tensors(config, role)
        specs += [TensorSpec(prefix + spec.name, spec.shape, spec.storage, spec.init) for spec in layer]
    return specs


def _compressor(at: str, dim: int, width: int, ratio: int, overlapping: bool) -> list[TensorSpec]:
    """A compressor pooling `width` channels; an overlapping one (CSA) projects two half-window series."""
    series = 2 * width if overlapping else width
    return [
        TensorSpec(f"{at}.wkv.weight", (series, dim), BF16, projection(dim)),
        TensorSpec(f"{at}.wgate.weight", (series, dim), BF16, projection(dim)),
        # Absolute position bias of each window slot, added to the gate logits; N(0, 0.5) so it matters.
        TensorSpec(f"{at}.ape", (ratio, series), F32, normal(0.0, 0.5)),
        TensorSpec(f"{at}.norm.weight", (width,), BF16, NORM_WEIGHT),
    ]


def _attention_tensors(config: ConfigV4, role: LayerRoleV4) -> list[TensorSpec]:
    dim, head_dim, q_rank = config.hidden_size, config.head_dim, config.q_lora_rank
    specs = attention_core_tensors(config, FP8_BLOCK128)
    if role.kind == "swa":
        return specs
    specs += _compressor("attn.compressor", dim, head_dim, role.ratio, role.overlapping)
    if role.kind == "csa":  # the lightning indexer, with its own overlapping compressor
        index_width = config.index_n_heads * config.index_head_dim
        specs += [
            _dense("attn.indexer.wq_b.weight", index_width, q_rank),
            TensorSpec("attn.indexer.weights_proj.weight", (config.index_n_heads, dim), BF16, projection(dim)),
        ]
        specs += _compressor("attn.indexer.compressor", dim, config.index_head_dim, role.ratio, True)
    return specs


def _moe_tensors(config: ConfigV4, role: LayerRoleV4) -> list[TensorSpec]:
    dim, experts = config.hidden_size, config.n_routed_experts
    specs = [TensorSpec("ffn.gate.weight", (experts, dim), BF16, projection(dim))]
    if role.is_hash:  # expert choice by token id; the gate still weights the chosen experts
        specs.append(TensorSpec("ffn.gate.tid2eid", (config.vocab_size, config.num_experts_per_tok), I32,
                                expert_ids(experts)))
    else:
        specs.append(TensorSpec("ffn.gate.bias", (experts,), F32, normal(0.0, 0.1)))
    return specs + expert_tensors(config, FP8_BLOCK128)
