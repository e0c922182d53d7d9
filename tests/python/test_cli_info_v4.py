"""`flashkv info` on DeepSeek-V4-Flash (model_type `deepseek_v4`): the released config, the tiny-v4 preset, a
generated tiny-v4 checkpoint and the golden checkpoints written by HF transformers.

Oracles: the layer kinds and byte figures are recomputed here from the config file alone (ratio 0 = SWA, 4 =
CSA, other = HCA; MODEL.md §2.2 / §8.2 V4 records: FP8 non-RoPE channels + one scale per 64 + BF16 RoPE channels,
padded to 8 bytes; MXFP4 index keys on CSA layers); the tensor list is compared with the tool's inventory
(tools/tiny_checkpoint/inventory_v4.py) and with the golden checkpoints' own safetensors headers (written through
transformers' conversion mapping, tools/make_v4_golden.py); problems are put into a copy of a checkpoint here.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import pytest
from safetensors import safe_open
from safetensors.numpy import save_file
from test_loader_inventory import remove_tensor  # header surgery on a copy of a checkpoint
from tiny_checkpoint_tool import make_tiny_checkpoint

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "data" / "configs"
GOLDEN = ROOT / "tests" / "data" / "golden" / "v4"
SEED = int.from_bytes(os.urandom(4), "little")


def run(cli, *args):
    return subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True, timeout=60)


def info_json(cli, path):
    result = run(cli, "info", path, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def kind_of(ratio):
    return "swa" if ratio == 0 else "csa" if ratio == 4 else "hca"


def expected_memory(cfg):
    nope, rope = cfg["head_dim"] - cfg["qk_rope_head_dim"], cfg["qk_rope_head_dim"]
    record = math.ceil((nope + math.ceil(nope / 64) + 2 * rope) / 8) * 8
    ihd = cfg["index_head_dim"]
    key = math.ceil(ihd / 2) + math.ceil(ihd / 32)
    ratios = cfg["compress_ratios"][: cfg["num_hidden_layers"]]
    per_token = sum((record + (key if r == 4 else 0)) / r for r in ratios if r)
    return record, key, per_token, cfg["num_hidden_layers"] * cfg["sliding_window"] * record


V4_CONFIGS = [CONFIGS / "deepseek-v4-flash" / "config.json", CONFIGS / "tiny-v4" / "config.json"]
V4_CONFIGS += sorted(GOLDEN.glob("*/config.json"))


@pytest.mark.parametrize("path", V4_CONFIGS, ids=lambda p: p.parent.name)
def test_json_plan_and_memory_follow_the_config(cli, path):
    cfg = json.loads(path.read_text())
    info = info_json(cli, path)
    assert info["config"]["family"] == "deepseek_v4"
    assert info["has_hc_head"] is True
    hash_layers = cfg.get("num_hash_layers", 3)
    assert len(info["layers"]) == cfg["num_hidden_layers"]
    for index, layer in enumerate(info["layers"]):
        ratio = cfg["compress_ratios"][index]
        kind = kind_of(ratio)
        assert (layer["ratio"], layer["mode"]) == (ratio, kind), index
        assert layer["is_kv_source"] == (kind != "swa")
        assert layer["is_index_source"] == (kind == "csa")
        assert layer["kv_owner"] == (None if kind == "swa" else index)
        assert layer["topk_source"] == (index if kind == "csa" else None)
        assert layer["overlapping_compressor"] == layer["indexer_has_compressor"] == (kind == "csa")
        assert layer["hash_routed"] == (index < hash_layers)
        assert layer["rope"] == ("base" if kind == "swa" else "compress_yarn")
    record, key, per_token, window = expected_memory(cfg)
    assert info["kv_entry_bytes"] == record
    assert info["window_row_bytes"] == record
    assert info["index_key_bytes"] == key
    assert info["global_kv_bytes_per_token"] == pytest.approx(per_token)
    assert info["window_bytes_per_session"] == window


def test_official_text_report_shows_the_v4_plan_and_3514_bytes_per_token(cli):
    result = run(cli, "info", CONFIGS / "deepseek-v4-flash" / "config.json")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "model_type: deepseek_v4" in text
    assert "hash-routed layers 3" in text
    assert "kv entry bytes (FP8 + BF16 rope, 512 channels): 584" in text
    assert "global KV bytes/token: 3514.25" in text
    plan = [line.split() for line in text.splitlines() if line[:5].strip().isdigit()]
    assert [(row[0], row[1], row[2]) for row in plan[:4]] == [("0", "0", "swa"), ("1", "0", "swa"),
                                                            ("2", "4", "csa"), ("3", "128", "hca")]
    assert "hash_routed" in " ".join(plan[2]) and "hash_routed" not in " ".join(plan[3])


@pytest.fixture(scope="module")
def tiny_v4(tmp_path_factory) -> pathlib.Path:
    print(f"tiny-v4 checkpoint seed {SEED}")
    return make_tiny_checkpoint(tmp_path_factory.mktemp("tiny-v4") / "ckpt", "tiny-v4", SEED)


def stored_names(directory: pathlib.Path) -> dict[str, tuple[str, list[int]]]:
    names = {}
    for shard in directory.glob("*.safetensors"):
        if shard.name == "golden.safetensors":
            continue
        with safe_open(shard, "np") as f:
            for name in f.keys():
                view = f.get_slice(name)
                names[name] = (view.get_dtype(), view.get_shape())
    return names


def test_generated_tiny_v4_checkpoint_checks_ok_and_lists_the_tool_inventory(cli, tiny_v4):
    sys.path[:0] = [str(ROOT / "tools"), str(ROOT)]
    from tiny_checkpoint import load_config
    from tiny_checkpoint.inventory import checkpoint_inventory

    info = info_json(cli, tiny_v4)
    assert info["check"]["ok"] is True, info["check"]
    listed = {t["name"]: (t["dtype"], t["shape"]) for t in info["tensors"]}
    assert listed == stored_names(tiny_v4)
    specs = checkpoint_inventory(load_config(CONFIGS / "tiny-v4" / "config.json"))
    for spec in specs:
        dtype, shape = listed[spec.name]
        if spec.storage == "fp8_block128":
            assert dtype == "F8_E4M3" and shape == list(spec.shape), spec.name
            scale = listed[spec.name.removesuffix(".weight") + ".scale"]
            assert scale[1] == [math.ceil(spec.shape[0] / 128), math.ceil(spec.shape[1] / 128)], spec.name
        elif spec.storage == "i32":
            assert dtype == "I32" and shape == list(spec.shape), spec.name
    assert any(name.endswith("ffn.gate.tid2eid") for name in listed)
    assert "hc_head_fn" in listed


@pytest.mark.parametrize("directory", sorted(p.parent for p in GOLDEN.glob("*/model.safetensors")),
                         ids=lambda p: p.name)
def test_golden_checkpoints_written_by_transformers_check_ok(cli, directory):
    info = info_json(cli, directory)
    assert info["check"]["ok"] is True, info["check"]
    assert {t["name"] for t in info["tensors"]} == set(stored_names(directory))


def test_problems_in_a_v4_checkpoint_are_named(cli, tiny_v4, tmp_path):
    broken = pathlib.Path(shutil.copytree(tiny_v4, tmp_path / "ckpt"))
    name = "layers.0.ffn.gate.tid2eid"
    remove_tensor(broken, name)
    remove_tensor(broken, "hc_head_scale")
    ids = np.arange(2 * 512, dtype=np.float32).reshape(512, 2) % 8  # an id table stored as floats
    save_file({name: ids}, broken / "extra.safetensors")
    index = json.loads((broken / "model.safetensors.index.json").read_text())
    index["weight_map"][name] = "extra.safetensors"
    (broken / "model.safetensors.index.json").write_text(json.dumps(index))
    result = run(cli, "info", broken)
    assert result.returncode == 0, result.stderr
    assert f"{name}: dtype F32, expected I32 or I64" in result.stdout
    assert "hc_head_scale: missing" in result.stdout
