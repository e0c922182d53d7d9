"""`flashkv info PATH [--json]`: output shape (text and JSON), agreement of the two, byte figures computed here
from the config file (MODEL.md §2.2 record sizes), and the error contract (exit 1 with one line naming the
file/field; exit 2 for usage errors)."""

from __future__ import annotations

import json
import os
import pathlib
import random
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "data" / "configs"
NAMES = ["deepseek-v4.1-flash", "tiny-v41", "tiny-v41-alt"]
SEED = int.from_bytes(os.urandom(4), "little")


def run(cli, *args):
    return subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True, timeout=60)


def text_config(name):
    document = json.loads((CONFIGS / name / "config.json").read_text())
    return document.get("text_config", document)


def expected_bytes(cfg):
    """Record sizes from the channel counts (MODEL.md §2.2) and the per-token / per-session sums (§8.2)."""
    hd, ihd = cfg["head_dim"], cfg["index_head_dim"]
    entry, key, row = hd // 2 + hd // 16, ihd // 2 + ihd // 32, hd + hd // 32
    ratios = cfg["compress_ratios"]
    per_token = sum((entry + key) / ratios[layer] for layer in cfg["kv_source_layer_ids"])
    window = cfg["num_hidden_layers"] * cfg["sliding_window"] * row
    return entry, key, row, per_token, window


@pytest.mark.parametrize("name", NAMES)
def test_json_report_has_the_documented_keys_and_byte_figures(cli, name):
    result = run(cli, "info", CONFIGS / name / "config.json", "--json")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    info = json.loads(result.stdout)
    cfg = text_config(name)
    assert info["is_checkpoint_dir"] is False
    assert info["tensors"] == []
    assert len(info["layers"]) == cfg["num_hidden_layers"]
    for index, layer in enumerate(info["layers"]):
        assert {"index", "ratio", "mode", "kv_owner", "topk_source", "engram", "side"} <= layer.keys()
        assert layer["index"] == index
        assert layer["ratio"] == cfg["compress_ratios"][index]
        assert layer["mode"] in ("swa", "full", "reindex", "reuse")
        assert layer["side"] in ("encoder", "decoder")
        assert layer["engram"] == (index in cfg["engram_layer_ids"])
        if layer["ratio"] == 0:
            assert layer["mode"] == "swa" and layer["kv_owner"] is None and layer["topk_source"] is None
    entry, key, row, per_token, window = expected_bytes(cfg)
    assert (info["kv_entry_bytes"], info["index_key_bytes"], info["window_row_bytes"]) == (entry, key, row)
    assert info["global_kv_bytes_per_token"] == per_token
    assert info["window_bytes_per_session"] == window
    assert info["config"]["compress_ratios"] == cfg["compress_ratios"]


def test_official_figures_are_890_and_40_x_128_x_528(cli):
    info = json.loads(run(cli, "info", CONFIGS / "deepseek-v4.1-flash" / "config.json", "--json").stdout)
    assert info["global_kv_bytes_per_token"] == 890
    assert isinstance(info["global_kv_bytes_per_token"], int)
    assert info["window_bytes_per_session"] == 40 * 128 * 528
    assert info["num_dspark_stages"] == 3
    assert info["first_decoder_layer"] == 20


PLAN_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(swa|full|reindex|reuse)\s+(\S+)\s+(\S+)\s+(\S+)\s+(encoder|decoder)\s+"
                      r"(base|compress_yarn)\s*(.*)$")


