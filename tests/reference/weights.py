"""Weights of the reference: the tensor inventory of a config, random weights, and the checkpoint loader
(MODEL.md §2.1, §2.4, §12).

Weights are a dict {HF tensor name: float32 array}, names as in the released checkpoint with prefix `layers.{i}.`,
torch [out, in] order. The loader dequantizes every stored format to float32 (FP8 E4M3 with 32×32 -- V4: 128×128 --
UE8M0 block scales, MXFP4 experts, FP8 Engram tables with per-32 scales; BF16/F16/F32 converted).
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import safetensors

from .config import Config, hc_mixer_width, layer_plan, load_config


class WeightError(ValueError):
    """A missing, misshapen or unreadable tensor; the message names the file and the tensor."""


# ---------------------------------------------------------------------------------------------------------
# Inventory


@dataclass(frozen=True)
class TensorInfo:
    """One logical tensor: its float shape [out, in] and the §12 distribution random_weights draws it from."""

    name: str
    shape: tuple[int, ...]
    init: str  # 'projection' | 'norm' | 'mhc_fn' | 'mhc_base' | 'mhc_scale' | 'sink' | 'bias' | 'table' | 'embed'
    #            | 'ape' | 'tid2eid' (V4)


def inventory(config: Config) -> list[TensorInfo]:
    """Every tensor the reference reads for `config` (no DSpark, no vision; gate.bias_vl is not read)."""
    d = config.hidden_size
    specs = [TensorInfo("embed.weight", (config.vocab_size, d), "embed"),
             TensorInfo("head.weight", (config.vocab_size, d), "projection"),
             TensorInfo("norm.weight", (d,), "norm")]
    for role in layer_plan(config):
        p = f"layers.{role.index}."
        specs += block_sites_inventory(config, p)
        specs += _attention_inventory(config, role, p)
        specs += _moe_inventory(config, p)
        if role.engram_slot >= 0:
            specs += _engram_inventory(config, role.engram_slot, p)
    return specs


def block_sites_inventory(config, p: str) -> list[TensorInfo]:
    """The two sublayer norms and the two mHC sites of a block (V4.1 and V4)."""
    d, hc = config.hidden_size, config.hc_mult
    specs = [TensorInfo(p + "attn_norm.weight", (d,), "norm"), TensorInfo(p + "ffn_norm.weight", (d,), "norm")]
    for site in ("attn", "ffn"):
        specs += [TensorInfo(p + f"hc_{site}_fn", (hc_mixer_width(config), hc * d), "mhc_fn"),
                  TensorInfo(p + f"hc_{site}_base", (hc_mixer_width(config),), "mhc_base"),
                  TensorInfo(p + f"hc_{site}_scale", (3,), "mhc_scale")]
    return specs


def _attention_inventory(config: Config, role, p: str) -> list[TensorInfo]:
    d, hd = config.hidden_size, config.head_dim
    specs = attention_core_inventory(config, p)
    if role.is_kv_source:
        specs += [TensorInfo(p + "attn.compressor.wkv.weight", (hd, d), "projection"),
                  TensorInfo(p + "attn.compressor.norm.weight", (hd,), "norm"),
                  TensorInfo(p + "attn.indexer.wk.weight", (config.index_head_dim, hd), "projection"),
                  TensorInfo(p + "attn.indexer.k_norm.weight", (config.index_head_dim,), "norm")]
        if role.ratio > 1:
            specs.append(TensorInfo(p + "attn.compressor.wgate.weight", (hd, d), "projection"))
    if role.is_index_source:
        specs += [TensorInfo(p + "attn.indexer.wq_b.weight",
                             (config.index_n_heads * config.index_head_dim, config.q_lora_rank), "projection"),
                  TensorInfo(p + "attn.indexer.weights_proj.weight", (config.index_n_heads, d), "projection")]
    return specs


def attention_core_inventory(config, p: str) -> list[TensorInfo]:
    """The attention tensors every layer has (V4.1 and V4): query path, window KV, output projection, sink."""
    d, h, hd = config.hidden_size, config.num_attention_heads, config.head_dim
    return [TensorInfo(p + "attn.wq_a.weight", (config.q_lora_rank, d), "projection"),
            TensorInfo(p + "attn.q_norm.weight", (config.q_lora_rank,), "norm"),
            TensorInfo(p + "attn.wq_b.weight", (h * hd, config.q_lora_rank), "projection"),
            TensorInfo(p + "attn.wkv.weight", (hd, d), "projection"),
            TensorInfo(p + "attn.kv_norm.weight", (hd,), "norm"),
            TensorInfo(p + "attn.wo_a.weight", (config.o_groups * config.o_lora_rank, h * hd // config.o_groups),
                       "projection"),
            TensorInfo(p + "attn.wo_b.weight", (d, config.o_groups * config.o_lora_rank), "projection"),
            TensorInfo(p + "attn.attn_sink", (h,), "sink")]


def _moe_inventory(config: Config, p: str) -> list[TensorInfo]:
    d, inter, n = config.hidden_size, config.moe_intermediate_size, config.n_routed_experts
    specs = [TensorInfo(p + "ffn.gate.weight", (n, d), "projection"), TensorInfo(p + "ffn.gate.bias", (n,), "bias")]
    for e in range(n):
        specs += [TensorInfo(p + f"ffn.experts.{e}.w1.weight", (inter, d), "projection"),
                  TensorInfo(p + f"ffn.experts.{e}.w3.weight", (inter, d), "projection"),
                  TensorInfo(p + f"ffn.experts.{e}.w2.weight", (d, inter), "projection")]
    shared = inter * config.n_shared_experts
    if shared:
        specs += [TensorInfo(p + "ffn.shared_experts.w1.weight", (shared, d), "projection"),
                  TensorInfo(p + "ffn.shared_experts.w3.weight", (shared, d), "projection"),
                  TensorInfo(p + "ffn.shared_experts.w2.weight", (d, shared), "projection")]
    return specs


def _engram_inventory(config: Config, slot: int, p: str) -> list[TensorInfo]:
    d, hc = config.hidden_size, config.hc_mult
    width = config.engram_columns * config.engram_head_dim
    return [TensorInfo(p + "engram.embed.weight", (config.engram_num_embeddings[slot], config.engram_head_dim),
                       "table"),
            TensorInfo(p + "engram.wkv.weight", ((hc + 1) * d, width), "projection"),
            TensorInfo(p + "engram.q_weight", (hc, d), "norm"),
            TensorInfo(p + "engram.k_weight", (hc, d), "norm")]


# ---------------------------------------------------------------------------------------------------------
# Random weights (§12)


def random_weights(config: Config, seed: int) -> dict[str, np.ndarray]:
    """In-memory float32 weights with the §12 distributions: projections N(0, 0.02), norm weights 1+N(0, 0.1),
    mHC fn N(0, 0.02), base N(0, 0.1), scale U(0.5, 1.5), attn_sink N(0, 1), gate bias N(0, 0.1), Engram table
    N(0, 0.5); the embedding (not listed in §12) N(0, 1), so layer 0 sees unit-RMS streams."""
    return draw_weights(inventory(config), seed)


def draw_weights(specs: list[TensorInfo], seed: int) -> dict[str, np.ndarray]:
    """float32 arrays for `specs`, drawn in order from one PCG64 stream of `seed` by each spec's `init` kind
    (random_weights' distributions; 'ape' -- the V4 compressor position bias -- N(0, 0.5))."""
    rng = np.random.default_rng(seed)
    draws = {
        "projection": lambda s: rng.normal(0.0, 0.02, s),
        "norm": lambda s: 1.0 + rng.normal(0.0, 0.1, s),
        "mhc_fn": lambda s: rng.normal(0.0, 0.02, s),
        "mhc_base": lambda s: rng.normal(0.0, 0.1, s),
        "mhc_scale": lambda s: rng.uniform(0.5, 1.5, s),
        "sink": lambda s: rng.normal(0.0, 1.0, s),
        "bias": lambda s: rng.normal(0.0, 0.1, s),
        "table": lambda s: rng.normal(0.0, 0.5, s),
        "embed": lambda s: rng.normal(0.0, 1.0, s),
        "ape": lambda s: rng.normal(0.0, 0.5, s),
    }
    return {spec.name: draws[spec.init](spec.shape).astype(np.float32) for spec in specs}


def check_weights(config: Config, weights: dict[str, np.ndarray], source: str = "weights") -> None:
    """Every tensor of the inventory present with its shape; WeightError naming the first that is not."""
    check_specs(inventory(config), weights, source)


def check_specs(specs: list[TensorInfo], weights: dict[str, np.ndarray], source: str) -> None:
    """Every tensor of `specs` present in `weights` with its shape; WeightError naming the first that is not."""
    for spec in specs:
        if spec.name not in weights:
            raise WeightError(f"{source}: tensor {spec.name} is missing")
        if tuple(weights[spec.name].shape) != spec.shape:
            raise WeightError(f"{source}: tensor {spec.name} has shape {tuple(weights[spec.name].shape)}, "
                              f"expected {spec.shape}")


# ---------------------------------------------------------------------------------------------------------
# Checkpoint loader

_FLOAT_DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16, "F64": np.float64}
_BYTE_DTYPES = {"F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E8M0": ml_dtypes.float8_e8m0fnu, "U8": np.uint8,
                "I8": np.int8, "I16": np.int16, "I32": np.int32, "I64": np.int64}
