"""The C++ tensor inventory and checkpoint check (lib/loader/tensor_inventory) on real-format test checkpoints.

Oracles: the expected tensor list is compared with the tiny-checkpoint tool's inventory (tools/tiny_checkpoint, a
separate statement of MODEL.md §2.4 in Python) and with shapes quoted by MODEL.md for the released config; the
checkpoints are written by tools/make-tiny-checkpoint (seeded from the clock) and then edited with the `safetensors`
package, so every expected problem is one this test put there.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import struct
import sys

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "tests" / "data" / "configs"
OFFICIAL = CONFIGS / "deepseek-v4.1-flash" / "config.json"
SEED = int.from_bytes(os.urandom(4), "little")

sys.path.insert(0, str(ROOT / "tools"))
from tiny_checkpoint import load_config  # noqa: E402
from tiny_checkpoint.inventory import checkpoint_inventory  # noqa: E402
from tiny_checkpoint_tool import make_tiny_checkpoint  # noqa: E402

STORAGE_OF_TOOL = {"fp8_block32": "fp8_block32", "fp8_block128": "fp8_block128", "i32": "integer_table",
                   "mxfp4": "mxfp4", "fp8_rows32": "fp8_rows32",
                   "bf16": "unquantized", "f32": "unquantized"}


def generate(out: pathlib.Path, config: str, *extra: str) -> pathlib.Path:
    return make_tiny_checkpoint(out, config, SEED, *extra)


@pytest.fixture(scope="module")
def tiny_master(tmp_path_factory) -> pathlib.Path:
    return generate(tmp_path_factory.mktemp("tiny") / "ckpt", "tiny-v41")


@pytest.fixture()
def tiny(tiny_master, tmp_path) -> pathlib.Path:
    """A private copy of the generated tiny checkpoint, free to edit."""
    print(f"tiny checkpoint seed {SEED}")
    return pathlib.Path(shutil.copytree(tiny_master, tmp_path / "ckpt"))


# ---- editing a checkpoint ----------------------------------------------------------------------------------


def read_index(directory: pathlib.Path) -> dict:
    return json.loads((directory / "model.safetensors.index.json").read_text())


def write_index(directory: pathlib.Path, index: dict) -> None:
    (directory / "model.safetensors.index.json").write_text(json.dumps(index))


def remove_tensor(directory: pathlib.Path, name: str) -> None:
    """Drops `name` from its shard's header (its bytes stay as an unused gap) and from the index."""
    index = read_index(directory)
    shard = directory / index["weight_map"].pop(name)
    data = shard.read_bytes()
    length = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8 : 8 + length])
    del header[name]
    text = json.dumps(header, separators=(",", ":")).encode()
    assert len(text) <= length
    text += b" " * (length - len(text))  # same length: the data offsets stay valid
    shard.write_bytes(data[:8] + text + data[8 + length :])
    write_index(directory, index)


def add_tensors(directory: pathlib.Path, tensors: dict[str, np.ndarray]) -> None:
    """Writes `tensors` into a new shard and lists them in the index."""
    index = read_index(directory)
    shard = f"extra-{len(list(directory.glob('extra-*')))}.safetensors"
    save_file(tensors, str(directory / shard))
    index["weight_map"].update({name: shard for name in tensors})
    write_index(directory, index)


def replace_tensor(directory: pathlib.Path, name: str, array: np.ndarray) -> None:
    remove_tensor(directory, name)
    add_tensors(directory, {name: array})


def problems(fkt, directory: pathlib.Path) -> list[tuple[str, str]]:
    return fkt.check_checkpoint(str(directory), str(directory / "config.json"))


def random_f32(shape) -> np.ndarray:
    return np.random.default_rng(SEED).standard_normal(shape).astype(np.float32)


# ---- the expected list -------------------------------------------------------------------------------------


@pytest.mark.parametrize("config", ["tiny-v41", "tiny-v41-alt", "deepseek-v4.1-flash", "tiny-v4", "deepseek-v4-flash"])
def test_expected_tensors_match_the_tiny_checkpoint_tool(fkt, config):
    path = CONFIGS / config / "config.json"
    tool = {spec.name: spec for spec in checkpoint_inventory(load_config(path))}
    ours = {row["name"]: row for row in fkt.expected_tensors(str(path))}
    assert sorted(ours) == sorted(tool)
    for name, row in ours.items():
        assert tuple(row["shape"]) == tool[name].shape, name
        assert row["storage"] == STORAGE_OF_TOOL[tool[name].storage], name


