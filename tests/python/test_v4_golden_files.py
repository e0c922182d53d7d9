"""The committed V4-Flash golden data (tests/data/golden/v4, made by tools/make_v4_golden.py from HF transformers)
is complete and self-consistent: the tensor set equals the released inventory derived here from config.json, the
parameters transformers initialises to 0/1 were re-randomised, HF's incremental logits agree with its full
forward, and two laws tie the files together (final hidden . head = logits; the hc_head collapse + final norm of
the last layer's streams = final hidden). The engine and reference comparisons live in their own tests.
"""

from __future__ import annotations

import json
import pathlib

import ml_dtypes
import numpy as np
import pytest
import safetensors

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests/data/golden/v4"
CASES = sorted(path.name for path in GOLDEN.iterdir() if path.is_dir()) if GOLDEN.is_dir() else []
FILES = ("config.json", "hf_config.json", "meta.json", "model.safetensors", "golden.safetensors")
DTYPES = {"BF16": ml_dtypes.bfloat16, "F16": np.float16, "F32": np.float32, "I32": np.int32, "I64": np.int64}
CSA_RATIO = 4


def read_safetensors(path: pathlib.Path) -> dict[str, tuple[str, np.ndarray]]:
    out = {}
    for name, entry in safetensors.deserialize(path.read_bytes()):
        array = np.frombuffer(bytes(entry["data"]), dtype=DTYPES[entry["dtype"]]).reshape(entry["shape"])
        out[name] = (entry["dtype"], array)
    return out


