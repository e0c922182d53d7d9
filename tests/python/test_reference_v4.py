"""The reference's V4 mode (deepseek_v4) beyond the transformers golden data (test_reference_v4_golden.py):

- config.json: the released spelling and transformers' spelling (the golden dirs carry both) give the same config;
  broken fields are named;
- consistency laws on fresh random weights of the tiny_v4 preset (SWA, CSA with its indexer, a ratio-8 HCA layer,
  two hash layers), in faithful numerics -- the golden data only covers clean: prefill + token-by-token decode and
  chunked prefill with odd chunks (windows left open across calls) equal one full forward; also in clean;
- faithful storage: window rows and compressed entries hold FP8 E4M3 non-RoPE channels with a power-of-two scale
  per 64 and BF16 RoPE channels (checked against ml_dtypes directly), index keys are MXFP4 blocks; 584 B per row;
- the plan and cache bytes agree with the C++ config layer (`flashkv info --json`) for every deepseek_v4 config;
- the loader reads V4's 128x128 FP8 tiles and integer tid2eid; the command line runs V4 checkpoints.
"""

from __future__ import annotations

import json
import os
import pathlib

import ml_dtypes
import numpy as np
import pytest

from reference import formats
from reference.compare import compare_logits, relative_error
from reference.compare import main as compare_main
from reference.config import ConfigError
from reference.config_v4 import (config_v4_from_dict, global_kv_bytes_per_token_v4, index_key_bytes_v4,
                                 kv_row_bytes_v4, layer_plan_v4, window_bytes_per_session_v4)
from reference.dumps import Dump
from reference.model import ModelError
from reference.model_v4 import ModelV4
from reference.numerics_v4 import hadamard
from reference.presets import PRESETS, preset
from reference.run import main as run_main
from reference.topk import topk_equivalent
from reference.weights import load_checkpoint
from reference.weights_v4 import random_weights_v4
from reference_calls import run_calls
from tiny_checkpoint_tool import make_tiny_checkpoint

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests/data/golden/v4"
CASES = sorted(path.name for path in GOLDEN.iterdir() if (path / "config.json").is_file())
PROMPT, STEPS = 57, 15  # 57 = 4·14 + 1 and 8·7 + 1: both compressors end the prefill with an open window
SEED = int.from_bytes(os.urandom(4), "little")
E2M1_GRID = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


@pytest.fixture(autouse=True)
def show_seed():
    print(f"seed {SEED}")  # pytest shows it for a failing test


@pytest.fixture(scope="module")
def tiny_v4():
    config = preset("tiny_v4")
    ids = np.random.default_rng(SEED).integers(0, config.vocab_size, PROMPT + STEPS)
    return config, random_weights_v4(config, SEED), ids


# ---------------------------------------------------------------------------------------------------------
# config.json


@pytest.mark.parametrize("name", CASES)
def test_released_and_transformers_spellings_give_the_same_config(name):
    released = json.loads((GOLDEN / name / "config.json").read_text(encoding="utf-8"))
    hf = json.loads((GOLDEN / name / "hf_config.json").read_text(encoding="utf-8"))
    hf.pop("qk_rope_head_dim", None)  # transformers derives it from partial_rotary_factor
    assert "layer_types" in hf and "compress_ratios" in released
    a, b = config_v4_from_dict(released, "released"), config_v4_from_dict(hf, "hf")
    assert {k: v for k, v in vars(a).items() if k != "source"} == {k: v for k, v in vars(b).items() if k != "source"}


@pytest.mark.parametrize("change, field", [
    (lambda d: d.pop("compress_ratios"), "compress_ratios"),
    (lambda d: d.update(compress_ratios=[0, 4]), "compress_ratios"),
    (lambda d: d.update(layer_types=["sliding_attention", "dense"] * 3), "layer_types"),
    (lambda d: d.update(num_hash_layers=-1), "num_hash_layers"),
    (lambda d: d.update(scoring_func="softmax"), "scoring_func"),
    (lambda d: d.pop("index_topk"), "index_topk"),
    (lambda d: d.update(num_attention_heads=5), "o_groups"),
])
def test_a_broken_config_names_the_field(change, field):
    document = json.loads(json.dumps(PRESETS["tiny_v4"]))
    change(document)
    with pytest.raises(ConfigError, match=field):
        config_v4_from_dict(document, "broken.json")


