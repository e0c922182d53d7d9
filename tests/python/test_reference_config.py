"""Config and layer plan of the reference (MODEL.md §1, §2.2, §8.2): the official schedule against the §1.2 table
written out by hand, the §12 schedule, byte figures, rule violations, and agreement with M1's C++ answer
(`flashkv info --json`) for every config under tests/data/configs.
"""

from __future__ import annotations

import json
import pathlib

import pytest

from reference.config import (ConfigError, compressed_entry_bytes, config_from_dict, global_kv_bytes_per_token,
                              index_key_bytes, layer_plan, load_config, window_bytes_per_session, window_row_bytes)
from reference.presets import OFFICIAL, TINY, preset

ROOT = pathlib.Path(__file__).resolve().parents[2]
# deepseek_v4 configs have their own plan (test_reference_v4.py compares those with `flashkv info`)
DATA_CONFIGS = [path for path in sorted((ROOT / "tests/data/configs").glob("*/config.json"))
                if json.loads(path.read_text(encoding="utf-8")).get("model_type") != "deepseek_v4"]


def official_table() -> dict[int, tuple]:
    """MODEL.md §1.2 row by row: layer -> (ratio, mode, kv owner, top-k source)."""
    rows = {0: (0, "swa", -1, -1), 1: (0, "swa", -1, -1)}
    for full in (2, 8, 14):
        rows[full] = (2, "full", full, full)
        for reuse in range(full + 1, full + 6):
            rows[reuse] = (2, "reuse", full, full)
    rows[20] = (1, "full", 20, 20)
    for layer in (21, 22, 23):
        rows[layer] = (1, "reuse", 20, 20)
    for reindex in (24, 28, 32, 36):
        rows[reindex] = (1, "reindex", 20, reindex)
        for reuse in range(reindex + 1, reindex + 4):
            rows[reuse] = (1, "reuse", 20, reindex)
    return rows


def test_official_plan_is_the_section_1_2_table():
    plan = layer_plan(preset("official"))
    assert len(plan) == 40
    table = official_table()
    assert {r.index: (r.ratio, r.mode, r.kv_owner, r.topk_source) for r in plan} == table
    assert [r.index for r in plan if r.pool_source == 20] == [24, 28, 32, 36]
    assert [r.index for r in plan if r.engram_slot >= 0] == [1, 14]
    assert [r.index for r in plan if r.side == "decoder"] == list(range(20, 40))
    assert [r.rope for r in plan] == ["base"] * 2 + ["compress"] * 38


def test_tiny_plan_is_the_section_12_schedule():
    plan = layer_plan(preset("tiny"))
    assert [(r.mode, r.kv_owner, r.topk_source) for r in plan] == [
        ("swa", -1, -1), ("swa", -1, -1), ("full", 2, 2), ("reuse", 2, 2),
        ("full", 4, 4), ("reuse", 4, 4), ("reindex", 4, 6), ("reuse", 4, 6)]
    assert plan[4].is_candidate_source and plan[6].pool_source == 4
    assert [r.engram_slot for r in plan] == [-1, 0, 1, -1, -1, -1, -1, -1]


def test_record_sizes_and_890_bytes_per_token():
    assert (compressed_entry_bytes(512), index_key_bytes(128), window_row_bytes(512)) == (288, 68, 528)
    assert global_kv_bytes_per_token(preset("official")) == 890
    assert window_bytes_per_session(preset("official")) == 40 * 128 * 528


def test_nested_text_config_is_read():
    nested = {"model_type": "deepseek_v41", "vision_config": {}, "text_config": dict(TINY, model_type="x")}
    assert layer_plan(config_from_dict(nested)) == layer_plan(preset("tiny"))


@pytest.mark.parametrize("change, field", [
    ({"kv_source_layer_ids": [1, 4]}, "compress ratio is 0"),
    ({"index_source_layer_ids": [4, 6]}, "not an index source"),
    ({"kv_source_layer_ids": [4], "index_source_layer_ids": [4, 6]}, "no KV source"),
    ({"compress_ratios": [0, 0, 2, 2, 1, 2, 1, 1]}, "ratio"),
    ({"candidate_source_layer_id": 6}, "candidate_source_layer_id"),
    ({"head_dim": 48}, "head_dim"),
    ({"hidden_size": "256"}, "hidden_size"),
    ({"model_type": "llama"}, "model_type"),
])
def test_broken_configs_are_refused_naming_the_rule(change, field):
    with pytest.raises(ConfigError, match=field):
        config_from_dict(dict(TINY, **change), "bad.json")


def test_missing_field_and_file_are_named(tmp_path):
    document = dict(TINY)
    del document["index_topk"]
    with pytest.raises(ConfigError, match="index_topk"):
        config_from_dict(document)
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not readable JSON"):
        load_config(tmp_path)


def test_shipped_official_config_matches_the_spec_values():
    path = ROOT / "tests/data/configs/deepseek-v4.1-flash/config.json"
    assert path.is_file(), f"{path} missing: the official config is part of the repository"
    shipped, spec = load_config(path), config_from_dict(OFFICIAL)
    assert layer_plan(shipped) == layer_plan(spec)
    for name in ("hidden_size", "head_dim", "index_topk", "candidate_topk_blocks", "engram_num_embeddings",
                 "engram_compressed_vocab_size", "swiglu_limit", "rms_norm_eps", "rope_scaling"):
        assert getattr(shipped, name) == getattr(spec, name), name


@pytest.mark.parametrize("path", DATA_CONFIGS, ids=lambda p: p.parent.name)
def test_plan_and_bytes_agree_with_flashkv_info(path, flashkv_info):
    info = flashkv_info(path)
    config = load_config(path)
    ours = [{"index": r.index, "ratio": r.ratio, "mode": r.mode, "kv_owner": _ref(r.kv_owner),
             "topk_source": _ref(r.topk_source), "candidate_pool_source": _ref(r.pool_source),
             "is_kv_source": r.is_kv_source, "is_index_source": r.is_index_source,
             "is_candidate_source": r.is_candidate_source, "engram": r.engram_slot >= 0, "side": r.side,
             "rope": {"base": "base", "compress": "compress_yarn"}[r.rope]} for r in layer_plan(config)]
    assert [{k: layer[k] for k in ours[0]} for layer in info["layers"]] == ours
    assert info["global_kv_bytes_per_token"] == global_kv_bytes_per_token(config)
    assert info["kv_entry_bytes"] == compressed_entry_bytes(config.head_dim)
    assert info["index_key_bytes"] == index_key_bytes(config.index_head_dim)
    assert info["window_row_bytes"] == window_row_bytes(config.head_dim)
    assert info["window_bytes_per_session"] == window_bytes_per_session(config)
    if path.parent.name == "deepseek-v4.1-flash":
        assert info["global_kv_bytes_per_token"] == 890


def _ref(layer: int):
    return None if layer < 0 else layer
