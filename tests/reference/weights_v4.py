"""Weights of the V4 mode: the deepseek_v4 tensor inventory under the released checkpoint's names, random weights,
and the checkpoint loader (dequantizing like weights.py; `ffn.gate.tid2eid` read as integers).

Released names (transformers' conversion_mapping.py 'deepseek_v4' maps them to its own):
  embed.weight, head.weight, norm.weight, hc_head_{fn,base,scale};
  layers.{i}.{attn_norm,ffn_norm}.weight, layers.{i}.hc_{attn,ffn}_{fn,base,scale};
  layers.{i}.attn.{wq_a,q_norm,wq_b,wkv,kv_norm,wo_a,wo_b}.weight, layers.{i}.attn.attn_sink;
  compressed layers: layers.{i}.attn.compressor.{wkv,wgate,norm}.weight + .ape ([r, coff·head_dim], coff = 2 for CSA);
  CSA layers: layers.{i}.attn.indexer.{wq_b,weights_proj}.weight and attn.indexer.compressor.{wkv,wgate,norm}.weight
  + .ape at index_head_dim;
  layers.{i}.ffn.gate.weight, .bias (learned routing) or .tid2eid [vocab, k] (hash layers), ffn.experts.{e}.w{1,2,3},
  ffn.shared_experts.w{1,2,3}.
"""

from __future__ import annotations

import pathlib

import numpy as np

from .config_v4 import ConfigV4, LayerRoleV4, layer_plan_v4, load_config_v4
from .weights import (TensorInfo, WeightError, _dequantized, _moe_inventory, _read_raw_tensors,
                      attention_core_inventory, block_sites_inventory, check_specs, draw_weights)


def inventory_v4(config: ConfigV4) -> list[TensorInfo]:
    """Every tensor the V4 reference reads (no MTP)."""
    d, hc = config.hidden_size, config.hc_mult
    specs = [TensorInfo("embed.weight", (config.vocab_size, d), "embed"),
             TensorInfo("head.weight", (config.vocab_size, d), "projection"),
             TensorInfo("norm.weight", (d,), "norm"),
             TensorInfo("hc_head_fn", (hc, hc * d), "mhc_fn"),
             TensorInfo("hc_head_base", (hc,), "mhc_base"),
             TensorInfo("hc_head_scale", (1,), "mhc_scale")]
    for role in layer_plan_v4(config):
        p = f"layers.{role.index}."
        specs += block_sites_inventory(config, p)
        specs += _attention_inventory_v4(config, role, p)
        specs += _ffn_inventory_v4(config, role, p)
    return specs


def _attention_inventory_v4(config: ConfigV4, role: LayerRoleV4, p: str) -> list[TensorInfo]:
    specs = attention_core_inventory(config, p)
    if role.kind != "swa":
        specs += _compressor_inventory(p + "attn.compressor.", config.hidden_size, config.head_dim, role.ratio,
                                       role.overlapping)
    if role.kind == "csa":
        specs += [TensorInfo(p + "attn.indexer.wq_b.weight",
                             (config.index_n_heads * config.index_head_dim, config.q_lora_rank), "projection"),
                  TensorInfo(p + "attn.indexer.weights_proj.weight", (config.index_n_heads, config.hidden_size),
                             "projection")]
        specs += _compressor_inventory(p + "attn.indexer.compressor.", config.hidden_size, config.index_head_dim,
                                       role.ratio, True)
    return specs


def _compressor_inventory(p: str, d: int, width: int, ratio: int, overlapping: bool) -> list[TensorInfo]:
    coff = 2 if overlapping else 1
    return [TensorInfo(p + "wkv.weight", (coff * width, d), "projection"),
            TensorInfo(p + "wgate.weight", (coff * width, d), "projection"),
            TensorInfo(p + "ape", (ratio, coff * width), "ape"),
            TensorInfo(p + "norm.weight", (width,), "norm")]


def _ffn_inventory_v4(config: ConfigV4, role: LayerRoleV4, p: str) -> list[TensorInfo]:
    """V4.1's MoE tensors; a hash layer has `gate.tid2eid` [vocab, k] instead of the selection bias."""
    specs = _moe_inventory(config, p)
    if role.is_hash:
        specs = [s for s in specs if s.name != p + "ffn.gate.bias"]
        specs.append(TensorInfo(p + "ffn.gate.tid2eid", (config.vocab_size, config.num_experts_per_tok), "tid2eid"))
    return specs


def random_weights_v4(config: ConfigV4, seed: int) -> dict[str, np.ndarray]:
    """weights.py's distributions (ape N(0, 0.5)); tid2eid: k distinct experts per token id, uniformly at random."""
    specs = inventory_v4(config)
    weights = draw_weights([s for s in specs if s.init != "tid2eid"], seed)
    rng = np.random.default_rng([seed, 4])
    for spec in specs:
        if spec.init == "tid2eid":
            weights[spec.name] = np.stack([rng.permutation(config.n_routed_experts)[: spec.shape[1]]
                                           for _ in range(spec.shape[0])]).astype(np.int64)
    return weights


def check_weights_v4(config: ConfigV4, weights: dict[str, np.ndarray], source: str = "weights") -> None:
    """Every tensor of the inventory present with its shape; tid2eid entries are expert ids."""
    specs = inventory_v4(config)
    check_specs(specs, weights, source)
    for spec in specs:
        if spec.init == "tid2eid":
            table = np.asarray(weights[spec.name])
            if np.any(table != np.round(table)) or table.min() < 0 or table.max() >= config.n_routed_experts:
                raise WeightError(f"{source}: tensor {spec.name} holds ids outside [0, {config.n_routed_experts})")


def load_checkpoint_v4(model_dir: str | pathlib.Path) -> tuple[ConfigV4, dict[str, np.ndarray]]:
    """DIR/config.json (deepseek_v4) and its safetensors; dequantized float32 weights, tid2eid as int64."""
    model_dir = pathlib.Path(model_dir)
    config = load_config_v4(model_dir)
    raw = _read_raw_tensors(model_dir)
    weights = {}
    for spec in inventory_v4(config):
        if spec.init != "tid2eid":
            weights[spec.name] = _dequantized(spec, raw, model_dir)
            continue
        tensor = raw.get(spec.name)
        if tensor is None:
            raise WeightError(f"{model_dir}: tensor {spec.name} is missing")
        if tensor.dtype not in ("I64", "I32", "I16", "U8", "I8"):
            raise WeightError(f"{tensor.file}: tensor {spec.name} has dtype {tensor.dtype}; expected integers")
        weights[spec.name] = tensor.array.astype(np.int64)
    check_weights_v4(config, weights, str(model_dir))
    return config, weights