def test_layer_kinds_follow_the_official_ratio_rule():
    """Ratio 4 is CSA (overlap + indexer), any other non-zero ratio HCA, 0 SWA; the first num_hash_layers hash."""
    config = preset("tiny_v4")
    assert config.layer_kinds == ("swa", "csa", "hca", "csa", "swa")
    assert config.hash_layer_ids == (0, 1) and config.rms_norm_eps == 1e-6


def test_official_v4_flash_plan_and_kv_bytes():
    """MODEL.md §1.1/§8.2: 2 SWA layers then 21 CSA and 20 HCA layers alternating, first 3 hash-routed; 584 B rows,
    68 B index keys, 21·(584+68)/4 + 20·584/128 ≈ 3514 B of global KV per token."""
    config = preset("official_v4")
    assert config.layer_kinds[:4] == ("swa", "swa", "csa", "hca") and config.layer_kinds.count("csa") == 21
    assert config.layer_kinds.count("hca") == 20 and set(config.compress_ratios) == {0, 4, 128}
    assert config.hash_layer_ids == (0, 1, 2)
    assert (kv_row_bytes_v4(config), index_key_bytes_v4(config)) == (584, 68)
    assert global_kv_bytes_per_token_v4(config) == 21 * (584 + 68) / 4 + 20 * 584 / 128
    assert round(global_kv_bytes_per_token_v4(config)) == 3514
    assert window_bytes_per_session_v4(config) == 43 * 128 * 584


V4_DATA_CONFIGS = [path for path in sorted((ROOT / "tests/data/configs").glob("*/config.json"))
                   if json.loads(path.read_text(encoding="utf-8")).get("model_type") == "deepseek_v4"]


@pytest.mark.parametrize("path", V4_DATA_CONFIGS + [GOLDEN / name / "config.json" for name in CASES],
                         ids=lambda p: p.parent.name)
def test_plan_and_bytes_agree_with_flashkv_info(path, flashkv_info):
    """The C++ config layer's answer (`flashkv info --json`) for every deepseek_v4 config in the repository."""
    info = flashkv_info(path)
    config = config_v4_from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))
    ours = [{"index": r.index, "ratio": r.ratio, "mode": r.kind, "is_kv_source": r.kind != "swa",
             "is_index_source": r.kind == "csa", "kv_owner": None if r.kind == "swa" else r.index,
             "topk_source": r.index if r.kind == "csa" else None, "hash_routed": r.is_hash,
             "overlapping_compressor": r.overlapping, "indexer_has_compressor": r.kind == "csa",
             "rope": {"base": "base", "compress": "compress_yarn"}[r.rope]} for r in layer_plan_v4(config)]
    assert [{k: layer[k] for k in ours[0]} for layer in info["layers"]] == ours
    assert info["kv_entry_bytes"] == kv_row_bytes_v4(config)
    assert info["index_key_bytes"] == index_key_bytes_v4(config)
    assert info["window_row_bytes"] == kv_row_bytes_v4(config)
    assert info["window_bytes_per_session"] == window_bytes_per_session_v4(config)
    assert info["global_kv_bytes_per_token"] == pytest.approx(global_kv_bytes_per_token_v4(config), rel=1e-12)


# ---------------------------------------------------------------------------------------------------------
# consistency laws


def assert_same_run(model, full, full_dump, full_state, other, other_dump, other_state, exact_tol):
    assert compare_logits(full, other).top1_agreement == 1.0
    assert relative_error(full, other) <= exact_tol
    for role in model.plan:
        if role.kind == "csa":
            same = topk_equivalent(full_dump[f"layer{role.index}.index_scores"], full_dump[f"layer{role.index}.topk"],
                                   other_dump[f"layer{role.index}.topk"], model.config.index_topk)
            assert same.all(), (role.index, np.flatnonzero(~same))
        if role.kind != "swa":
            assert relative_error(full_state.entries[role.index], other_state.entries[role.index]) <= exact_tol