def test_expected_tensors_of_the_released_config(fkt):
    """Shapes MODEL.md §2.4 quotes for the released checkpoint, and which layers own what (§1.2)."""
    rows = {row["name"]: row for row in fkt.expected_tensors(str(OFFICIAL))}
    shapes = {name: (tuple(row["shape"]), tuple(row["stored_shape"]), tuple(row["scale_shape"]))
              for name, row in rows.items()}
    assert shapes["embed.weight"][0] == (129280, 5120)
    assert shapes["layers.0.hc_attn_fn"][0] == (24, 20480)
    assert shapes["layers.0.attn.wq_a.weight"] == ((1280, 5120), (1280, 5120), (40, 160))
    assert shapes["layers.0.attn.wo_a.weight"][0] == (8192, 4096)
    assert shapes["layers.0.attn.wo_b.weight"][0] == (5120, 8192)
    assert shapes["layers.0.ffn.experts.383.w1.weight"] == ((2304, 5120), (2304, 2560), (2304, 160))
    assert shapes["layers.0.ffn.experts.0.w2.weight"] == ((5120, 2304), (5120, 1152), (5120, 72))
    assert shapes["layers.2.attn.indexer.wq_b.weight"][0] == (4096, 1280)
    assert shapes["layers.2.attn.indexer.weights_proj.weight"][0] == (32, 5120)
    assert shapes["layers.1.engram.embed.weight"] == ((384006168, 256), (384006168, 256), (384006168, 8))
    assert shapes["layers.14.engram.embed.weight"][0] == (384016682, 256)
    assert shapes["layers.14.engram.wkv.weight"] == ((25600, 6144), (25600, 6144), (800, 192))
    kv_sources, ratio2 = [2, 8, 14, 20], [2, 8, 14]
    index_sources = [2, 8, 14, 20, 24, 28, 32, 36]
    for layer in range(40):
        assert (f"layers.{layer}.attn.compressor.wkv.weight" in rows) == (layer in kv_sources), layer
        assert (f"layers.{layer}.attn.indexer.k_norm.weight" in rows) == (layer in kv_sources), layer
        assert (f"layers.{layer}.attn.compressor.wgate.weight" in rows) == (layer in ratio2), layer
        assert (f"layers.{layer}.attn.indexer.wq_b.weight" in rows) == (layer in index_sources), layer
        assert (f"layers.{layer}.engram.q_weight" in rows) == (layer in (1, 14)), layer
    assert not rows["layers.5.ffn.gate.bias_vl"]["required"]
    # 40 layers x (8 norm/mixer + 8 attention + 3 router + 3x384 experts + 3 shared) + KV/index/Engram extras
    assert len(rows) == 3 + 40 * (8 + 8 + 3 + 1152 + 3) + (4 * 4 + 3) + 8 * 2 + 2 * 4


# ---- checking checkpoints ----------------------------------------------------------------------------------


def test_generated_checkpoints_fit_their_config(fkt, tiny_master, tmp_path):
    # the released storage dtypes (F8_E8M0 scales, I8 packed experts), then the other tools' (U8, U8)
    alt = generate(tmp_path / "alt", "tiny-v41-alt", "--scale-dtype", "u8", "--packed-dtype", "u8")
    for directory in (tiny_master, alt):
        assert problems(fkt, directory) == []
        fkt.require_valid_checkpoint(str(directory), str(directory / "config.json"))


def test_missing_tensors_and_scales(fkt, tiny):
    remove_tensor(tiny, "layers.3.attn.kv_norm.weight")
    remove_tensor(tiny, "layers.4.attn.wq_a.scale")
    remove_tensor(tiny, "layers.2.ffn.gate.bias_vl")  # optional: not a problem
    found = problems(fkt, tiny)
    assert found == [("layers.3.attn.kv_norm.weight", "missing"),
                     ("layers.4.attn.wq_a.scale", "missing (the E8M0 scales of layers.4.attn.wq_a.weight, "
                                                   "stored as F8_E4M3)")]


