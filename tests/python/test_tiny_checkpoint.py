"""tools/make-tiny-checkpoint: names, dtypes and shapes from the spec, storage formats, determinism, refusals.

Oracles: the tensor inventory below is written from MODEL.md §1.2/§2.4/§7 (not from the generator's code); the
safetensors files are parsed here byte by byte and cross-checked with the `safetensors` package; quantized
weights are decoded with ml_dtypes and compared against the float weights the seed draws.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import re
import struct
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from safetensors import safe_open

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "make-tiny-checkpoint"
OFFICIAL = ROOT / "tests/data/configs/deepseek-v4.1-flash/config.json"
CONFIGS = {
    "tiny-v41": ROOT / "tests/data/configs/tiny-v41/config.json",
    "tiny-v41-alt": ROOT / "tests/data/configs/tiny-v41-alt/config.json",
}
SEED = int.from_bytes(os.urandom(4), "little")
SEED_NOTE = f"(seed {SEED}; rerun a failure with this seed by editing SEED)"

sys.path.insert(0, str(ROOT / "tools"))
sys.path.append(str(ROOT))  # `tests.reference.formats`, the quantizers the generator uses
from tests.reference import formats  # noqa: E402
from tests.reference.weights import load_checkpoint  # noqa: E402
from tiny_checkpoint import cli, draw_weights, load_config  # noqa: E402

NP_DTYPES = {
    "F32": np.float32,
    "BF16": ml_dtypes.bfloat16,
    "F8_E4M3": ml_dtypes.float8_e4m3fn,
    "F8_E8M0": ml_dtypes.float8_e8m0fnu,
    "I8": np.int8,
    "U8": np.uint8,
}


def run_tool(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *args], capture_output=True, text=True, timeout=120)


def generate(out: pathlib.Path, config: str, seed: int = SEED, *extra: str) -> pathlib.Path:
    result = run_tool("--config", config, "--seed", str(seed), "--out", str(out), *extra)
    assert result.returncode == 0, f"{SEED_NOTE}\nstdout: {result.stdout}\nstderr: {result.stderr}"
    return out


# --- an independent safetensors reader -----------------------------------------------------------------------


def read_shard(path: pathlib.Path) -> dict[str, tuple[str, tuple[int, ...], np.ndarray]]:
    """name -> (dtype string, shape, array) parsed from the file format itself (8-byte length, JSON, data)."""
    raw = path.read_bytes()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + header_len])
    data = memoryview(raw)[8 + header_len :]
    tensors = {}
    covered = 0
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        shape = tuple(entry["shape"])
        array = np.frombuffer(data[begin:end], dtype=NP_DTYPES[entry["dtype"]]).reshape(shape)
        tensors[name] = (entry["dtype"], shape, array)
        covered += end - begin
    assert covered == len(data), f"{path.name}: tensor data does not tile the data section"
    return tensors


def read_checkpoint(directory: pathlib.Path) -> dict[str, tuple[str, tuple[int, ...], np.ndarray]]:
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    shard_files = sorted(directory.glob("model-*-of-*.safetensors"))
    tensors: dict = {}
    for shard in shard_files:
        found = read_shard(shard)
        with safe_open(str(shard), framework="np") as official:  # the reference implementation agrees
            assert sorted(official.keys()) == sorted(found)
            for name in official.keys():
                piece = official.get_slice(name)
                assert (piece.get_dtype(), tuple(piece.get_shape())) == found[name][:2], name
        for name in found:
            assert index["weight_map"].get(name) == shard.name, f"{name} is in {shard.name} but indexed elsewhere"
        assert not set(found) & set(tensors), "a tensor is stored in two shards"
        tensors.update(found)
    assert set(index["weight_map"]) == set(tensors), "index weight_map and shard contents differ"
    assert index["metadata"]["total_size"] == sum(array.nbytes for _, _, array in tensors.values())
    return tensors


# --- what the spec says a checkpoint of a config holds ----------------------------------------------------------


def text_config(config_path: pathlib.Path) -> dict:
    document = json.loads(config_path.read_text())
    return document.get("text_config", document)


def primes_after(floor: int, count: int) -> list[int]:
    """Consecutive primes > floor by trial division (an oracle independent of the generator's Miller-Rabin)."""
    found = []
    n = floor + 1
    while len(found) < count:
        if n > 1 and all(n % d for d in range(2, math.isqrt(n) + 1)):
            found.append(n)
        n += 1
    return found


def fp8_block(name: str, out_f: int, in_f: int) -> dict:
    return {
        f"{name}.weight": ("F8_E4M3", (out_f, in_f)),
        f"{name}.scale": ("F8_E8M0", (math.ceil(out_f / 32), math.ceil(in_f / 32))),
    }


def expected_inventory(cfg: dict) -> dict[str, tuple[str, tuple[int, ...]]]:
    """name -> (dtype, shape) of every backbone tensor, from MODEL.md §2.4 (torch [out, in] order)."""
    d, heads, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["head_dim"]
    q_rank, groups, o_rank = cfg["q_lora_rank"], cfg["o_groups"], cfg["o_lora_rank"]
    experts, inter, mult = cfg["n_routed_experts"], cfg["moe_intermediate_size"], cfg["hc_mult"]
    engram_layers = cfg.get("engram_layer_ids", [])
    columns = (cfg.get("engram_max_ngram_size", 0) - 1) * cfg.get("engram_n_heads", 0)
    primes = primes_after(cfg.get("engram_vocab_size", 1) - 1, columns * len(engram_layers))
    mixer = 2 * mult + mult * mult

    want = {
        "embed.weight": ("BF16", (cfg["vocab_size"], d)),
        "head.weight": ("BF16", (cfg["vocab_size"], d)),
        "norm.weight": ("BF16", (d,)),
    }
    for i in range(cfg["num_hidden_layers"]):
        p = f"layers.{i}."
        ratio = cfg["compress_ratios"][i]
        want[p + "attn_norm.weight"] = ("BF16", (d,))
        want[p + "ffn_norm.weight"] = ("BF16", (d,))
        for site in ("attn", "ffn"):
            want[p + f"hc_{site}_fn"] = ("F32", (mixer, mult * d))
            want[p + f"hc_{site}_base"] = ("F32", (mixer,))
            want[p + f"hc_{site}_scale"] = ("F32", (3,))
        want.update(fp8_block(p + "attn.wq_a", q_rank, d))
        want[p + "attn.q_norm.weight"] = ("BF16", (q_rank,))
        want.update(fp8_block(p + "attn.wq_b", heads * hd, q_rank))
        want.update(fp8_block(p + "attn.wkv", hd, d))
        want[p + "attn.kv_norm.weight"] = ("BF16", (hd,))
        want.update(fp8_block(p + "attn.wo_a", groups * o_rank, heads * hd // groups))
        want.update(fp8_block(p + "attn.wo_b", d, groups * o_rank))
        want[p + "attn.attn_sink"] = ("F32", (heads,))
        if i in cfg["kv_source_layer_ids"]:
            want[p + "attn.compressor.wkv.weight"] = ("BF16", (hd, d))
            want[p + "attn.compressor.norm.weight"] = ("BF16", (hd,))
            if ratio >= 2:
                want[p + "attn.compressor.wgate.weight"] = ("BF16", (hd, d))
            want[p + "attn.indexer.wk.weight"] = ("BF16", (cfg["index_head_dim"], hd))
            want[p + "attn.indexer.k_norm.weight"] = ("BF16", (cfg["index_head_dim"],))
        if i in cfg["index_source_layer_ids"]:
            want.update(fp8_block(p + "attn.indexer.wq_b", cfg["index_n_heads"] * cfg["index_head_dim"], q_rank))
            want[p + "attn.indexer.weights_proj.weight"] = ("BF16", (cfg["index_n_heads"], d))
        want[p + "ffn.gate.weight"] = ("BF16", (experts, d))
        want[p + "ffn.gate.bias"] = ("F32", (experts,))
        want[p + "ffn.gate.bias_vl"] = ("F32", (experts,))
        for e in range(experts):
            for w, (rows, cols) in (("w1", (inter, d)), ("w2", (d, inter)), ("w3", (inter, d))):
                want[p + f"ffn.experts.{e}.{w}.weight"] = ("I8", (rows, cols // 2))
                want[p + f"ffn.experts.{e}.{w}.scale"] = ("F8_E8M0", (rows, cols // 32))
        want.update(fp8_block(p + "ffn.shared_experts.w1", inter, d))
        want.update(fp8_block(p + "ffn.shared_experts.w2", d, inter))
        want.update(fp8_block(p + "ffn.shared_experts.w3", inter, d))
        if i in engram_layers:
            k = engram_layers.index(i)
            rows = sum(primes[k * columns : (k + 1) * columns])
            ehd = cfg["engram_head_dim"]
            want[p + "engram.embed.weight"] = ("F8_E4M3", (rows, ehd))
            want[p + "engram.embed.scale"] = ("F8_E8M0", (rows, ehd // 32))
            want.update(fp8_block(p + "engram.wkv", (mult + 1) * d, columns * ehd))
            want[p + "engram.q_weight"] = ("BF16", (mult, d))
            want[p + "engram.k_weight"] = ("BF16", (mult, d))
    return want


# --- decoding the storage formats with ml_dtypes ---------------------------------------------------------------


def f32(array: np.ndarray) -> np.ndarray:
    return array.astype(np.float32)


def decode_fp8_block32(weight: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, per-element scale) of a 32x32-block FP8 weight."""
    rows, cols = weight.shape
    per_element = np.repeat(np.repeat(f32(scale), 32, axis=0), 32, axis=1)[:rows, :cols]
    return f32(weight) * per_element, per_element


def decode_rows32(codes: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values, per-element scale) of a per-row, per-32-column scaled tensor (FP8 table or unpacked FP4)."""
    per_element = np.repeat(f32(scale), 32, axis=1)
    return f32(codes) * per_element, per_element


def unpack_fp4(packed: np.ndarray) -> np.ndarray:
    """E2M1 codes: low nibble = even column, high nibble = odd column."""
    raw = packed.view(np.uint8)
    codes = np.empty((raw.shape[0], raw.shape[1] * 2), dtype=np.uint8)
    codes[:, 0::2] = raw & 0xF
    codes[:, 1::2] = raw >> 4
    return codes.view(ml_dtypes.float4_e2m1fn)


def dequantize(tensors: dict, weight_name: str) -> tuple[np.ndarray, np.ndarray | None, str]:
    """(values, per-element scale or None, format) of a stored tensor, decoded here with ml_dtypes; quantized
    formats are also decoded with the reference's dequantizers (formats.py), which must agree."""
    dtype, _, weight = tensors[weight_name]
    scale_name = weight_name.removesuffix(".weight") + ".scale"
    if scale_name not in tensors:
        return f32(weight), None, dtype
    scale = tensors[scale_name][2]
    if dtype in ("I8", "U8"):
        values, per_element = decode_rows32(unpack_fp4(weight), scale)
        fmt, reference = "MXFP4", formats.dequantize_mxfp4_weight(weight.view(np.uint8), scale.view(np.uint8))
    elif ".engram.embed." in weight_name:
        values, per_element = decode_rows32(weight, scale)
        fmt, reference = "FP8_ROWS32", formats.dequantize_fp8_rows32(weight.view(np.uint8), scale.view(np.uint8))
    else:
        values, per_element = decode_fp8_block32(weight, scale)
        fmt, reference = "FP8_BLOCK32", formats.dequantize_fp8_block32(weight.view(np.uint8), scale.view(np.uint8))
    assert np.array_equal(values, reference), f"ml_dtypes and formats.py decode {weight_name} differently"
    return values, per_element, fmt


def block_amax(master: np.ndarray, fmt: str) -> np.ndarray:
    """Per-element max |x| over the element's scale block, in the block layout of `fmt`."""
    rows, cols = master.shape
    if fmt == "FP8_BLOCK32":
        padded = np.zeros((math.ceil(rows / 32) * 32, math.ceil(cols / 32) * 32), np.float32)
        padded[:rows, :cols] = np.abs(master)
        amax = padded.reshape(padded.shape[0] // 32, 32, padded.shape[1] // 32, 32).max(axis=(1, 3))
        return np.repeat(np.repeat(amax, 32, axis=0), 32, axis=1)[:rows, :cols]
    amax = np.abs(master).reshape(rows, cols // 32, 32).max(axis=2)
    return np.repeat(amax, 32, axis=1)


# --- fixtures ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """checkpoint(config, seed, *options) -> (dir, tensors), generated once per argument list in this module."""
    made: dict = {}

    def make(config: str, seed: int = SEED, *options: str):
        key = (config, seed, *options)
        if key not in made:
            out = generate(tmp_path_factory.mktemp(config) / "ckpt", config, seed, *options)
            made[key] = out, read_checkpoint(out)
        return made[key]

    return make


@pytest.fixture(params=sorted(CONFIGS))
def generated(request, checkpoint):
    """(config name, checkpoint dir, tensors) of each built-in config with this run's seed."""
    name = request.param
    if not CONFIGS[name].is_file():
        pytest.fail(f"built-in config {CONFIGS[name]} is missing")
    return (name, *checkpoint(name))


# --- tests ------------------------------------------------------------------------------------------------------


def test_every_tensor_has_the_name_dtype_and_shape_the_spec_implies(generated):
    name, out, tensors = generated
    want = expected_inventory(text_config(CONFIGS[name]))
    got = {tensor: (dtype, shape) for tensor, (dtype, shape, _) in tensors.items()}
    assert sorted(set(want) - set(got)) == [], f"missing tensors {SEED_NOTE}"
    assert sorted(set(got) - set(want)) == [], f"unexpected tensors {SEED_NOTE}"
    wrong = {tensor: (got[tensor], want[tensor]) for tensor in want if got[tensor] != want[tensor]}
    assert wrong == {}, f"(got, expected) {SEED_NOTE}"


def test_checkpoint_directory_layout(generated):
    name, out, _ = generated
    assert (out / "config.json").read_bytes() == CONFIGS[name].read_bytes()
    shards = sorted(path.name for path in out.glob("*.safetensors"))
    assert shards == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    assert not (out / "tokenizer.json").exists()


def test_tiny_v41_layer_roles_match_model_md_section_12(checkpoint):
    """Hand facts of §12: 0 SWA, 1 SWA+Engram, 2 Full r2+Engram, 3 Reuse | 4 Full r1+pool, 5 Reuse, 6 Reindex,
    7 Reuse."""
    _, tensors = checkpoint("tiny-v41")
    owned = {i: {n.split(".", 2)[2] for n in tensors if n.startswith(f"layers.{i}.")} for i in range(8)}
    assert {"attn.compressor.wgate.weight", "attn.indexer.wk.weight", "engram.embed.weight"} <= owned[2]
    assert "attn.compressor.wkv.weight" in owned[4] and "attn.compressor.wgate.weight" not in owned[4]
    assert {"attn.indexer.wq_b.weight", "attn.indexer.weights_proj.weight"} <= owned[6]
    assert not any(n.startswith(("attn.compressor", "attn.indexer.wk")) for n in owned[6])
    for layer in (0, 1, 3, 5, 7):
        assert not any(n.startswith(("attn.compressor", "attn.indexer")) for n in owned[layer]), layer
    assert [i for i in range(8) if "engram.embed.weight" in owned[i]] == [1, 2]
    assert len(owned[0]) == len(owned[3]) == len(owned[5]) == len(owned[7])


def test_engram_tables_follow_the_prime_rule(checkpoint):
    """§12 lists the primes; the table rows are their sums per layer, matching engram_num_embeddings."""
    listed = [1009, 1013, 1019, 1021, 1031, 1033, 1039, 1049, 1051, 1061, 1063, 1069]
    assert primes_after(1000 - 1, 12) == listed
    _, tensors = checkpoint("tiny-v41")
    assert tensors["layers.1.engram.embed.weight"][1] == (sum(listed[:6]), 32) == (6126, 32)
    assert tensors["layers.2.engram.embed.weight"][1] == (sum(listed[6:]), 32) == (6332, 32)
    for name, path in CONFIGS.items():
        cfg = text_config(path)
        columns = (cfg["engram_max_ngram_size"] - 1) * cfg["engram_n_heads"]
        primes = primes_after(cfg["engram_vocab_size"] - 1, columns * len(cfg["engram_layer_ids"]))
        sums = [sum(primes[k * columns : (k + 1) * columns]) for k in range(len(cfg["engram_layer_ids"]))]
        assert sums == cfg["engram_num_embeddings"], name


EDGE = 2.0**-20  # the scale rule takes amax·(1/M) in fp32, so a block max may sit an ulp past the ideal range


def test_stored_weights_are_the_seeded_draws_in_their_storage_format(generated):
    name, _, tensors = generated
    masters = draw_weights(load_config(CONFIGS[name]), SEED)
    assert set(masters) == {n for n in tensors if not n.endswith(".scale")}
    for tensor, master in masters.items():
        values, scale, fmt = dequantize(tensors, tensor)
        note = f"{tensor} ({fmt}) {SEED_NOTE}"
        assert values.shape == master.shape, note
        if fmt == "F32":
            assert np.array_equal(values, master), note
        elif fmt == "BF16":
            assert np.array_equal(values, f32(master.astype(ml_dtypes.bfloat16))), note
        elif fmt == "MXFP4":
            # scale = 2^ceil(log2(amax/6)): the block max lands in (3, 6]; rounding to the E2M1 grid
            # {0, .5, 1, 1.5, 2, 3, 4, 6} errs by at most a quarter of |x| or of the scale.
            ratio = block_amax(master, fmt) / scale
            assert np.all((ratio > 3 * (1 - EDGE)) & (ratio <= 6 * (1 + EDGE))), note
            assert np.all(np.abs(values - master) <= np.maximum(np.abs(master), scale) / 4 + 1e-12), note
        else:
            # scale = 2^ceil(log2(amax/448)): the block max lands in (224, 448]; E4M3 keeps 3 mantissa bits,
            # so the error is at most 2^-4 |x|, or half the subnormal step 2^-9 of the scale.
            ratio = block_amax(master, fmt) / scale
            assert np.all((ratio > 224 * (1 - EDGE)) & (ratio <= 448 * (1 + EDGE))), note
            bound = np.maximum(np.abs(master) * 2.0**-4, scale * 2.0**-10)
            assert np.all(np.abs(values - master) <= bound * (1 + 1e-6)), note


def test_the_reference_loader_reads_the_checkpoint(generated):
    """tests/reference/weights.py, the numpy model's loader, gets exactly the values decoded here."""
    _, out, tensors = generated
    _, weights = load_checkpoint(out)
    for name, values in weights.items():
        assert np.array_equal(values, dequantize(tensors, name)[0]), name


def _pooled(tensors: dict, pattern: str) -> np.ndarray:
    """Dequantized values of every tensor whose full name matches `pattern` (regex), concatenated."""
    return np.concatenate([dequantize(tensors, n)[0].ravel() for n in tensors if re.fullmatch(pattern, n)])


def test_weights_follow_the_section_12_distributions(generated):
    """Loose statistics, pooled over layers: catches a wrong distribution or scale, not bad luck."""
    name, _, tensors = generated
    cfg = text_config(CONFIGS[name])
    for pattern in (r".*norm\.weight", r".*engram\.[qk]_weight"):
        values = _pooled(tensors, pattern)
        assert abs(values.mean() - 1) < 0.05 and 0.07 < values.std() < 0.13, pattern
    for pattern, std in ((r".*hc_(attn|ffn)_fn", 0.02), (r".*hc_(attn|ffn)_base", 0.1), (r".*attn\.attn_sink", 1.0),
                         (r".*ffn\.gate\.bias(_vl)?", 0.1), (r".*engram\.embed\.weight", 0.5),
                         (r"embed\.weight", 1.0)):
        values = _pooled(tensors, pattern)
        assert abs(values.mean()) < 0.3 * std + 3 * std / math.sqrt(values.size), pattern
        assert 0.6 * std < values.std() < 1.4 * std, (pattern, values.std())
    scales = _pooled(tensors, r".*hc_(attn|ffn)_scale")
    assert scales.min() >= 0.5 and scales.max() <= 1.5 and 0.8 < scales.mean() < 1.2
    # projections keep O(1) inputs O(1): std 1/sqrt(fan_in)
    for pattern, fan_in in ((r".*attn\.wq_a\.weight", cfg["hidden_size"]),
                            (r".*attn\.wq_b\.weight", cfg["q_lora_rank"]),
                            (r".*experts\.\d+\.w2\.weight", cfg["moe_intermediate_size"]),
                            (r"head\.weight", cfg["hidden_size"])):
        values = _pooled(tensors, pattern)
        assert 0.85 < values.std() * math.sqrt(fan_in) < 1.15, pattern


def test_same_seed_gives_identical_bytes_and_another_seed_other_weights(tmp_path, checkpoint):
    first, mine = checkpoint("tiny-v41")
    again = generate(tmp_path / "again", "tiny-v41")
    names = sorted(path.name for path in first.iterdir())
    assert names == sorted(path.name for path in again.iterdir())
    for file_name in names:
        assert (first / file_name).read_bytes() == (again / file_name).read_bytes(), f"{file_name} {SEED_NOTE}"

    _, other = checkpoint("tiny-v41", SEED + 1)
    weights = [n for n in mine if not n.endswith(".scale")]  # a power-of-two scale may well repeat
    same = [n for n in weights if mine[n][2].tobytes() == other[n][2].tobytes()]
    assert same == [], f"tensors unchanged by the seed {SEED_NOTE}"
    # distinct tensors get distinct streams: no two weights of one shape are equal
    seen: dict = {}
    for n, (_, shape, array) in mine.items():
        if n.endswith(".scale"):
            continue
        key = (shape, array.tobytes())
        assert key not in seen, f"{n} equals {seen.get(key)} {SEED_NOTE}"
        seen[key] = n


def test_shard_count_and_dtype_labels_change_the_files_not_the_tensors(tmp_path, checkpoint):
    _, base = checkpoint("tiny-v41")
    one = generate(tmp_path / "one", "tiny-v41", SEED, "--shards", "1")
    assert [p.name for p in one.glob("*.safetensors")] == ["model-00001-of-00001.safetensors"]
    five = generate(tmp_path / "five", "tiny-v41", SEED, "--shards", "5")
    assert len(list(five.glob("model-*-of-00005.safetensors"))) == 5
    relabeled = read_checkpoint(generate(tmp_path / "u8", "tiny-v41", SEED, "--scale-dtype", "u8",
                                         "--packed-dtype", "u8"))
    for other in (read_checkpoint(one), read_checkpoint(five)):
        assert {n: (d, s, a.tobytes()) for n, (d, s, a) in other.items()} == \
               {n: (d, s, a.tobytes()) for n, (d, s, a) in base.items()}
    for n, (dtype, shape, array) in base.items():
        want = {"F8_E8M0": "U8", "I8": "U8"}.get(dtype, dtype)
        assert relabeled[n][:2] == (want, shape), n
        assert relabeled[n][2].tobytes() == array.tobytes(), n


def test_tokenizer_hook_copies_the_file(tmp_path):
    tokenizer = tmp_path / "tok.json"
    tokenizer.write_text('{"version": "1.0", "model": {"type": "BPE"}}')
    out = generate(tmp_path / "ckpt", "tiny-v41", SEED, "--tokenizer", str(tokenizer))
    assert (out / "tokenizer.json").read_bytes() == tokenizer.read_bytes()
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    result = run_tool("--config", "tiny-v41", "--seed", "1", "--out", str(tmp_path / "x"), "--tokenizer", str(broken))
    assert result.returncode == 2 and "broken.json" in result.stderr


def test_existing_checkpoint_is_replaced_only_with_overwrite(tmp_path):
    out = generate(tmp_path / "ckpt", "tiny-v41", SEED, "--shards", "3")
    result = run_tool("--config", "tiny-v41", "--seed", "1", "--out", str(out))
    assert result.returncode == 2 and "--overwrite" in result.stderr
    generate(out, "tiny-v41", SEED, "--overwrite")
    assert len(list(out.glob("*.safetensors"))) == 2  # the three old shards are gone


def test_any_valid_shape_can_be_generated(tmp_path, capsys):
    """Dimensions that are not multiples of 32 (ceil-sized FP8 scale grids), a prime engram_vocab_size (the prime
    rule starts *at* it) and another layer schedule: the spec's inventory and the storage bounds still hold."""
    primes = primes_after(1009 - 1, 2 * 6 * 3)
    document = _tiny_with(
        q_lora_rank=48, o_lora_rank=40, num_hidden_layers=7, compress_ratios=[0, 1, 1, 1, 0, 0, 0],
        kv_source_layer_ids=[1], index_source_layer_ids=[1, 3], candidate_source_layer_id=-1,
        engram_layer_ids=[0, 3, 5], engram_n_heads=2, engram_max_ngram_size=4, engram_vocab_size=1009,
        engram_num_embeddings=[sum(primes[k * 6 : (k + 1) * 6]) for k in range(3)],
    )
    config = _write_config(tmp_path / "config.json", document)
    out = tmp_path / "ckpt"
    assert cli.main(["--config", str(config), "--seed", str(SEED), "--out", str(out), "--shards", "3"]) == 0, \
        capsys.readouterr().err
    tensors = read_checkpoint(out)
    want = expected_inventory(text_config(config))
    assert {n: (d, s) for n, (d, s, _) in tensors.items()} == want, SEED_NOTE
    assert tensors["layers.0.engram.embed.weight"][1][0] == sum(primes[:6])
    masters = draw_weights(load_config(config), SEED)
    for name in ("layers.2.attn.wq_a.weight", "layers.6.attn.wo_b.weight", "layers.3.attn.indexer.wq_b.weight"):
        values, scale, _ = dequantize(tensors, name)
        assert np.all(np.abs(values - masters[name]) <= np.maximum(np.abs(masters[name]) / 16, scale / 1024)), name


def _write_config(path: pathlib.Path, document) -> pathlib.Path:
    path.write_text(document if isinstance(document, str) else json.dumps(document))
    return path


def _tiny_with(**changes) -> dict:
    document = json.loads(CONFIGS["tiny-v41"].read_text())
    text = document.get("text_config", document)
    for key, value in changes.items():
        if value is None:
            del text[key]
        else:
            text[key] = value
    return document


@pytest.mark.parametrize(
    "make_document, expected",
    [
        (lambda: "{not json", "not readable JSON"),
        (lambda: {"model_type": "deepseek_v3", "hidden_size": 4096}, "model_type"),
        (lambda: {"model_type": "deepseek_v4", "hidden_size": 4096}, "'vocab_size' is missing"),
        (lambda: _tiny_with(hidden_size=None), "'hidden_size' is missing"),
        (lambda: _tiny_with(head_dim="64"), "'head_dim' must be an integer"),
        (lambda: _tiny_with(compress_ratios=[0, 0, 2, 2, 1, 2, 1, 1]), "layer 5"),
        (lambda: _tiny_with(kv_source_layer_ids=[2, 4, 5]), "index source"),
        (lambda: _tiny_with(index_source_layer_ids=[1, 2, 4, 6]), "layer 1"),
        (lambda: _tiny_with(engram_num_embeddings=[6126, 6333]), "engram_num_embeddings"),
        (lambda: _tiny_with(moe_intermediate_size=48), "moe_intermediate_size (48) must be a multiple of 32"),
        (lambda: json.loads(OFFICIAL.read_text()), "--allow-large"),
    ],
    ids=["json", "model_type", "v4-missing", "missing", "type", "schedule", "kv-not-index", "swa-source", "primes", "mxfp4-width",
         "official-size"],
)
def test_bad_configs_are_refused_with_a_clear_message(tmp_path, capsys, make_document, expected):
    """In-process (the CLI's main) to keep the many cases fast; the subprocess path is covered above."""
    config = _write_config(tmp_path / "config.json", make_document())
    out = tmp_path / "out"
    assert cli.main(["--config", str(config), "--seed", "3", "--out", str(out)]) == 2
    stderr = capsys.readouterr().err
    assert expected in stderr, stderr
    assert f"{config}" in stderr  # names the file at fault
    assert not out.exists() or not any(out.iterdir())


def test_unknown_config_name_and_bad_seed_are_refused(tmp_path):
    result = run_tool("--config", "tiny-v99", "--seed", "1", "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "tiny-v99" in result.stderr and "tiny-v41" in result.stderr
    result = run_tool("--config", "tiny-v41", "--seed", "-4", "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and "seed" in result.stderr