INDEX_FILE = "model.safetensors.index.json"


def load_checkpoint(model_dir: str | pathlib.Path) -> tuple[Config, dict[str, np.ndarray]]:
    """Reads DIR/config.json and the safetensors shards (via model.safetensors.index.json, or a single
    model.safetensors); returns the config and the dequantized float32 weights of its inventory."""
    model_dir = pathlib.Path(model_dir)
    if not model_dir.is_dir():
        raise WeightError(f"checkpoint directory {model_dir} does not exist")
    if _is_v4_checkpoint(model_dir):
        from .weights_v4 import load_checkpoint_v4  # noqa: PLC0415 -- weights_v4 imports this module

        return load_checkpoint_v4(model_dir)
    config = load_config(model_dir)
    raw = _read_raw_tensors(model_dir)
    weights = {}
    for spec in inventory(config):
        weights[spec.name] = _dequantized(spec, raw, model_dir)
    check_weights(config, weights, str(model_dir))
    return config, weights


def _is_v4_checkpoint(model_dir: pathlib.Path) -> bool:
    """config.json names model_type deepseek_v4 (load_config reports any unreadable file)."""
    from .config_v4 import is_v4_document  # noqa: PLC0415

    try:
        return is_v4_document(json.loads((model_dir / "config.json").read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False


def _shard_files(model_dir: pathlib.Path) -> list[pathlib.Path]:
    index = model_dir / INDEX_FILE
    if index.is_file():
        try:
            weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        except (OSError, ValueError, KeyError) as error:
            raise WeightError(f"{index}: not a safetensors index ({error})") from error
        return [model_dir / name for name in sorted(set(weight_map.values()))]
    single = model_dir / "model.safetensors"
    if single.is_file():
        return [single]
    raise WeightError(f"{model_dir}: neither {INDEX_FILE} nor model.safetensors exists")


@dataclass(frozen=True)
class RawTensor:
    """A tensor as stored: safetensors dtype string, shape and the array viewed in that dtype."""

    file: pathlib.Path
    dtype: str
    array: np.ndarray


def _read_raw_tensors(model_dir: pathlib.Path) -> dict[str, RawTensor]:
    tensors = {}
    for path in _shard_files(model_dir):
        if not path.is_file():
            raise WeightError(f"{path}: shard named in the index does not exist")
        try:
            entries = safetensors.deserialize(path.read_bytes())
        except Exception as error:  # the Rust parser raises its own error type
            raise WeightError(f"{path}: not a readable safetensors file ({error})") from error
        for name, entry in entries:
            dtype = entry["dtype"]
            numpy_dtype = _FLOAT_DTYPES.get(dtype) or _BYTE_DTYPES.get(dtype)
            if numpy_dtype is None:
                tensors[name] = RawTensor(path, dtype, np.empty(0))
                continue
            array = np.frombuffer(bytes(entry["data"]), dtype=numpy_dtype).reshape(entry["shape"])
            tensors[name] = RawTensor(path, dtype, array)
    return tensors


def _scale_name(weight_name: str) -> str:
    return weight_name.removesuffix(".weight") + ".scale"


def _dequantized(spec: TensorInfo, raw: dict[str, RawTensor], model_dir: pathlib.Path) -> np.ndarray:
    from . import formats  # noqa: PLC0415 -- only the loader needs the weight dequantizers

    if spec.name not in raw:
        raise WeightError(f"{model_dir}: tensor {spec.name} is missing")
    tensor = raw[spec.name]
    where = f"{tensor.file}: tensor {spec.name}"
    if tensor.dtype in _FLOAT_DTYPES:
        return tensor.array.astype(np.float32)
    if tensor.dtype not in ("F8_E4M3", "I8", "U8"):
        raise WeightError(f"{where} has unsupported dtype {tensor.dtype}")
    scale_name = _scale_name(spec.name)
    if scale_name not in raw:
        raise WeightError(f"{where} is stored as {tensor.dtype} without its scale tensor {scale_name}")
    scale = _scale_as_e8m0(raw[scale_name], f"{raw[scale_name].file}: tensor {scale_name}")
    rows, cols = spec.shape
    if tensor.dtype == "F8_E4M3":
        codes = tensor.array
        if codes.shape != (rows, cols):
            raise WeightError(f"{where} has shape {codes.shape}, expected {(rows, cols)}")
        if spec.name.endswith("engram.embed.weight"):
            _expect_shape(scale, (rows, -(-cols // 32)), scale_name, tensor.file)
            return np.asarray(formats.dequantize_fp8_rows32(codes, scale), dtype=np.float32)
        tile = _fp8_tile(scale.shape, rows, cols)
        _expect_shape(scale, (-(-rows // tile), -(-cols // tile)), scale_name, tensor.file)
        return np.asarray(formats.dequantize_fp8_tiles(codes, scale, tile), dtype=np.float32)
    packed = tensor.array.view(np.uint8)  # I8 or U8: two E2M1 codes per byte
    if packed.shape != (rows, cols // 2) or cols % 2:
        raise WeightError(f"{where} (packed E2M1) has shape {packed.shape}, expected {(rows, cols // 2)}")
    _expect_shape(scale, (rows, -(-cols // 32)), scale_name, tensor.file)
    return np.asarray(formats.dequantize_mxfp4_weight(packed, scale), dtype=np.float32)


FP8_TILES = (32, 128)  # V4.1 checkpoints use 32x32 scale tiles, V4 ones 128x128 (MODEL.md §2.1)


def _fp8_tile(scale_shape: tuple[int, ...], rows: int, cols: int) -> int:
    """The tile edge whose scale grid has `scale_shape` (unambiguous: two grids only coincide when every tile edge
    covers the whole matrix, where the tile size does not matter); 32 when none does (the caller reports it)."""
    for tile in FP8_TILES:
        if tuple(scale_shape) == (-(-rows // tile), -(-cols // tile)):
            return tile
    return FP8_TILES[0]


def _expect_shape(scale: np.ndarray, shape: tuple[int, int], name: str, file: pathlib.Path) -> None:
    if scale.shape != shape:
        raise WeightError(f"{file}: tensor {name} has shape {scale.shape}, expected {shape}")


def _scale_as_e8m0(tensor: RawTensor, where: str) -> np.ndarray:
    """E8M0 scales as ml_dtypes.float8_e8m0fnu, whether stored as F8_E8M0, raw exponent bytes (U8) or F32 powers
    of two (§2.4 loader robustness)."""
    if tensor.dtype == "F8_E8M0":
        return tensor.array
    if tensor.dtype == "U8":
        return tensor.array.view(ml_dtypes.float8_e8m0fnu)
    if tensor.dtype == "F32":
        values = tensor.array
        mantissa, _ = np.frexp(values)
        if np.any(values <= 0) or np.any(mantissa != 0.5):
            raise WeightError(f"{where}: F32 scales must be positive powers of two")
        return values.astype(ml_dtypes.float8_e8m0fnu)
    raise WeightError(f"{where} has dtype {tensor.dtype}; E8M0 scales must be F8_E8M0, U8 or F32")