def test_wrong_shapes(fkt, tiny):
    replace_tensor(tiny, "norm.weight", random_f32((255,)))
    replace_tensor(tiny, "layers.0.ffn.experts.1.w2.scale", np.full((256, 3), 120, dtype=np.uint8))
    assert problems(fkt, tiny) == [("layers.0.ffn.experts.1.w2.scale", "shape [256, 3], expected [256, 2]"),
                                   ("norm.weight", "shape [255], expected [256]")]


def test_wrong_dtypes(fkt, tiny):
    replace_tensor(tiny, "layers.0.attn.attn_sink", np.zeros(4, dtype=np.int32) + 3)
    replace_tensor(tiny, "layers.1.attn.wkv.weight", np.ones((64, 256), dtype=np.int8))
    replace_tensor(tiny, "layers.1.attn.wkv.scale", np.ones((2, 8), dtype=ml_dtypes.bfloat16))
    assert problems(fkt, tiny) == [
        ("layers.0.attn.attn_sink", "dtype I32, expected BF16, F16 or F32"),
        ("layers.1.attn.wkv.scale", "dtype BF16, expected F8_E8M0, U8 or F32"),
        ("layers.1.attn.wkv.weight", "dtype I8, expected F8_E4M3 (or BF16, F16 or F32 unquantized)"),
    ]


def test_f32_power_of_two_scales_and_unquantized_weights_are_accepted(fkt, tiny):
    codes = np.random.default_rng(SEED).integers(100, 140, size=(2, 8))
    replace_tensor(tiny, "layers.1.attn.wkv.scale", np.ldexp(np.float32(1), codes - 127).astype(np.float32))
    remove_tensor(tiny, "layers.2.ffn.experts.0.w1.scale")
    replace_tensor(tiny, "layers.2.ffn.experts.0.w1.weight", random_f32((64, 256)).astype(ml_dtypes.bfloat16))
    assert problems(fkt, tiny) == []
    # ... but a scale left beside an unquantized weight is a contradiction
    add_tensors(tiny, {"layers.2.ffn.experts.0.w1.scale": np.ones((64, 8), dtype=np.uint8)})
    assert problems(fkt, tiny) == [("layers.2.ffn.experts.0.w1.scale",
                                    "present, but layers.2.ffn.experts.0.w1.weight is stored unquantized as BF16")]


def test_unexpected_tensors(fkt, tiny):
    add_tensors(tiny, {
        "layers.3.attn.compressor.wkv.weight": random_f32((64, 256)),  # layer 3 is a Reuse layer: owns no compressor
        "layers.8.attn_norm.weight": random_f32((256,)),  # there are 8 layers
        "mtp.0.attn_norm.weight": random_f32((256,)),  # DSpark, vision: not checked
        "vision.patch.weight": random_f32((4, 4)),
        "image_newline": random_f32((256,)),
    })
    assert problems(fkt, tiny) == [
        ("layers.3.attn.compressor.wkv.weight", "unexpected tensor (not part of this config)"),
        ("layers.8.attn_norm.weight", "unexpected tensor (not part of this config)"),
    ]


def test_refusal_lists_the_first_problems(fkt, tiny):
    for expert in range(8):
        remove_tensor(tiny, f"layers.5.ffn.experts.{expert}.w3.weight")
        remove_tensor(tiny, f"layers.5.ffn.experts.{expert}.w3.scale")
    with pytest.raises(fkt.LoaderError) as caught:
        fkt.require_valid_checkpoint(str(tiny), str(tiny / "config.json"))
    message = str(caught.value)
    assert message.startswith(f"invalid_checkpoint: checkpoint '{tiny}' does not match its config (8 problems):")
    assert "'layers.5.ffn.experts.0.w3.weight': missing" in message
    assert "'layers.5.ffn.experts.7.w3.weight': missing" in message


def test_describe_checkpoint_lists_every_tensor(fkt, tiny):
    index = read_index(tiny)
    rows = fkt.describe_checkpoint(str(tiny))
    assert [row["name"] for row in rows] == sorted(index["weight_map"])
    for row in rows:
        assert os.path.basename(row["file"]) == index["weight_map"][row["name"]]
    assert sum(row["bytes"] for row in rows) == index["metadata"]["total_size"]
