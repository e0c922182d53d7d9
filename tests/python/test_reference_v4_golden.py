"""The numpy reference's V4 mode (deepseek_v4, clean numerics) against HF transformers' DeepseekV4ForCausalLM: the
committed golden data of tests/data/golden/v4 (tools/make_v4_golden.py, transformers 5.24.0 in fp32), an oracle
nobody here wrote.

Relative error of a position s: max_v |ref[s, v] − hf[s, v]| / max_v |hf[s, v]| (per row of logits); every
position must be within 1e-4, in a full forward, in prefill + single-token decode (the golden prefill length) and
in chunked prefill (the golden chunks). On a mismatch the message names the positions and the first layer whose
streams diverge from HF's per-layer dump (fp16, so compared at 1e-2 of the row's magnitude).
A perturbation test shows that this localisation names the layer that was broken.
"""

from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
import safetensors.numpy

from reference.dumps import Dump
from reference.model_v4 import ModelV4
from reference.weights import load_checkpoint
from reference_calls import run_calls

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests/data/golden/v4"
CASES = sorted(path.name for path in GOLDEN.iterdir() if (path / "golden.safetensors").is_file())
RTOL = 1e-4
STREAM_RTOL = 1e-2  # the HF stream dumps are float16 (relative rounding 2^-11 of each element)


def test_golden_cases_exist():
    assert len(CASES) >= 3, f"expected >= 3 golden V4 cases under {GOLDEN}, found {CASES}"


@pytest.fixture(scope="module", params=CASES)
def case(request):
    path = GOLDEN / request.param
    config, weights = load_checkpoint(path)
    golden = safetensors.numpy.load_file(str(path / "golden.safetensors"))
    meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    return request.param, ModelV4(config, weights, "clean"), golden, meta


def row_errors(reference: np.ndarray, hf: np.ndarray) -> np.ndarray:
    """Per position: max_v |reference − hf| / max_v |hf|."""
    hf = np.asarray(hf, dtype=np.float64)
    return np.max(np.abs(reference - hf), axis=-1) / np.max(np.abs(hf), axis=-1)


def first_diverging_layer(dump: dict, golden: dict, positions: np.ndarray) -> str:
    """The first layer whose streams at `positions` differ from HF's dump by more than STREAM_RTOL (relative to each
    position's largest stream element), or a sentence saying none does."""
    hf_streams = golden["hidden_streams"].astype(np.float64)  # [layers, T, hc, D]
    for layer in range(hf_streams.shape[0]):
        ours = dump[f"layer{layer}.streams"][positions]
        theirs = hf_streams[layer][positions]
        scale = np.max(np.abs(theirs), axis=(1, 2))
        error = np.max(np.abs(ours - theirs), axis=(1, 2)) / scale
        if np.any(error > STREAM_RTOL):
            worst = int(np.argmax(error))
            return (f"first diverging layer {layer} (position {int(positions[worst])}: streams relative error "
                    f"{error[worst]:.2e})")
    return "no layer's streams diverge beyond the fp16 dump precision (look at hc_head / final norm / head)"


def check_rows(name: str, what: str, logits: np.ndarray, hf: np.ndarray, positions: np.ndarray, dump: dict,
               golden: dict) -> None:
    errors = row_errors(logits, hf)
    bad = np.flatnonzero(errors > RTOL)
    assert bad.size == 0, (
        f"{name} {what}: {bad.size} of {errors.size} positions exceed {RTOL:g} relative; positions "
        f"{positions[bad][:8].tolist()} (worst {int(positions[np.argmax(errors)])}: {errors.max():.2e}); "
        f"{first_diverging_layer(dump, golden, positions[bad])}")


def test_full_forward_equals_transformers(case):
    name, model, golden, _ = case
    ids = golden["input_ids"].astype(np.int64)
    dump = Dump()
    logits = model.forward(model.new_state(), ids, dump)
    positions = np.arange(ids.shape[0])
    check_rows(name, "full forward", logits, golden["logits_full"], positions, dump.arrays, golden)
    hidden = golden["final_hidden"].astype(np.float64)
    assert np.max(np.abs(dump.arrays["final_hidden"] - hidden)) <= RTOL * np.max(np.abs(hidden)), name


def test_prefill_then_decode_equals_transformers(case):
    """Prefill of the golden prefill length, then one token per call: every row against HF's full forward, and the
    decode rows also against HF's own incremental (cache) logits."""
    name, model, golden, meta = case
    ids = golden["input_ids"].astype(np.int64)
    prefill = meta["prefill_len"]
    logits, dump, _ = run_calls(model, ids, [prefill] + [1] * (ids.shape[0] - prefill))
    positions = np.arange(ids.shape[0])
    check_rows(name, "prefill + decode", logits, golden["logits_full"], positions, dump, golden)
    decode = golden["logits_decode"]
    assert decode.shape[0] == ids.shape[0] - prefill == meta["decode_steps"]
    check_rows(name, "decode vs HF cache", logits[prefill:], decode, positions[prefill:], dump, golden)


def test_chunked_prefill_equals_transformers(case):
    name, model, golden, meta = case
    ids = golden["input_ids"].astype(np.int64)
    chunks = meta["chunks"]
    assert sum(chunks) == ids.shape[0] and any(size % 4 for size in chunks)  # windows left open across calls
    logits, dumps, _ = run_calls(model, ids, chunks)
    check_rows(name, "chunked prefill", logits, golden["logits_full"], np.arange(ids.shape[0]), dumps, golden)


def test_the_golden_data_binds_every_mechanism(case):
    """CSA top-k selects fewer entries than are visible, an HCA layer has entries, hash layers exist: a reference
    that dropped any of them could not pass by accident."""
    name, model, golden, _ = case
    ids = golden["input_ids"].astype(np.int64)
    dump = Dump()
    model.forward(model.new_state(), ids, dump)
    kinds = {role.kind for role in model.plan}
    assert {"csa", "hca"} <= kinds and model.config.hash_layer_ids, name
    for role in model.plan:
        if role.kind == "csa":
            visible = (ids.shape[0]) // role.ratio
            assert visible > model.config.index_topk, (name, role.index)
            assert np.all(dump.arrays[f"layer{role.index}.topk"][-1] >= 0), (name, role.index)
        if role.kind == "hca":
            assert dump.arrays[f"layer{role.index}.entries"].shape[0] >= 2, (name, role.index)


def test_a_broken_layer_is_named(case):
    """Scaling one layer's output projection breaks the comparison, and the message names that layer."""
    name, model, golden, _ = case
    layer = len(model.plan) // 2
    weights = dict(model.weights)
    weights[f"layers.{layer}.attn.wo_b.weight"] = weights[f"layers.{layer}.attn.wo_b.weight"] * 1.5
    broken = ModelV4(model.config, weights, "clean")
    ids = golden["input_ids"].astype(np.int64)
    dump = Dump()
    logits = broken.forward(broken.new_state(), ids, dump)
    with pytest.raises(AssertionError, match=f"first diverging layer {layer} "):
        check_rows(name, "broken", logits, golden["logits_full"], np.arange(ids.shape[0]), dump.arrays, golden)
