"""The C++ side reads generated checkpoints: the loader (lib/loader, through flashkv_testing.Checkpoint) and
`flashkv info DIR --json` see exactly the tensors, dtypes, shapes and bytes that the shard headers hold (parsed
here by the `safetensors` package and by hand, independently of the C++ loader)."""

from __future__ import annotations

import json
import os
import pathlib
import struct
import subprocess

import ml_dtypes
import numpy as np
import pytest
from safetensors import safe_open

from tiny_checkpoint_tool import make_tiny_checkpoint

SEED = int.from_bytes(os.urandom(4), "little")


def generate(out: pathlib.Path, config: str, *options: str) -> pathlib.Path:
    return make_tiny_checkpoint(out, config, SEED, *options)


def headers(directory: pathlib.Path) -> dict[str, dict]:
    """name -> {dtype, shape, file} of every tensor, read with the safetensors package."""
    listing = {}
    for shard in sorted(directory.glob("model-*.safetensors")):
        with safe_open(str(shard), framework="np") as reader:
            for name in reader.keys():
                piece = reader.get_slice(name)
                listing[name] = {"dtype": piece.get_dtype(), "shape": list(piece.get_shape()), "file": shard.name}
    return listing


def raw_tensors(directory: pathlib.Path) -> dict[str, tuple[str, bytes]]:
    """name -> (dtype, data bytes) straight from the file format: 8-byte header length, JSON header, data."""
    tensors = {}
    for shard in sorted(directory.glob("model-*.safetensors")):
        raw = shard.read_bytes()
        (length,) = struct.unpack("<Q", raw[:8])
        for name, entry in json.loads(raw[8 : 8 + length]).items():
            if name != "__metadata__":
                begin, end = entry["data_offsets"]
                tensors[name] = (entry["dtype"], raw[8 + length + begin : 8 + length + end])
    return tensors


FLOAT_DTYPES = {"BF16": ml_dtypes.bfloat16, "F32": np.float32}
LABELS = [("tiny-v41", ()), ("tiny-v41-alt", ("--scale-dtype", "u8", "--packed-dtype", "u8"))]


@pytest.mark.parametrize("config, options", LABELS)
def test_the_cpp_loader_reads_every_tensor_of_a_generated_checkpoint(fkt, tmp_path, config, options):
    out = generate(tmp_path / "ckpt", config, *options)
    checkpoint = fkt.Checkpoint(str(out))
    listed = {t["name"]: {"dtype": t["dtype"], "shape": list(t["shape"]), "file": pathlib.Path(t["file"]).name}
              for t in checkpoint.tensors()}
    assert listed == headers(out), f"seed {SEED}"
    for name, (dtype, data) in raw_tensors(out).items():
        if dtype in FLOAT_DTYPES:
            want = np.frombuffer(data, FLOAT_DTYPES[dtype]).astype(np.float32)
            assert np.array_equal(np.asarray(checkpoint.read_float32(name)).ravel(), want), name
        elif dtype == "F8_E4M3":
            assert checkpoint.e4m3_codes(name) == data, name
        elif name.endswith(".scale"):  # F8_E8M0 or U8 exponent bytes
            assert checkpoint.read_e8m0_codes(name) == data, name
        else:  # packed E2M1, I8 or U8
            assert checkpoint.packed_e2m1_bytes(name) == data, name


@pytest.mark.parametrize("config, options", LABELS)
def test_flashkv_info_reads_a_generated_checkpoint(cli, tmp_path, config, options):
    out = generate(tmp_path / "ckpt", config, *options)
    result = subprocess.run([str(cli), "info", str(out), "--json"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"seed {SEED}: {result.stderr}"
    assert result.stderr == ""
    info = json.loads(result.stdout)
    assert info["is_checkpoint_dir"] is True
    written = json.loads((out / "config.json").read_text())["text_config"]
    for field in ("num_hidden_layers", "hidden_size", "head_dim", "n_routed_experts", "engram_num_embeddings"):
        assert info["config"][field] == written[field], field

    index = json.loads((out / "model.safetensors.index.json").read_text())
    expected = headers(out)
    # The size estimate may leave out ffn.gate.bias_vl (image-token router bias, held by the released checkpoint
    # but not read by a text-only engine); everything else must be counted.
    bias_vl = sum(4 * entry["shape"][0] for name, entry in expected.items() if name.endswith("gate.bias_vl"))
    assert 0 <= index["metadata"]["total_size"] - info["weight_bytes"] <= bias_vl

    # the loader's comparison of the tensors with the config, and its listing of them
    assert info["check"] == {"ok": True, "problems": []}, f"seed {SEED}"
    assert info["tensors"], f"seed {SEED}: flashkv info listed no tensors for a checkpoint directory"
    listed = {t["name"]: {"dtype": t["dtype"], "shape": t["shape"], "file": pathlib.Path(t["file"]).name}
              for t in info["tensors"]}
    assert listed == expected
    assert {name: entry["file"] for name, entry in listed.items()} == index["weight_map"]
