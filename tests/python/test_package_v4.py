"""The installed flashkv package (and the C ABI) on DeepSeek-V4-Flash checkpoints: the transformers-written golden
checkpoints of tests/data/golden/v4 and a tiny-v4 checkpoint generated per run from a fresh seed.

- config, plan and memory figures: family, num_hash_layers, csa_compress_ratio, weight_block_size, the csa / hca
  modes, overlapping_compressor, indexer_has_compressor, hash_routed, has_hc_head and the V4 record sizes equal
  what the numpy reference's independent config reader (tests/reference/config_v4.py) derives from config.json;
- clean logits through Session.append / logits equal transformers' golden logits (1e-4 relative per position,
  prefill then single-token decode);
- greedy generation equals the numpy reference's (clean; faithful where the engine supports it: on 2 of 3
  fresh prompts, since a libm last-ulp difference can flip a faithful near-tie, docs/cpu-engine.md);
- faithful numerics on index heads narrower than one MXFP4 block are refused with UnsupportedError;
- the C ABI (ctypes on libflashkv.so) loads tiny-v4, reports the same figures and generates the package's tokens.
"""

from __future__ import annotations

import ctypes
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import load_file

from reference.compare import relative_error
from reference.config_v4 import (
    config_v4_from_dict,
    global_kv_bytes_per_token_v4,
    index_key_bytes_v4,
    kv_row_bytes_v4,
    layer_plan_v4,
    window_bytes_per_session_v4,
)
from tiny_checkpoint_tool import make_tiny_checkpoint

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests/data/golden/v4"
CASES = sorted(path.name for path in GOLDEN.iterdir() if (path / "golden.safetensors").is_file())
SEED = int(os.environ.get("FLASHKV_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))


@pytest.fixture(autouse=True)
def show_seed():
    print(f"seed {SEED}")  # shown by pytest on failure


@pytest.fixture(scope="module")
def tiny_v4(tmp_path_factory) -> pathlib.Path:
    return make_tiny_checkpoint(tmp_path_factory.mktemp("tiny-v4"), "tiny-v4", SEED, "--overwrite")


def checkpoint(name: str, tiny_v4: pathlib.Path) -> pathlib.Path:
    return tiny_v4 if name == "tiny-v4" else GOLDEN / name


def document(path: pathlib.Path) -> dict:
    return json.loads((path / "config.json").read_text(encoding="utf-8"))


def random_ids(vocab: int, length: int, salt: int) -> list[int]:
    return [int(v) for v in np.random.default_rng([SEED, salt]).integers(0, vocab, size=length)]


def reference_tokens(path: pathlib.Path, prompt: list[int], n: int, numerics: str) -> list[int]:
    result = subprocess.run([sys.executable, "-m", "tests.reference.run", "--model", str(path), "--prompt-ids",
                             ",".join(map(str, prompt)), "-n", str(n), "--numerics", numerics, "--json"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)["tokens"]


@pytest.mark.parametrize("name", CASES + ["tiny-v4"])
def test_config_plan_and_memory_equal_the_reference_reading(flashkv_package, tiny_v4, name):
    path = checkpoint(name, tiny_v4)
    raw = document(path)
    ours = config_v4_from_dict(raw, str(path))
    model = flashkv_package.Model(path, numerics="clean", threads=2)
    config, plan, report = model.config, model.plan, model.memory().report

    assert (config.model_type, config.family, plan.family) == ("deepseek_v4",) * 3
    assert plan.has_hc_head
    assert config.num_hash_layers == len(ours.hash_layer_ids)
    assert config.compress_ratios[: config.num_hidden_layers] == list(ours.compress_ratios)
    csa_ratios = {r for r, kind in zip(ours.compress_ratios, ours.layer_kinds) if kind == "csa"}
    assert csa_ratios <= {config.csa_compress_ratio}
    tile = (raw.get("quantization_config") or {}).get("weight_block_size", [128])[0]  # V4 default 128 (config.md)
    assert config.weight_block_size == tile

    roles = layer_plan_v4(ours)
    assert [layer.mode for layer in plan.layers] == [role.kind for role in roles]
    assert [layer.hash_routed for layer in plan.layers] == [role.is_hash for role in roles]
    assert [layer.overlapping_compressor for layer in plan.layers] == [role.overlapping for role in roles]
    assert [layer.indexer_has_compressor for layer in plan.layers] == [role.kind == "csa" for role in roles]
    assert [layer.rope for layer in plan.layers] == [
        {"base": "base", "compress": "compress_yarn"}[role.rope] for role in roles]

    assert report.kv_entry_bytes == report.window_row_bytes == kv_row_bytes_v4(ours)
    assert report.index_key_bytes == index_key_bytes_v4(ours)
    assert report.window_bytes_per_session == window_bytes_per_session_v4(ours)
    assert report.global_kv_bytes_per_token == pytest.approx(global_kv_bytes_per_token_v4(ours), rel=1e-12)
    compressed = [role for role in roles if role.kind != "swa"]
    assert [(s.layer, s.ratio) for s in report.kv_sources] == [(role.index, role.ratio) for role in compressed]
    assert [s.index_key_bytes for s in report.kv_sources] == [
        index_key_bytes_v4(ours) if role.kind == "csa" else 0 for role in compressed]


@pytest.mark.parametrize("name", CASES)
def test_clean_logits_equal_transformers(flashkv_package, name):
    """Prefill of the golden prompt's first prefill_len tokens, then one token per append: every row equals the
    transformers logits at its position (the issue's 1e-4 relative)."""
    path = GOLDEN / name
    golden = load_file(str(path / "golden.safetensors"))
    prefill = json.loads((path / "meta.json").read_text(encoding="utf-8"))["prefill_len"]
    ids = [int(t) for t in golden["input_ids"]]
    session = flashkv_package.Model(path, numerics="clean", threads=2).session()
    session.append(ids[:prefill])
    rows = [np.array(session.logits())]
    for token in ids[prefill:]:
        session.append([token])
        rows.append(np.array(session.logits()))
    for offset, row in enumerate(rows):
        position = prefill - 1 + offset
        error = relative_error(golden["logits_full"][position], row)
        assert error <= 1e-4, f"{name}: position {position} differs from transformers by {error:.2e} relative"


def generate(model, prompt: list[int], n: int) -> list[int]:
    return list(model.session().generate(prompt, max_tokens=n, temperature=0, stop_at_eos=False))


@pytest.mark.parametrize("numerics", ["clean", "faithful"])
@pytest.mark.parametrize("name", ["tiny-v4", "v4-c"])
def test_greedy_tokens_equal_the_reference(flashkv_package, tiny_v4, name, numerics):
    path = checkpoint(name, tiny_v4)
    model = flashkv_package.Model(path, numerics=numerics, threads=2)
    prompts = [random_ids(model.vocab_size, 29 + 6 * salt, salt) for salt in range(1 if numerics == "clean" else 3)]
    agree = [generate(model, prompt, 6) == reference_tokens(path, prompt, 6, numerics) for prompt in prompts]
    assert sum(agree) >= (1 if numerics == "clean" else 2), f"{name} {numerics}: agreement {agree} (seed {SEED})"


def test_faithful_needs_whole_mxfp4_index_blocks(flashkv_package):
    narrow = next(GOLDEN / name for name in CASES if document(GOLDEN / name)["index_head_dim"] < 32)
    with pytest.raises(flashkv_package.UnsupportedError, match="index_head_dim"):
        flashkv_package.Model(narrow, numerics="faithful", threads=2)


# ---- C ABI ----

class LoadOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("device", ctypes.c_int32), ("threads", ctypes.c_int32),
                ("numerics", ctypes.c_int32), ("prefill", ctypes.c_int32), ("reserved0", ctypes.c_uint32),
                ("prefill_chunk", ctypes.c_int64), ("log", ctypes.c_void_p), ("log_user_data", ctypes.c_void_p)]


class SamplingParams(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("temperature", ctypes.c_float), ("top_k", ctypes.c_int32),
                ("top_p", ctypes.c_float), ("min_p", ctypes.c_float), ("repetition_penalty", ctypes.c_float),
                ("presence_penalty", ctypes.c_float), ("frequency_penalty", ctypes.c_float),
                ("seed", ctypes.c_uint64)]


class GenerateOptions(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("stop_at_eos", ctypes.c_int32), ("max_tokens", ctypes.c_int64),
                ("sampling", ctypes.POINTER(SamplingParams)), ("stop_tokens", ctypes.c_void_p),
                ("n_stop_tokens", ctypes.c_uint64), ("on_token", ctypes.c_void_p),
                ("on_token_user_data", ctypes.c_void_p), ("on_progress", ctypes.c_void_p),
                ("on_progress_user_data", ctypes.c_void_p)]


class Memory(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_uint32), ("reserved0", ctypes.c_uint32),
                ("global_kv_bytes_per_token", ctypes.c_double), ("kv_entry_bytes", ctypes.c_uint64),
                ("index_key_bytes", ctypes.c_uint64), ("window_row_bytes", ctypes.c_uint64),
                ("window_bytes_per_session", ctypes.c_uint64), ("compressor_state_bytes_per_session", ctypes.c_uint64),
                ("weight_bytes_estimate", ctypes.c_uint64), ("resident_weight_bytes", ctypes.c_uint64),
                ("parameters_total", ctypes.c_uint64), ("parameters_active_per_token", ctypes.c_uint64),
                ("weight_storage", ctypes.c_char_p)]


def check(capi, status: int) -> None:
    assert status == 0, capi.fkv_last_error()


@pytest.mark.parametrize("numerics", ["clean", "faithful"])
def test_c_abi_loads_and_generates_tiny_v4(flashkv_package, capi, tiny_v4, numerics):
    options = LoadOptions()
    check(capi, capi.fkv_load_options_init(ctypes.byref(options)))
    options.numerics, options.threads = {"clean": 0, "faithful": 1}[numerics], 2
    model = ctypes.c_void_p()
    check(capi, capi.fkv_model_load(ctypes.c_uint32(capi.fkv_abi_version()), str(tiny_v4).encode(),
                                    ctypes.byref(options), ctypes.byref(model)))
    session = ctypes.c_void_p()
    try:
        ours = config_v4_from_dict(document(tiny_v4), str(tiny_v4))
        memory = Memory(struct_size=ctypes.sizeof(Memory))
        check(capi, capi.fkv_model_memory(model, ctypes.byref(memory)))
        assert memory.kv_entry_bytes == memory.window_row_bytes == kv_row_bytes_v4(ours)
        assert memory.index_key_bytes == index_key_bytes_v4(ours)
        assert memory.global_kv_bytes_per_token == pytest.approx(global_kv_bytes_per_token_v4(ours), rel=1e-12)

        check(capi, capi.fkv_session_create(model, None, ctypes.byref(session)))
        prompt = random_ids(ours.vocab_size, 37, 7)
        sampling = SamplingParams()
        check(capi, capi.fkv_sampling_params_init(ctypes.byref(sampling)))
        sampling.temperature = 0.0
        generate_options = GenerateOptions()
        check(capi, capi.fkv_generate_options_init(ctypes.byref(generate_options)))
        generate_options.max_tokens, generate_options.stop_at_eos = 6, 0
        generate_options.sampling = ctypes.pointer(sampling)
        out, count, reason = (ctypes.c_int32 * 6)(), ctypes.c_uint64(0), ctypes.c_int32(-1)
        check(capi, capi.fkv_session_generate(session, (ctypes.c_int32 * len(prompt))(*prompt),
                                              ctypes.c_uint64(len(prompt)), ctypes.byref(generate_options), out,
                                              ctypes.c_uint64(6), ctypes.byref(count), ctypes.byref(reason)))
        assert (count.value, reason.value) == (6, 0)
        package = flashkv_package.Model(tiny_v4, numerics=numerics, threads=2)
        assert list(out) == generate(package, prompt, 6)
    finally:
        capi.fkv_session_free(session)
        capi.fkv_model_free(model)
