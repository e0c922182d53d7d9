"""`flashkv info DIR` on a checkpoint directory: the tensor listing and the check against the config.

Oracle: the `safetensors` package's own reading of the shards (dtype, shape per tensor) and the index the
generator wrote; the checkpoint is made by tools/make-tiny-checkpoint from a fresh seed.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess

import numpy as np
from safetensors import safe_open
from safetensors.numpy import save_file

from tiny_checkpoint_tool import make_tiny_checkpoint

SEED = int.from_bytes(os.urandom(4), "little")


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=120)


def make_checkpoint(out: pathlib.Path) -> pathlib.Path:
    return make_tiny_checkpoint(out, "tiny-v41", SEED, "--shards", "3")


def test_info_lists_every_tensor_as_the_safetensors_package_reads_it(cli, tmp_path):
    directory = make_checkpoint(tmp_path / "ckpt")
    result = run(cli, "info", directory, "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    weight_map = json.loads((directory / "model.safetensors.index.json").read_text())["weight_map"]
    assert [t["name"] for t in info["tensors"]] == sorted(weight_map)
    for shard in set(weight_map.values()):
        with safe_open(str(directory / shard), framework="np") as reader:
            for name in reader.keys():
                row = next(t for t in info["tensors"] if t["name"] == name)
                sliced = reader.get_slice(name)
                assert row["file"] == shard
                assert row["dtype"] == sliced.get_dtype()
                assert row["shape"] == list(sliced.get_shape())
    assert info["check"] == {"ok": True, "problems": []}

    text = run(cli, "info", directory).stdout
    assert f"tensors: {len(weight_map)}\n" in text
    assert "check: ok" in text


def test_info_reports_what_does_not_fit_the_config(cli, tmp_path):
    directory = make_checkpoint(tmp_path / "ckpt")
    save_file({"layers.9.attn_norm.weight": np.ones(256, dtype=np.float32)}, str(directory / "extra.safetensors"))
    index_path = directory / "model.safetensors.index.json"
    index = json.loads(index_path.read_text())
    index["weight_map"]["layers.9.attn_norm.weight"] = "extra.safetensors"
    index_path.write_text(json.dumps(index))

    info = json.loads(run(cli, "info", directory, "--json").stdout)
    assert info["check"] == {
        "ok": False,
        "problems": [{"tensor": "layers.9.attn_norm.weight", "problem": "unexpected tensor (not part of this config)"}],
    }
    text = run(cli, "info", directory).stdout
    assert "check: 1 problems\n  layers.9.attn_norm.weight: unexpected tensor (not part of this config)\n" in text


def test_info_fails_on_a_malformed_shard_naming_it(cli, tmp_path):
    directory = make_checkpoint(tmp_path / "ckpt")
    shard = sorted(directory.glob("*.safetensors"))[1]
    shard.write_bytes(shard.read_bytes()[:1000])
    result = run(cli, "info", directory)
    assert result.returncode == 1 and result.stdout == ""
    assert str(shard) in result.stderr
