"""read_weight_float32 (lib/loader/weight_reader) against a numpy/ml_dtypes decode of the raw bytes.

Oracle: the `safetensors` package splits the shards into raw tensor bytes (safetensors.deserialize); this file
decodes them with ml_dtypes from MODEL.md §2.1 (E4M3 x 2^(scale-127) per 32x32 tile or per 32 columns of a row;
E2M1 pairs with the low nibble as the even column). The checkpoints come from tools/make-tiny-checkpoint with a
fresh seed, in both the released storage dtypes and the alternative ones (U8 scales, U8 packed experts).
"""

from __future__ import annotations

import os
import pathlib
import sys

import ml_dtypes
import numpy as np
import pytest
from safetensors import deserialize

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED = int.from_bytes(os.urandom(4), "little")

sys.path.insert(0, str(ROOT / "tools"))
from tiny_checkpoint import load_config  # noqa: E402
from tiny_checkpoint.inventory import checkpoint_inventory  # noqa: E402
from tiny_checkpoint_tool import make_tiny_checkpoint  # noqa: E402

FLOATS = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16}


def raw_tensors(directory: pathlib.Path) -> dict[str, tuple[str, list[int], bytes]]:
    tensors = {}
    for shard in directory.glob("*.safetensors"):
        for name, info in deserialize(shard.read_bytes()):
            tensors[name] = (info["dtype"], list(info["shape"]), bytes(info["data"]))
    return tensors


def scale_values(dtype: str, data: bytes, shape) -> np.ndarray:
    if dtype == "F32":
        return np.frombuffer(data, np.float32).reshape(shape)
    codes = np.frombuffer(data, np.uint8).reshape(shape)
    return codes.view(ml_dtypes.float8_e8m0fnu).astype(np.float32)  # 2^(code-127)


def oracle(spec, raw) -> np.ndarray:
    dtype, shape, data = raw[spec.name]
    if spec.storage == "i32":  # V4 tid2eid
        return np.frombuffer(data, np.int32).reshape(shape)
    if dtype in FLOATS:
        return np.frombuffer(data, FLOATS[dtype]).astype(np.float32).reshape(shape)
    rows, cols = spec.shape
    scale_dtype, scale_shape, scale_data = raw[spec.name.removesuffix(".weight") + ".scale"]
    scales = scale_values(scale_dtype, scale_data, scale_shape)
    if spec.storage == "mxfp4":
        packed = np.frombuffer(data, np.uint8).reshape(rows, cols // 2)
        nibbles = np.empty((rows, cols), np.uint8)
        nibbles[:, 0::2], nibbles[:, 1::2] = packed & 0xF, packed >> 4
        values = nibbles.view(ml_dtypes.float4_e2m1fn).astype(np.float32)
        return values * np.repeat(scales, 32, axis=1)[:, :cols]
    values = np.frombuffer(data, ml_dtypes.float8_e4m3fn).astype(np.float32).reshape(rows, cols)
    tile = {"fp8_block32": 32, "fp8_block128": 128}.get(spec.storage)  # square tiles; else per 32 columns of a row
    row_repeat, col_repeat = (tile, tile) if tile else (1, 32)
    return values * np.repeat(np.repeat(scales, row_repeat, axis=0), col_repeat, axis=1)[:rows, :cols]


@pytest.mark.parametrize("variant", [("tiny-v41",),
                                     ("tiny-v41-alt", "--scale-dtype", "u8", "--packed-dtype", "u8"),
                                     ("tiny-v4",)])
def test_every_weight_dequantizes_like_the_oracle(fkt, tmp_path, variant):
    preset, *options = variant
    out = make_tiny_checkpoint(tmp_path / "ckpt", preset, SEED, *options)
    raw = raw_tensors(out)
    ours = fkt.read_all_weights(str(out), str(out / "config.json"))
    specs = checkpoint_inventory(load_config(out / "config.json"))
    assert sorted(ours) == sorted(spec.name for spec in specs)
    quantized = 0
    for spec in specs:
        expected = oracle(spec, raw)
        assert ours[spec.name].shape == expected.shape, spec.name
        assert ours[spec.name].dtype == expected.dtype, spec.name
        assert np.array_equal(ours[spec.name].view(np.uint32), expected.view(np.uint32)), f"{spec.name} seed {SEED}"
        quantized += spec.storage not in ("bf16", "f32")
    assert quantized > 100  # the quantized paths were exercised, not only the float ones


def test_unquantized_storage_of_a_quantized_weight_is_read_as_is(fkt, tmp_path):
    from safetensors.numpy import save_file

    values = np.random.default_rng(SEED).standard_normal((64, 256)).astype(np.float32)
    config = ROOT / "tests" / "data" / "configs" / "tiny-v41" / "config.json"
    save_file({"layers.0.attn.wq_a.weight": values.astype(ml_dtypes.bfloat16)}, str(tmp_path / "model.safetensors"))
    weights = fkt.read_all_weights(str(tmp_path), str(config))
    assert np.array_equal(weights["layers.0.attn.wq_a.weight"], values.astype(ml_dtypes.bfloat16).astype(np.float32))


def test_e8m0_code_bytes_is_a_view_of_f8_e8m0_or_u8(fkt, tmp_path):
    from safetensors.numpy import save_file

    codes = np.random.default_rng(SEED).integers(0, 256, size=(5, 8), dtype=np.uint8)
    save_file({"e": codes.view(ml_dtypes.float8_e8m0fnu), "u": codes, "f": np.ones(3, np.float32)},
              str(tmp_path / "model.safetensors"))
    checkpoint = fkt.Checkpoint(str(tmp_path))
    assert checkpoint.e8m0_code_bytes("e") == checkpoint.e8m0_code_bytes("u") == codes.tobytes()
    with pytest.raises(fkt.LoaderError, match=r"^unsupported: tensor 'f' .* stored as F32"):
        checkpoint.e8m0_code_bytes("f")