def expected_inventory(c: dict) -> dict[str, tuple]:
    """Released tensor names and shapes of a deepseek_v4 checkpoint, from config.json alone (MODEL.md §2.4 + V4)."""
    d, hc, hd, heads = c["hidden_size"], c["hc_mult"], c["head_dim"], c["num_attention_heads"]
    mix, groups, o_lora = (2 + hc) * hc, c["o_groups"], c["o_lora_rank"]
    ihd, ih, inter, experts = c["index_head_dim"], c["index_n_heads"], c["moe_intermediate_size"], c["n_routed_experts"]
    inv = {"embed.weight": (c["vocab_size"], d), "head.weight": (c["vocab_size"], d), "norm.weight": (d,),
           "hc_head_fn": (hc, hc * d), "hc_head_base": (hc,), "hc_head_scale": (1,)}
    for layer, ratio in enumerate(c["compress_ratios"][: c["num_hidden_layers"]]):
        p = f"layers.{layer}."
        inv |= {p + "attn_norm.weight": (d,), p + "ffn_norm.weight": (d,)}
        for site in ("attn", "ffn"):
            inv |= {f"{p}hc_{site}_fn": (mix, hc * d), f"{p}hc_{site}_base": (mix,), f"{p}hc_{site}_scale": (3,)}
        a = p + "attn."
        inv |= {a + "wq_a.weight": (c["q_lora_rank"], d), a + "q_norm.weight": (c["q_lora_rank"],),
                a + "wq_b.weight": (heads * hd, c["q_lora_rank"]), a + "wkv.weight": (hd, d),
                a + "kv_norm.weight": (hd,), a + "wo_a.weight": (groups * o_lora, heads * hd // groups),
                a + "wo_b.weight": (d, groups * o_lora), a + "attn_sink": (heads,)}
        if ratio:
            width = 2 if ratio == CSA_RATIO else 1
            inv |= {a + "compressor.wkv.weight": (width * hd, d), a + "compressor.wgate.weight": (width * hd, d),
                    a + "compressor.ape": (ratio, width * hd), a + "compressor.norm.weight": (hd,)}
        if ratio == CSA_RATIO:
            inv |= {a + "indexer.wq_b.weight": (ih * ihd, c["q_lora_rank"]), a + "indexer.weights_proj.weight": (ih, d),
                    a + "indexer.compressor.wkv.weight": (2 * ihd, d), a + "indexer.compressor.wgate.weight": (2 * ihd, d),
                    a + "indexer.compressor.ape": (ratio, 2 * ihd), a + "indexer.compressor.norm.weight": (ihd,)}
        f = p + "ffn."
        inv[f + "gate.weight"] = (experts, d)
        if layer < c["num_hash_layers"]:
            inv[f + "gate.tid2eid"] = (c["vocab_size"], c["num_experts_per_tok"])
        else:
            inv[f + "gate.bias"] = (experts,)
        for e in [f"experts.{j}." for j in range(experts)] + ["shared_experts."]:
            inv |= {f + e + "w1.weight": (inter, d), f + e + "w3.weight": (inter, d), f + e + "w2.weight": (d, inter)}
    return inv


@pytest.fixture(scope="module", params=CASES)
def case(request):
    path = GOLDEN / request.param
    config = json.loads((path / "config.json").read_text())
    meta = json.loads((path / "meta.json").read_text())
    weights = read_safetensors(path / "model.safetensors")
    golden = {name: array for name, (_, array) in read_safetensors(path / "golden.safetensors").items()}
    return path, config, meta, weights, golden


def f32(weights, name):
    return weights[name][1].astype(np.float32)


def rms_normalised(x, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps)


def test_golden_cases_exist_and_stay_small():
    assert len(CASES) >= 3, f"expected >= 3 golden configs under {GOLDEN}, found {CASES}"
    total = sum(p.stat().st_size for p in GOLDEN.rglob("*") if p.is_file())
    assert total < 3.5e6, f"golden data grew to {total} bytes"
    for name in CASES:
        for file in FILES:
            assert (GOLDEN / name / file).is_file(), f"{name}/{file} missing"


def test_config_is_released_deepseek_v4_format(case):
    _, c, meta, _, golden = case
    assert c["model_type"] == "deepseek_v4" and c["architectures"] == ["DeepseekV4ForCausalLM"]
    ratios = c["compress_ratios"]
    assert len(ratios) == c["num_hidden_layers"] + c["num_nextn_predict_layers"]
    assert CSA_RATIO in ratios and any(r not in (0, CSA_RATIO) for r in ratios), "needs CSA and HCA layers"
    assert 0 < c["num_hash_layers"] <= c["num_hidden_layers"]
    assert c["index_n_heads"] >= 16
    tokens = golden["input_ids"].shape[0]
    hca = max(ratios)
    assert tokens // CSA_RATIO > c["index_topk"], "CSA top-k must bind"
    assert tokens // hca >= 2 and tokens > c["sliding_window"], "HCA entries and the window must both matter"
    assert meta["prefill_len"] + meta["decode_steps"] == tokens and sum(meta["chunks"]) == tokens


def test_checkpoint_tensors_match_the_released_inventory(case):
    _, c, _, weights, _ = case
    expected = expected_inventory(c)
    assert sorted(weights) == sorted(expected)
    for name, (dtype, array) in weights.items():
        assert array.shape == expected[name], name
        if name.endswith("tid2eid"):
            assert dtype in ("I32", "I64")
            assert array.min() >= 0 and array.max() < c["n_routed_experts"], name
            assert all(len(set(row)) == row.size for row in array), f"{name}: repeated expert in a row"
        else:
            assert dtype in ("BF16", "F32"), name
            assert np.isfinite(array.astype(np.float32)).all(), name


def test_zero_and_one_initialised_parameters_were_redrawn(case):
    _, c, _, weights, _ = case
    for name, (_, array) in weights.items():
        values = array.astype(np.float64)
        if name.endswith(("attn_sink", ".ape", "_base", "gate.bias")):
            assert np.abs(values).min() > 0 and values.std() > 0.05, f"{name} looks like HF's zero init"
        if name.endswith(("norm.weight", "_scale")):
            assert np.abs(values - 1).max() > 0.05, f"{name} looks like HF's ones init"
        if name.endswith("tid2eid"):
            assert len(np.unique(array[:, 0])) > 1, f"{name} looks like HF's zero init"


def test_golden_arrays_have_consistent_shapes(case):
    _, c, meta, _, g = case
    t, v, d = g["input_ids"].shape[0], c["vocab_size"], c["hidden_size"]
    assert g["input_ids"].min() >= 0 and g["input_ids"].max() < v
    assert g["logits_full"].shape == (t, v) and g["logits_decode"].shape == (meta["decode_steps"], v)
    assert g["hidden_streams"].shape == (c["num_hidden_layers"], t, c["hc_mult"], d)
    assert g["final_hidden"].shape == (t, d)
    for name, array in g.items():
        assert np.isfinite(array.astype(np.float32)).all(), name


def test_hf_incremental_decode_agrees_with_its_full_forward(case):
    _, _, meta, _, g = case
    full = g["logits_full"][meta["prefill_len"] :]
    deviation = np.abs(g["logits_decode"] - full).max() / np.abs(g["logits_full"]).max()
    assert deviation < 1e-5, f"HF prefill+decode differs from HF full by {deviation:.2e} (relative)"
    assert not np.array_equal(g["logits_decode"], full), "decode rows are a copy of the full rows, not a decode run"
    for name, value in meta["self_check_relative_deviation"].items():
        assert value < 1e-5, name


def test_recorded_margins_and_clamp_statistics(case):
    _, c, meta, _, _ = case
    assert min(meta["indexer_min_margin"], meta["router_min_margin"]) >= meta["min_margin_required"] > 0
    assert meta["shared_expert_peak_preactivation"] < c["swiglu_limit"] < meta["routed_expert_peak_preactivation"]


def test_logits_are_the_head_of_the_final_hidden(case):
    _, _, _, weights, g = case
    logits = g["final_hidden"].astype(np.float64) @ f32(weights, "head.weight").T.astype(np.float64)
    scale = np.abs(g["logits_full"]).max()
    assert np.abs(logits - g["logits_full"]).max() < 1e-5 * scale


def test_final_hidden_is_hc_head_collapse_and_norm_of_last_streams(case):
    """hc_head (MODEL.md V4 column; transformers DeepseekV4HyperHead) applied to the last layer's dumped streams."""
    _, c, _, weights, g = case
    streams = g["hidden_streams"][-1].astype(np.float64)  # [T, hc, D], stored fp16
    flat = rms_normalised(streams.reshape(streams.shape[0], -1), c["rms_norm_eps"])
    mixes = flat @ f32(weights, "hc_head_fn").T
    pre = 1 / (1 + np.exp(-(mixes * f32(weights, "hc_head_scale")[0] + f32(weights, "hc_head_base")))) + c["hc_eps"]
    collapsed = np.einsum("th,thd->td", pre, streams)
    final = f32(weights, "norm.weight") * rms_normalised(collapsed, c["rms_norm_eps"])
    deviation = np.abs(final - g["final_hidden"]).max() / np.abs(g["final_hidden"]).max()
    assert deviation < 5e-3, f"hc_head law off by {deviation:.2e} (fp16 stream dumps allow ~1e-3)"