@pytest.mark.parametrize("mode, tol", [("clean", 1e-9), ("faithful", 1e-3)])
def test_prefill_then_decode_equals_the_full_forward(tiny_v4, mode, tol):
    """(Faithful: the arithmetic is float64 rounded at the cast points, so row batching changes nothing; measured
    bit-equal, the bound leaves room for a BLAS that sums a row differently.)"""
    config, weights, ids = tiny_v4
    model = ModelV4(config, weights, mode)
    full = run_calls(model, ids, [ids.shape[0]])
    inc = run_calls(model, ids, [PROMPT] + [1] * STEPS)
    assert_same_run(model, *full, *inc, tol)
    # the vectors bind: more CSA entries than top-k, an HCA layer with several entries, open windows after prefill
    assert full[2].entries[1].shape[0] == ids.shape[0] // 4 > config.index_topk
    assert full[2].entries[2].shape[0] == ids.shape[0] // 8 >= 2


@pytest.mark.parametrize("mode, tol", [("clean", 1e-9), ("faithful", 1e-3)])
def test_chunked_prefill_with_odd_chunks_equals_the_full_forward(tiny_v4, mode, tol):
    config, weights, ids = tiny_v4
    model = ModelV4(config, weights, mode)
    chunks = [7, 1, 13, 3, 29, 11, 8]
    assert sum(chunks) == ids.shape[0]
    full = run_calls(model, ids, [ids.shape[0]])
    state, start = model.new_state(), 0
    for size in chunks[:2]:  # after 8 tokens: CSA holds 2 entries and the last window's first half, HCA 1 entry
        model.forward(state, ids[start : start + size])
        start += size
    assert state.compressors[1, "kv"].prior_kv is not None and state.compressors[1, "kv"].position == 8
    assert state.compressors[2, "kv"].prior_kv is None and state.entries[2].shape[0] == 1
    chunked = run_calls(model, ids, chunks)
    assert_same_run(model, *full, *chunked, tol)


def test_faithful_numerics_differ_from_clean(tiny_v4):
    config, weights, ids = tiny_v4
    clean, faithful = (model.forward(model.new_state(), ids[:PROMPT])
                       for model in (ModelV4(config, weights, mode) for mode in ("clean", "faithful")))
    assert 1e-4 < relative_error(clean, faithful) < 0.2


# ---------------------------------------------------------------------------------------------------------
# faithful storage (oracle: ml_dtypes casts, not formats.py)


def fp8_blocks_64_with_pow2_scale(values: np.ndarray) -> bool:
    """Every 64-channel block = E4M3 codes × one power of two (the smallest mapping the block's amax into ±448)."""
    blocks = values.reshape(-1, 64)
    for block in blocks:
        amax = np.max(np.abs(block))
        if amax == 0:
            continue
        scale = 2.0 ** np.ceil(np.log2(amax / 448.0))
        codes = block / scale
        if np.any(codes.astype(ml_dtypes.float8_e4m3fn).astype(np.float64) != codes):
            return False
    return True


def mxfp4_blocks(values: np.ndarray) -> bool:
    """Every 32-channel block = E2M1 grid values × one power of two."""
    for block in values.reshape(-1, 32):
        amax = np.max(np.abs(block))
        if amax == 0:
            continue
        scale = 2.0 ** np.ceil(np.log2(amax / 6.0))
        if not np.all(np.isin(np.abs(block / scale), E2M1_GRID)):
            return False
    return True


def test_faithful_rows_and_entries_use_v4_kv_storage(tiny_v4):
    config, weights, ids = tiny_v4
    model = ModelV4(config, weights, "faithful")
    dump = Dump()
    state = model.new_state()
    model.forward(state, ids[:PROMPT], dump)
    nope = config.head_dim - config.qk_rope_head_dim
    rows = [dump.arrays[f"layer{role.index}.window_row"] for role in model.plan]
    rows += [state.entries[role.index] for role in model.plan if role.kind != "swa"]
    for values in rows:
        assert fp8_blocks_64_with_pow2_scale(values[:, :nope])
        rope = values[:, nope:]
        assert np.array_equal(rope.astype(ml_dtypes.bfloat16).astype(np.float64), rope)
        assert not np.array_equal(rope.astype(ml_dtypes.float8_e4m3fn).astype(np.float64), rope)  # not FP8
    for role in model.plan:
        if role.kind == "csa":
            assert mxfp4_blocks(state.index_keys[role.index])
    assert formats.v4_kv_record_bytes(512, 64) == 584
    assert formats.v4_kv_record_bytes(config.head_dim, config.qk_rope_head_dim) == 64 + 1 + 32 + 7


