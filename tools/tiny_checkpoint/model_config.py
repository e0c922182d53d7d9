"""The config side of the generator: the numpy reference's reading of config.json and its layer plan and Engram
prime rule (tests/reference/config.py, engram.py: one statement of MODEL.md §1.2 and §7 for both; config_v4.py for
model_type `deepseek_v4`), plus the few limits the checkpoint storage formats add.
"""

from __future__ import annotations

import json
import pathlib

from tests.reference import config as reference_config
from tests.reference import config_v4 as reference_config_v4
from tests.reference import engram as reference_engram

from .errors import TinyCheckpointError

Config = reference_config.Config
LayerRole = reference_config.LayerRole
layer_plan = reference_config.layer_plan
ConfigV4 = reference_config_v4.ConfigV4
LayerRoleV4 = reference_config_v4.LayerRoleV4
layer_plan_v4 = reference_config_v4.layer_plan_v4


def is_v4(config) -> bool:
    """True for a DeepSeek-V4-Flash (deepseek_v4) config."""
    return isinstance(config, ConfigV4)

_POSITIVE_FIELDS = (
    "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "head_dim", "qk_rope_head_dim",
    "q_lora_rank", "o_groups", "o_lora_rank", "sliding_window", "index_n_heads", "index_head_dim", "index_topk",
    "n_routed_experts", "num_experts_per_tok", "moe_intermediate_size", "hc_mult",
)  # fmt: skip


def load_config(path: pathlib.Path) -> Config | ConfigV4:
    """Read and validate the config.json at `path`; TinyCheckpointError naming the file and field at fault."""
    try:
        if _is_v4_file(path):
            config = reference_config_v4.load_config_v4(path)
        else:
            config = reference_config.load_config(path)
            reference_engram.check_table_rows(config)
    except (reference_config.ConfigError, reference_engram.EngramError) as error:
        raise TinyCheckpointError(str(error)) from error
    _check_storage_limits(config)
    return config


def _is_v4_file(path: pathlib.Path) -> bool:
    try:
        document = json.loads(pathlib.Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False  # the V4.1 reader reports the file
    return reference_config_v4.is_v4_document(document)


def _check_storage_limits(config: Config | ConfigV4) -> None:
    def require(condition: bool, message: str) -> None:
        if not condition:
            raise TinyCheckpointError(f"{config.source}: {message}")

    for name in _POSITIVE_FIELDS:
        value = getattr(config, name)
        require(value > 0, f"field {name!r} must be a positive integer, got {value}")
    shared = config.n_shared_experts
    require(shared == 1, f"n_shared_experts must be 1 for DeepSeek-V4.1, got {shared}")
    require(
        config.num_experts_per_tok <= config.n_routed_experts,
        f"num_experts_per_tok ({config.num_experts_per_tok}) exceeds n_routed_experts ({config.n_routed_experts})",
    )
    # Routed experts are MXFP4: one E8M0 scale per 32 input columns of w1/w3 (hidden) and of w2 (intermediate).
    for name in ("hidden_size", "moe_intermediate_size"):
        value = getattr(config, name)
        require(value % 32 == 0, f"{name} ({value}) must be a multiple of 32 (MXFP4 expert scale blocks)")
    if not is_v4(config) and config.engram_layer_ids:
        require(config.engram_head_dim > 0, f"engram_head_dim must be positive, got {config.engram_head_dim}")