@pytest.mark.parametrize("name", NAMES)
def test_text_report_shows_the_plan_table_and_memory_lines(cli, name):
    result = run(cli, "info", CONFIGS / name / "config.json")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    info = json.loads(run(cli, "info", CONFIGS / name / "config.json", "--json").stdout)
    assert "layer plan:" in text
    assert re.search(r"^layer ratio mode\s+kv_owner topk_source pool_source side\s+rope\s+roles$", text, re.M)
    rows = [PLAN_ROW.match(line) for line in text.splitlines()]
    rows = [m for m in rows if m]
    assert len(rows) == len(info["layers"])

    def ref(value):
        return "-" if value is None else str(value)

    for match, layer in zip(rows, info["layers"]):
        assert match.groups()[:8] == (str(layer["index"]), str(layer["ratio"]), layer["mode"], ref(layer["kv_owner"]),
                                      ref(layer["topk_source"]), ref(layer["candidate_pool_source"]), layer["side"],
                                      layer["rope"])
        assert ("engram" in match.group(9).split()) == layer["engram"]
    per_token = info["global_kv_bytes_per_token"]
    assert f"global KV bytes/token: {per_token:g}\n" in text
    assert f"window bytes/session: {info['window_bytes_per_session']} " in text
    assert "tensors: none (PATH is a config file)" in text
    if name == "deepseek-v4.1-flash":
        assert "global KV bytes/token: 890\n" in text
        assert "CED boundary: encoder layers 0-19, decoder layers 20-39" in text


def test_a_checkpoint_directory_is_read_through_its_config(cli, tmp_path):
    shutil.copy(CONFIGS / "tiny-v41" / "config.json", tmp_path / "config.json")
    info = json.loads(run(cli, "info", tmp_path, "--json").stdout)
    assert info["is_checkpoint_dir"] is True
    assert info["config_path"] == str(tmp_path / "config.json")
    assert isinstance(info["tensors"], list)


def assert_one_line_error(result, *fragments):
    assert result.returncode == 1
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def test_missing_path_fails_naming_it(cli, tmp_path):
    absent = tmp_path / "nowhere" / "config.json"
    assert_one_line_error(run(cli, "info", absent), str(absent))
    assert_one_line_error(run(cli, "info", tmp_path), str(tmp_path), "config.json")


def test_bad_json_fails_naming_file_and_position(cli, tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{\n  "model_type": "deepseek_v41",\n  "text_config": {,}\n}\n')
    assert_one_line_error(run(cli, "info", path, "--json"), str(path), "line 3")


POSITIVE_FIELDS = ["vocab_size", "hidden_size", "num_attention_heads", "head_dim", "q_lora_rank", "o_lora_rank",
                   "sliding_window", "index_n_heads", "index_topk", "n_routed_experts", "moe_intermediate_size",
                   "hc_mult", "o_groups"]


@pytest.mark.parametrize("name", ["tiny-v41", "tiny-v41-alt"])
def test_a_randomly_broken_field_fails_naming_the_field(cli, tmp_path, name):
    rng = random.Random(SEED)
    field = rng.choice(POSITIVE_FIELDS)
    value = -rng.randint(0, 1000)
    document = json.loads((CONFIGS / name / "config.json").read_text())
    document["text_config"][field] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    result = run(cli, "info", path)
    print(f"seed {SEED}: {field} = {value}")
    assert_one_line_error(result, str(path), f"'{field}' = {value}")


def test_a_broken_schedule_fails_naming_both_layers(cli, tmp_path):
    document = json.loads((CONFIGS / "tiny-v41" / "config.json").read_text())
    document["text_config"]["compress_ratios"][3] = 1  # layer 3 (ratio 1) would read layer 2's ratio-2 cache
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    assert_one_line_error(run(cli, "info", path), "layer 3", "layer 2", "compress_ratios")


@pytest.mark.parametrize("args, message", [
    (["info"], "missing PATH"),
    (["info", "a.json", "--yaml"], "unknown option '--yaml'"),
    (["info", "a.json", "b.json"], "more than one PATH"),
    (["frobnicate"], "unknown command 'frobnicate'"),
])
def test_usage_errors_exit_2(cli, args, message):
    result = run(cli, *args)
    assert result.returncode == 2
    assert message in result.stderr


def test_help_and_version(cli):
    result = run(cli, "--help")
    assert result.returncode == 0
    assert "usage: flashkv info PATH [--json]" in result.stdout
    version = re.search(r"project\(flashkv VERSION (\S+)", (ROOT / "CMakeLists.txt").read_text()).group(1)
    result = run(cli, "--version")
    assert result.returncode == 0
    assert result.stdout == f"flashkv {version}\n"