def test_fp8_weight_tiles_of_128_match_a_per_tile_power_of_two_cast():
    """formats.quantize_fp8_tiles / dequantize_fp8_tiles at V4's 128x128 (tools/tiny_checkpoint writes V4 weights
    with them): each tile = E4M3 cast of w / 2^ceil(log2(amax/448)), times that scale (oracle: ml_dtypes)."""
    rng = np.random.default_rng(SEED)
    for shape in [(320, 48), (300, 260), (129, 128)]:
        w = rng.normal(0.0, 0.02, shape).astype(np.float32)
        codes, scales = formats.quantize_fp8_tiles(w, 128)
        assert scales.shape == (-(-shape[0] // 128), -(-shape[1] // 128))
        expected = np.zeros_like(w)
        for i in range(scales.shape[0]):
            for j in range(scales.shape[1]):
                tile = (slice(128 * i, 128 * i + 128), slice(128 * j, 128 * j + 128))
                scale = 2.0 ** np.ceil(np.log2(np.max(np.abs(w[tile])) / 448.0))
                expected[tile] = (w[tile] / scale).astype(ml_dtypes.float8_e4m3fn).astype(np.float32) * scale
        assert np.array_equal(formats.dequantize_fp8_tiles(codes, scales, 128), expected), shape


def test_hadamard_rotation_is_orthonormal():
    for dim in (1, 2, 32, 128):
        h = hadamard(dim) * dim**-0.5
        assert np.allclose(h @ h.T, np.eye(dim), atol=1e-12)
    with pytest.raises(ValueError):
        hadamard(48)


def test_faithful_refuses_widths_its_quantizers_cannot_block():
    """Index heads narrower than one MXFP4 block are refused (as by the engine); partial FP8 groups of the KV record
    are not (v4-c: 32 non-RoPE channels, one partial group with its own scale)."""
    config = config_v4_from_dict(json.loads((GOLDEN / CASES[0] / "config.json").read_text()), "golden.json")
    assert config.index_head_dim < 32
    with pytest.raises(ModelError, match="multiple of the MXFP4 block 32"):
        ModelV4(config, random_weights_v4(config, 1), "faithful")
    partial = config_v4_from_dict(json.loads((GOLDEN / "v4-c" / "config.json").read_text()), "golden.json")
    assert (partial.head_dim - partial.qk_rope_head_dim) % 64 and partial.index_head_dim == 32
    ModelV4(partial, random_weights_v4(partial, 1), "faithful")


# ---------------------------------------------------------------------------------------------------------
# loader and command line


def test_loader_reads_v4_fp8_tiles_of_128_and_integer_tid2eid(tmp_path, tiny_v4):
    """A checkpoint with one dense weight as FP8 E4M3 + E8M0 scales per 128x128 tile (V4's release format) and
    tid2eid as I32 loads to the dequantized values (oracle: ml_dtypes) and the same ids."""
    config, weights, _ = tiny_v4
    name = "layers.0.attn.wq_b.weight"  # [320, 48]: tile grid 3 x 1 (a 32-tile grid would be 10 x 2)
    w = weights[name]
    tiles = -(-w.shape[0] // 128), -(-w.shape[1] // 128)
    scale = np.zeros(tiles, dtype=np.float32)
    codes = np.zeros(w.shape, dtype=ml_dtypes.float8_e4m3fn)
    for i in range(tiles[0]):
        for j in range(tiles[1]):
            block = w[128 * i : 128 * i + 128, 128 * j : 128 * j + 128]
            scale[i, j] = 2.0 ** np.ceil(np.log2(np.max(np.abs(block)) / 448.0))
            codes[128 * i : 128 * i + 128, 128 * j : 128 * j + 128] = (block / scale[i, j]).astype(codes.dtype)
    expected = codes.astype(np.float32) * np.repeat(np.repeat(scale, 128, 0), 128, 1)[: w.shape[0], : w.shape[1]]
    tensors = {n: ("F32", v.astype(np.float32)) for n, v in weights.items() if not n.endswith("tid2eid")}
    tensors |= {n: ("I32", v.astype(np.int32)) for n, v in weights.items() if n.endswith("tid2eid")}
    tensors[name] = ("F8_E4M3", codes)
    tensors[name.removesuffix(".weight") + ".scale"] = ("F8_E8M0", scale.astype(ml_dtypes.float8_e8m0fnu))
    write_safetensors(tmp_path / "model.safetensors", tensors)
    (tmp_path / "config.json").write_text(json.dumps(PRESETS["tiny_v4"]))
    loaded_config, loaded = load_checkpoint(tmp_path)
    assert loaded_config.layer_kinds == config.layer_kinds
    assert np.array_equal(loaded[name], expected)
    for layer in config.hash_layer_ids:
        table = f"layers.{layer}.ffn.gate.tid2eid"
        assert loaded[table].dtype == np.int64 and np.array_equal(loaded[table], weights[table])


def write_safetensors(path: pathlib.Path, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    """A safetensors file with the given dtype labels (safetensors.numpy cannot write the FP8 ones)."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        data = np.ascontiguousarray(array).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(len(text).to_bytes(8, "little") + text + b"".join(blobs))


def test_golden_file_of_a_v4_run_compares_equal_to_itself_and_unequal_to_another_seed(tmp_path, capsys):
    """run.py --golden --dump on V4 and compare.py: identical runs agree in every dump array (HCA selections are
    not judged against a CSA layer's index scores), a different seed's run does not."""
    files = []
    for seed in (1, 1, 2):
        files.append(tmp_path / f"run{len(files)}.npz")
        assert run_main(["--preset", "tiny_v4", "--seed", str(seed), "--prompt-ids", "1,2,3,4,5,6,7,8,9,10,11",
                         "-n", "3", "--golden", str(files[-1]), "--dump"]) == 0
    assert "layer2.selection" in np.load(files[0]) and "layer2.topk" not in np.load(files[0])
    assert compare_main([str(files[0]), str(files[1])]) == 0
    assert compare_main([str(files[0]), str(files[2])]) == 1
    capsys.readouterr()


def test_a_generated_tiny_v4_checkpoint_runs(tmp_path):
    """tools/make-tiny-checkpoint's deepseek_v4 output (FP8 128x128 tiles, MXFP4 experts, I32 tid2eid) loads and
    runs in both numerics (the loader and the generator agree on names, shapes and storage)."""
    make_tiny_checkpoint(tmp_path, "tiny-v4", SEED % 1000)
    config, weights = load_checkpoint(tmp_path)
    assert {"csa", "hca", "swa"} <= set(config.layer_kinds) and config.hash_layer_ids
    assert all(np.isfinite(w).all() for w in weights.values())
    prompt = np.random.default_rng(SEED).integers(0, config.vocab_size, 40)
    for mode in ("clean", "faithful"):
        model = ModelV4(config, weights, mode)
        assert np.isfinite(model.forward(model.new_state(), prompt)).all(), mode


def test_command_line_runs_a_v4_checkpoint(capsys):
    path = GOLDEN / CASES[0]
    config, weights = load_checkpoint(path)
    prompt = [5, 17, 30, 4, 9, 11, 3, 2, 8]
    assert run_main(["--model", str(path), "--prompt-ids", ",".join(map(str, prompt)), "-n", "4", "--json",
                     "--numerics", "clean"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["tokens"] == ModelV4(config, weights, "clean").generate(prompt, 4).tokens
    assert run_main(["--model", str(path), "--prompt-ids", "1,2", "--prefill", "ced"]) == 2
    assert "deepseek_v4 has neither" in capsys.readouterr().err
    assert run_main(["--preset", "tiny_v4", "--seed", "2", "--prompt-ids", "1,2,3", "-n", "2", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["numerics"] == "faithful"
