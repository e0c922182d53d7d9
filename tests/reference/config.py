"""Model configuration and layer plan of the numpy reference (MODEL.md §1, §2.2, §8.2).

`Config` holds the text fields of a V4.1 config.json (nested `text_config` or flat). `layer_plan` derives the role
of every layer from the rules of §1.2 -- nothing here knows the official 40-layer schedule. The record sizes and
the global KV bytes per token (§2.2, §8.2) are computed from channel counts.
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass, field, fields

V41_MODEL_TYPES = ("deepseek_v41", "deepseek_v41_text")


class ConfigError(ValueError):
    """A config.json that is unreadable or breaks a rule of MODEL.md §1; the message names file and field."""


@dataclass(frozen=True)
class RopeScaling:
    """YaRN of the compress RoPE (§2.3): frequency-only, no attention mscale."""

    factor: float = 16.0
    original_max_position_embeddings: int = 65536
    beta_fast: float = 32.0
    beta_slow: float = 1.0


@dataclass(frozen=True)
class Config:
    """The text model of a deepseek_v41 checkpoint (§1.1 field names; defaults are the V4.1-Flash constants)."""

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
    compress_ratios: tuple[int, ...]
    kv_source_layer_ids: tuple[int, ...]
    index_source_layer_ids: tuple[int, ...]
    index_n_heads: int
    index_head_dim: int
    index_topk: int
    n_routed_experts: int
    n_shared_experts: int
    num_experts_per_tok: int
    moe_intermediate_size: int
    candidate_source_layer_id: int = -1
    candidate_topk_blocks: int = 0
    candidate_block_size: int = 1
    rope_theta: float = 10000.0
    compress_rope_theta: float = 160000.0
    rope_scaling: RopeScaling | None = field(default_factory=RopeScaling)
    scoring_func: str = "sqrtsoftplus"
    routed_scaling_factor: float = 1.5
    swiglu_limit: float = 10.0
    rms_norm_eps: float = 1e-20
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1e-6
    engram_layer_ids: tuple[int, ...] = ()
    engram_num_embeddings: tuple[int, ...] = ()
    engram_max_ngram_size: int = 0
    engram_n_heads: int = 0
    engram_head_dim: int = 0
    engram_vocab_size: int = 0
    engram_compressed_vocab_size: int = 0
    engram_pad_token_id: int = 2
    source: str = "<dict>"

    @property
    def ratios(self) -> tuple[int, ...]:
        """Backbone compress ratios (compress_ratios also lists the DSpark stages after the backbone)."""
        return self.compress_ratios[: self.num_hidden_layers]

    @property
    def engram_columns(self) -> int:
        """Hash columns of one Engram layer: one per (n-gram size 2..max, head) (§7 step 5)."""
        return (self.engram_max_ngram_size - 1) * self.engram_n_heads


_REQUIRED_INT = (
    "vocab_size",
    "hidden_size",
    "num_hidden_layers",
    "num_attention_heads",
    "head_dim",
    "qk_rope_head_dim",
    "q_lora_rank",
    "o_groups",
    "o_lora_rank",
    "sliding_window",
    "index_n_heads",
    "index_head_dim",
    "index_topk",
    "n_routed_experts",
    "n_shared_experts",
    "num_experts_per_tok",
    "moe_intermediate_size",
)


def config_from_dict(document: dict, source: str = "<dict>") -> Config:
    """Builds a validated Config from a config.json object; fields of `text_config` override top-level ones."""
    if not isinstance(document, dict):
        raise ConfigError(f"{source}: top level must be a JSON object")
    model_type = document.get("model_type", "deepseek_v41")
    if model_type not in V41_MODEL_TYPES:
        raise ConfigError(f"{source}: model_type {model_type!r} is not a DeepSeek-V4.1 text model")
    text = dict(document)
    nested = document.get("text_config")
    if nested is not None:
        if not isinstance(nested, dict):
            raise ConfigError(f"{source}: text_config must be a JSON object")
        text.update(nested)
    known = {f.name for f in fields(Config)}
    values = {}
    for name in known - {"source", "rope_scaling"}:
        if name in text:
            values[name] = _typed_field(text[name], name, source)
    for name in _REQUIRED_INT:
        if name not in values:
            raise ConfigError(f"{source}: required field {name!r} is missing")
    for name in ("compress_ratios", "kv_source_layer_ids", "index_source_layer_ids"):
        if name not in values:
            raise ConfigError(f"{source}: required field {name!r} is missing")
    values["rope_scaling"] = _rope_scaling(text.get("rope_scaling", {}), source)
    if values.get("engram_layer_ids") and not values.get("engram_compressed_vocab_size"):
        values["engram_compressed_vocab_size"] = values["vocab_size"]  # no compression: identity map (NeMo)
    config = Config(source=source, **values)
    validate(config)
    return config


def load_config(path: str | pathlib.Path) -> Config:
    """Reads `path` (a config.json, or a directory holding one) and validates it."""
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ConfigError(f"config file {path} does not exist")
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ConfigError(f"config file {path} is not readable JSON: {error}") from error
    return config_from_dict(document, str(path))


def _typed_field(value, name: str, source: str):
    """`value` checked against the annotated type of Config.<name>."""
    kind = next(f.type for f in fields(Config) if f.name == name)
    if kind == "tuple[int, ...]":
        if not isinstance(value, list) or any(type(v) is not int for v in value):
            raise ConfigError(f"{source}: field {name!r} must be a list of integers, got {value!r}")
        return tuple(value)
    if kind == "int":
        if type(value) is not int:
            raise ConfigError(f"{source}: field {name!r} must be an integer, got {value!r}")
        return value
    if kind == "float":
        if type(value) not in (int, float):
            raise ConfigError(f"{source}: field {name!r} must be a number, got {value!r}")
        return float(value)
    if not isinstance(value, str):
        raise ConfigError(f"{source}: field {name!r} must be a string, got {value!r}")
    return value


def _rope_scaling(value, source: str) -> RopeScaling | None:
    if value is None or value == {}:
        return RopeScaling() if value == {} else None
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: field 'rope_scaling' must be an object")
    kind = value.get("rope_type", value.get("type", "yarn"))
    if kind != "yarn":
        raise ConfigError(f"{source}: rope_scaling type {kind!r} is not 'yarn' (MODEL.md §2.3)")
    return RopeScaling(
        factor=float(value.get("factor", 16.0)),
        original_max_position_embeddings=int(value.get("original_max_position_embeddings", 65536)),
        beta_fast=float(value.get("beta_fast", 32.0)),
        beta_slow=float(value.get("beta_slow", 1.0)),
    )


def validate(config: Config) -> None:
    """Checks the shape rules the reference relies on; raises ConfigError naming the field."""
    src = config.source
    n = config.num_hidden_layers
    if len(config.compress_ratios) < n:
        raise ConfigError(f"{src}: compress_ratios has {len(config.compress_ratios)} entries, need {n}")
    if any(r < 0 for r in config.ratios):
        raise ConfigError(f"{src}: compress_ratios must be >= 0")
    if config.qk_rope_head_dim % 2 or config.qk_rope_head_dim > min(config.head_dim, config.index_head_dim):
        raise ConfigError(f"{src}: qk_rope_head_dim must be even and fit head_dim and index_head_dim")
    if config.num_attention_heads % config.o_groups:
        raise ConfigError(f"{src}: num_attention_heads must be a multiple of o_groups")
    for name, width, block in (("head_dim", config.head_dim, 32), ("index_head_dim", config.index_head_dim, 32)):
        if width % block:
            raise ConfigError(f"{src}: {name} = {width} is not a multiple of the quantizer block {block}")
    if config.candidate_source_layer_id >= 0 and min(config.candidate_block_size, config.candidate_topk_blocks) <= 0:
        raise ConfigError(f"{src}: candidate_block_size and candidate_topk_blocks must be positive")
    for name in _REQUIRED_INT:
        if getattr(config, name) <= 0 and name != "n_shared_experts":
            raise ConfigError(f"{src}: field {name!r} must be positive")
    if config.engram_layer_ids:
        if len(config.engram_num_embeddings) != len(config.engram_layer_ids):
            raise ConfigError(f"{src}: engram_num_embeddings must have one entry per engram_layer_ids entry")
        if config.engram_max_ngram_size < 2 or config.engram_n_heads < 1 or config.engram_head_dim < 1:
            raise ConfigError(f"{src}: engram_max_ngram_size >= 2, engram_n_heads and engram_head_dim >= 1")
        if not 0 <= config.engram_pad_token_id < config.vocab_size:
            raise ConfigError(f"{src}: engram_pad_token_id outside the vocabulary")
        if any(not 0 <= i < n for i in config.engram_layer_ids):
            raise ConfigError(f"{src}: engram_layer_ids must name backbone layers")
    layer_plan(config)  # raises on a broken schedule rule


# ---------------------------------------------------------------------------------------------------------
# Layer plan (§1.2)


@dataclass(frozen=True)
class LayerRole:
    """What one layer computes, stores and reads (§1.2, §5.6).

    mode: 'swa' | 'full' | 'reindex' | 'reuse'. kv_owner / topk_source / pool_source: layer ids, -1 if none.
    side: 'encoder' | 'decoder' (§8.1; decoder = layers at or after the candidate source). rope: 'base' |
    'compress' (§2.3). engram_slot: index into engram_layer_ids, -1 without Engram.
    """

    index: int
    ratio: int
    mode: str
    kv_owner: int
    topk_source: int
    pool_source: int
    is_kv_source: bool
    is_index_source: bool
    is_candidate_source: bool
    engram_slot: int
    side: str
    rope: str


def layer_plan(config: Config) -> list[LayerRole]:
    """Roles of all backbone layers by the general rules of §1.2; ConfigError if a rule is broken."""
    src = config.source
    n = config.num_hidden_layers
    ratios = config.ratios
    kv_sources = sorted(set(config.kv_source_layer_ids))
    index_sources = sorted(set(config.index_source_layer_ids))
    candidate = config.candidate_source_layer_id
    for name, ids in (("kv_source_layer_ids", kv_sources), ("index_source_layer_ids", index_sources)):
        for layer in ids:
            if not 0 <= layer < n:
                raise ConfigError(f"{src}: {name} names layer {layer}, outside 0..{n - 1}")
            if ratios[layer] == 0:
                raise ConfigError(f"{src}: {name} names layer {layer}, whose compress ratio is 0")
    for layer in kv_sources:
        if layer not in index_sources:
            raise ConfigError(f"{src}: KV source {layer} is not an index source (§1.2: a KV source always is)")
    if candidate >= 0 and candidate not in kv_sources:
        raise ConfigError(f"{src}: candidate_source_layer_id {candidate} is not a KV source")
    roles = []
    for layer in range(n):
        roles.append(_role(config, layer, kv_sources, index_sources))
    return roles


def _latest_at_or_below(ids: list[int], layer: int) -> int:
    below = [i for i in ids if i <= layer]
    return below[-1] if below else -1


def _role(config: Config, layer: int, kv_sources: list[int], index_sources: list[int]) -> LayerRole:
    src = config.source
    ratio = config.ratios[layer]
    candidate = config.candidate_source_layer_id
    engram_slot = config.engram_layer_ids.index(layer) if layer in config.engram_layer_ids else -1
    side = "decoder" if 0 <= candidate <= layer else "encoder"
    if ratio == 0:
        return LayerRole(layer, 0, "swa", -1, -1, -1, False, False, False, engram_slot, side, "base")
    kv_owner = _latest_at_or_below(kv_sources, layer)
    topk_source = _latest_at_or_below(index_sources, layer)
    if kv_owner < 0:
        raise ConfigError(f"{src}: layer {layer} has ratio {ratio} but no KV source at or below it")
    if config.ratios[kv_owner] != ratio:
        raise ConfigError(f"{src}: layer {layer} (ratio {ratio}) would read KV source {kv_owner} of ratio "
                          f"{config.ratios[kv_owner]}")
    if _latest_at_or_below(kv_sources, topk_source) != kv_owner:
        raise ConfigError(f"{src}: layer {layer} would use the top-k of layer {topk_source}, which indexes another "
                          f"KV source than its own ({kv_owner})")
    is_kv_source = layer in kv_sources
    is_index_source = layer in index_sources
    mode = "full" if is_kv_source else "reindex" if is_index_source else "reuse"
    pool_source = -1
    if is_index_source and 0 <= candidate < layer:
        if kv_owner != candidate:
            raise ConfigError(f"{src}: index source {layer} after the candidate source {candidate} reads KV source "
                              f"{kv_owner}; its candidate pool would index another cache")
        pool_source = candidate
    return LayerRole(layer, ratio, mode, kv_owner, topk_source, pool_source, is_kv_source, is_index_source,
                     layer == candidate, engram_slot, side, "compress")


# ---------------------------------------------------------------------------------------------------------
# Record sizes (§2.2) and cache bytes (§8.2)


def window_row_bytes(head_dim: int) -> int:
    """FP8 E4M3 window row: one byte per channel + one UE8M0 scale per 32 channels (528 for 512)."""
    return head_dim + head_dim // 32


def compressed_entry_bytes(head_dim: int) -> int:
    """NVFP4 compressed entry: half a byte per channel + one E4M3 scale per 16 channels (288 for 512)."""
    return head_dim // 2 + head_dim // 16


def index_key_bytes(index_head_dim: int) -> int:
    """MXFP4 index key: half a byte per channel + one E8M0 scale per 32 channels (68 for 128)."""
    return index_head_dim // 2 + index_head_dim // 32


def global_kv_bytes_per_token(config: Config) -> float:
    """Σ over KV sources of (entry + index key) / ratio: 890 for the official config (§8.2)."""
    per_entry = compressed_entry_bytes(config.head_dim) + index_key_bytes(config.index_head_dim)
    return sum(per_entry / config.ratios[layer] for layer in sorted(set(config.kv_source_layer_ids)))


def window_bytes_per_session(config: Config) -> int:
    """Every layer's SWA ring: layers × sliding_window × window row (≈2.7 MB official)."""
    return config.num_hidden_layers * config.sliding_window * window_row_bytes(config.head_dim)


def hc_mixer_width(config: Config) -> int:
    """Rows of hc_*_fn: hc pre + hc post + hc×hc combination logits (24 for hc_mult 4)."""
    return (2 + config.hc_mult) * config.hc_mult
