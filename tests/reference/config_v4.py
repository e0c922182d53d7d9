"""Configuration and layer plan of DeepSeek-V4-Flash (model_type `deepseek_v4`, MODEL.md §1.1 V4 column).

Reads the released checkpoint's config.json (`compress_ratios` with 0 / 4 / 128, `num_hash_layers`,
`qk_rope_head_dim`, `rope_scaling` yarn, ...) and also the field names transformers 5.24 writes (`layer_types` +
`compress_rates`, `mlp_layer_types`, `partial_rotary_factor`, nested `rope_parameters`), so a checkpoint saved by
either reads the same. Layer kinds: ratio 0 = sliding window only ('swa'); the CSA ratio (4 unless `compress_rates`
says otherwise) = compressed sparse attention with the overlapping compressor and the lightning indexer ('csa');
any other ratio = heavily compressed attention, every visible entry attended ('hca'). Every compressed layer owns
its KV (no sharing across layers, unlike V4.1). The first `num_hash_layers` MoE layers route by `tid2eid`.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field

from .config import ConfigError, RopeScaling, _rope_scaling

V4_MODEL_TYPES = ("deepseek_v4",)
CSA_TYPE, HCA_TYPE, SWA_TYPE = "compressed_sparse_attention", "heavily_compressed_attention", "sliding_attention"
_KIND_OF_TYPE = {SWA_TYPE: "swa", CSA_TYPE: "csa", HCA_TYPE: "hca"}
DEFAULT_CSA_RATIO, DEFAULT_HCA_RATIO, DEFAULT_HASH_LAYERS = 4, 128, 3


@dataclass(frozen=True)
class ConfigV4:
    """The text model of a deepseek_v4 checkpoint (defaults: the V4-Flash constants of MODEL.md §1.1)."""

    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    head_dim: int
    qk_rope_head_dim: int
    q_lora_rank: int
    o_groups: int
    o_lora_rank: int
    sliding_window: int
    compress_ratios: tuple[int, ...]  # backbone layers only
    layer_kinds: tuple[str, ...]  # 'swa' | 'csa' | 'hca' per backbone layer
    hash_layer_ids: tuple[int, ...]
    index_n_heads: int
    index_head_dim: int
    index_topk: int
    n_routed_experts: int
    n_shared_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    rope_theta: float = 10000.0
    compress_rope_theta: float = 160000.0
    rope_scaling: RopeScaling | None = field(default_factory=RopeScaling)
    scoring_func: str = "sqrtsoftplus"
    routed_scaling_factor: float = 1.5
    swiglu_limit: float = 10.0
    rms_norm_eps: float = 1e-6
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1e-6
    source: str = "<dict>"
    model_type: str = "deepseek_v4"

    @property
    def ratios(self) -> tuple[int, ...]:
        return self.compress_ratios


_REQUIRED_INT = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "head_dim", "q_lora_rank",
                 "o_groups", "o_lora_rank", "sliding_window", "index_n_heads", "index_head_dim", "index_topk",
                 "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size")
_OPTIONAL = {"n_shared_experts": int, "rope_theta": float, "compress_rope_theta": float, "scoring_func": str,
             "routed_scaling_factor": float, "swiglu_limit": float, "rms_norm_eps": float, "hc_mult": int,
             "hc_sinkhorn_iters": int, "hc_eps": float}


def is_v4_document(document) -> bool:
    return isinstance(document, dict) and document.get("model_type") in V4_MODEL_TYPES


def config_v4_from_dict(document: dict, source: str = "<dict>") -> ConfigV4:
    """A validated ConfigV4 from a deepseek_v4 config.json object; ConfigError names the file and field."""
    if not is_v4_document(document):
        raise ConfigError(f"{source}: model_type {document.get('model_type')!r} is not deepseek_v4")
    values = {name: _number(document, name, int, source) for name in _REQUIRED_INT}
    for name, kind in _OPTIONAL.items():
        if name in document:
            values[name] = _number(document, name, kind, source)
    values["qk_rope_head_dim"] = _rope_dim(document, values["head_dim"], source)
    n = values["num_hidden_layers"]
    values["compress_ratios"], values["layer_kinds"] = _schedule(document, n, source)
    values["hash_layer_ids"] = _hash_layers(document, n, source)
    values["rope_scaling"], thetas = _rope(document, source)
    values.update(thetas)
    config = ConfigV4(source=source, **values)
    validate_v4(config)
    return config


def load_config_v4(path: str | pathlib.Path) -> ConfigV4:
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / "config.json"
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"config file {path} is not readable JSON: {error}") from error
    return config_v4_from_dict(document, str(path))


def _number(document: dict, name: str, kind, source: str):
    if name not in document:
        raise ConfigError(f"{source}: required field {name!r} is missing")
    value = document[name]
    if kind is int and type(value) is not int:
        raise ConfigError(f"{source}: field {name!r} must be an integer, got {value!r}")
    if kind is float and type(value) not in (int, float):
        raise ConfigError(f"{source}: field {name!r} must be a number, got {value!r}")
    if kind is str and not isinstance(value, str):
        raise ConfigError(f"{source}: field {name!r} must be a string, got {value!r}")
    return kind(value)


def _rope_dim(document: dict, head_dim: int, source: str) -> int:
    """`qk_rope_head_dim` (released) or `partial_rotary_factor`·head_dim (transformers); 64 by default."""
    if "qk_rope_head_dim" in document:
        return _number(document, "qk_rope_head_dim", int, source)
    factor = document.get("partial_rotary_factor")
    return int(head_dim * factor) if factor else 64


def _schedule(document: dict, n: int, source: str) -> tuple[tuple[int, ...], tuple[str, ...]]:
    """(ratio, kind) per backbone layer from `layer_types` + `compress_rates` (transformers) or the released
    `compress_ratios` (the CSA ratio is 4 -- the official code gives the overlap and the indexer to ratio 4 only --
    or compress_rates' CSA entry when present; every other non-zero ratio is HCA)."""
    rates = document.get("compress_rates") or {}
    csa = int(rates.get(CSA_TYPE, DEFAULT_CSA_RATIO))
    hca = int(rates.get(HCA_TYPE, DEFAULT_HCA_RATIO))
    types = document.get("layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) < n or any(t not in _KIND_OF_TYPE for t in types[:n]):
            raise ConfigError(f"{source}: layer_types must list {n} of {sorted(_KIND_OF_TYPE)}")
        kinds = tuple(_KIND_OF_TYPE[t] for t in types[:n])
        return tuple({"swa": 0, "csa": csa, "hca": hca}[k] for k in kinds), kinds
    ratios = document.get("compress_ratios")
    if not isinstance(ratios, list) or len(ratios) < n or any(type(r) is not int or r < 0 for r in ratios[:n]):
        raise ConfigError(f"{source}: compress_ratios must list {n} non-negative integers (or give layer_types)")
    ratios = tuple(ratios[:n])
    return ratios, tuple("swa" if r == 0 else "csa" if r == csa else "hca" for r in ratios)


def _hash_layers(document: dict, n: int, source: str) -> tuple[int, ...]:
    """Layers routed by tid2eid: `mlp_layer_types` 'hash_moe' entries, else the first `num_hash_layers` (3)."""
    types = document.get("mlp_layer_types")
    if types is not None:
        if not isinstance(types, list) or len(types) < n or any(t not in ("hash_moe", "moe") for t in types[:n]):
            raise ConfigError(f"{source}: mlp_layer_types must list {n} of 'hash_moe' / 'moe'")
        return tuple(i for i, t in enumerate(types[:n]) if t == "hash_moe")
    count = document.get("num_hash_layers", DEFAULT_HASH_LAYERS)
    if type(count) is not int or count < 0:
        raise ConfigError(f"{source}: field 'num_hash_layers' must be a non-negative integer, got {count!r}")
    return tuple(range(min(count, n)))


def _rope(document: dict, source: str) -> tuple[RopeScaling | None, dict]:
    """YaRN of the compressed layers from `rope_scaling` (released) or transformers' nested `rope_parameters`
    {'main': ..., 'compress': ...}, whose thetas then override `rope_theta` / `compress_rope_theta`."""
    nested = document.get("rope_parameters")
    if isinstance(nested, dict) and isinstance(nested.get("compress"), dict):
        compress, main = nested["compress"], nested.get("main") or {}
        thetas = {name: float(part["rope_theta"]) for name, part in (("compress_rope_theta", compress),
                                                                     ("rope_theta", main)) if "rope_theta" in part}
        if compress.get("rope_type", compress.get("type", "default")) == "default":
            return None, thetas
        return _rope_scaling(compress, source), thetas
    if "rope_scaling" in document:
        return _rope_scaling(document["rope_scaling"], source), {}
    if isinstance(nested, dict) and nested.get("rope_type", nested.get("type")) == "yarn":
        return _rope_scaling(nested, source), {}
    return RopeScaling(), {}


def validate_v4(config: ConfigV4) -> None:
    src = config.source
    for name in _REQUIRED_INT:
        if getattr(config, name) <= 0:
            raise ConfigError(f"{src}: field {name!r} must be positive")
    if config.qk_rope_head_dim % 2 or not 0 < config.qk_rope_head_dim <= min(config.head_dim, config.index_head_dim):
        raise ConfigError(f"{src}: qk_rope_head_dim must be even and fit head_dim and index_head_dim")
    if config.num_attention_heads % config.o_groups:
        raise ConfigError(f"{src}: num_attention_heads must be a multiple of o_groups")
    if config.num_experts_per_tok > config.n_routed_experts:
        raise ConfigError(f"{src}: num_experts_per_tok exceeds n_routed_experts")
    if config.scoring_func != "sqrtsoftplus":
        raise ConfigError(f"{src}: scoring_func {config.scoring_func!r} is not 'sqrtsoftplus' (V4-Flash)")


@dataclass(frozen=True)
class LayerRoleV4:
    """One V4 layer: kind 'swa' | 'csa' | 'hca', its compress ratio, hash routing, RoPE flavour (§2.3)."""

    index: int
    ratio: int
    kind: str
    is_hash: bool
    rope: str

    @property
    def overlapping(self) -> bool:
        """CSA compressors pool two half-windows (width 2r, stride r); HCA ones one window."""
        return self.kind == "csa"


def layer_plan_v4(config: ConfigV4) -> list[LayerRoleV4]:
    return [LayerRoleV4(i, r, k, i in config.hash_layer_ids, "base" if k == "swa" else "compress")
            for i, (r, k) in enumerate(zip(config.compress_ratios, config.layer_kinds))]


# ---------------------------------------------------------------------------------------------------------
# Record sizes and cache bytes (MODEL.md §2.2 last paragraph, §8.2's V4 estimate)


def kv_row_bytes_v4(config: ConfigV4) -> int:
    """A V4 window row or compressed entry: FP8 non-RoPE channels + UE8M0 per 64 + BF16 RoPE, padded to 8 (584)."""
    from .formats import v4_kv_record_bytes  # noqa: PLC0415 -- config stays free of the number formats otherwise

    return v4_kv_record_bytes(config.head_dim, config.qk_rope_head_dim)


def index_key_bytes_v4(config: ConfigV4) -> int:
    """An MXFP4 index key: half a byte per channel + one E8M0 scale per 32 channels, a partial block included (68
    for 128)."""
    return -(-config.index_head_dim // 2) + -(-config.index_head_dim // 32)


def global_kv_bytes_per_token_v4(config: ConfigV4) -> float:
    """Σ over compressed layers of (entry [+ index key on CSA layers]) / ratio: ≈3514 for V4-Flash."""
    per_layer = (kv_row_bytes_v4(config) + (index_key_bytes_v4(config) if kind == "csa" else 0)
                 for kind in config.layer_kinds if kind != "swa")
    return sum(b / r for b, r in zip(per_layer, [r for r in config.compress_ratios if r]))


def window_bytes_per_session_v4(config: ConfigV4) -> int:
    """Every layer's SWA ring of V4 rows."""
    return config.num_hidden_layers * config.sliding_window * kv_row_bytes_v4(config)
