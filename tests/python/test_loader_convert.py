"""The loader's dtype conversions against ml_dtypes / numpy, on fresh random codes (every bit pattern may occur).

MODEL.md §2.4 loader robustness: unquantized tensors as F32/F16/BF16, E8M0 scales as F8_E8M0, U8 or F32 powers
of two (anything else refused, naming the tensor), packed E2M1 as I8 or U8.
"""

from __future__ import annotations

import os

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file


@pytest.fixture()
def rng():
    seed = int.from_bytes(os.urandom(8), "little")
    print(f"random seed {seed}")
    return np.random.default_rng(seed)


def random_codes(rng, dtype, shape) -> np.ndarray:
    itemsize = np.dtype(dtype).itemsize
    raw = rng.integers(0, 256, size=int(np.prod(shape)) * itemsize, dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def open_checkpoint(fkt, tmp_path, tensors):
    save_file(tensors, str(tmp_path / "model.safetensors"))
    return fkt.Checkpoint(str(tmp_path))


def assert_same_floats(actual: np.ndarray, expected: np.ndarray) -> None:
    """Bit-equal, except that NaNs only need to be NaN at the same places (payload quieting differs by CPU)."""
    assert actual.dtype == np.float32 and actual.shape == expected.shape
    nan = np.isnan(expected)
    assert np.array_equal(np.isnan(actual), nan)
    assert np.array_equal(actual[~nan].view(np.uint32), expected[~nan].view(np.uint32))


@pytest.mark.parametrize(
    "dtype", [np.float32, np.float16, ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e8m0fnu]
)
def test_read_float32_matches_ml_dtypes(fkt, tmp_path, rng, dtype):
    codes = random_codes(rng, dtype, (37, 19))
    checkpoint = open_checkpoint(fkt, tmp_path, {"w": codes})
    assert_same_floats(checkpoint.read_float32("w"), codes.astype(np.float32))


def test_read_float32_covers_every_f16_and_bf16_code(fkt, tmp_path):
    every = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    checkpoint = open_checkpoint(fkt, tmp_path, {"h": every.view(np.float16), "b": every.view(ml_dtypes.bfloat16)})
    assert_same_floats(checkpoint.read_float32("h"), every.view(np.float16).astype(np.float32))
    assert_same_floats(checkpoint.read_float32("b"), every.view(ml_dtypes.bfloat16).astype(np.float32))


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.float64, np.bool_])
def test_read_float32_refuses_other_dtypes(fkt, tmp_path, rng, dtype):
    checkpoint = open_checkpoint(fkt, tmp_path, {"layers.0.odd": np.ones((2, 2), dtype=dtype)})
    with pytest.raises(fkt.LoaderError, match=r"^unsupported: tensor 'layers.0.odd' in '.*model.safetensors' is stored as"):
        checkpoint.read_float32("layers.0.odd")


def test_e8m0_scales_in_every_accepted_dtype(fkt, tmp_path, rng):
    codes = rng.integers(0, 255, size=(8, 5), dtype=np.uint8)  # 0..254: 255 is NaN, not a power of two
    powers = np.ldexp(np.float64(1.0), codes.astype(np.int64) - 127).astype(np.float32)
    checkpoint = open_checkpoint(
        fkt, tmp_path, {"e8m0": codes.view(ml_dtypes.float8_e8m0fnu), "u8": codes, "f32": powers}
    )
    for name in ("e8m0", "u8", "f32"):
        assert checkpoint.read_e8m0_codes(name) == codes.tobytes(), name
    # The oracle's view of the same codes: 2^(code-127).
    assert_same_floats(checkpoint.read_float32("e8m0"), codes.view(ml_dtypes.float8_e8m0fnu).astype(np.float32))


@pytest.mark.parametrize("bad", [3.0, 0.0, -2.0, np.inf, np.nan, 2.0**-128, 1.5 * 2.0**-127])
def test_f32_scale_that_is_not_a_power_of_two_is_refused(fkt, tmp_path, rng, bad):
    scales = np.ldexp(np.float32(1.0), rng.integers(-20, 20, size=16)).astype(np.float32)
    index = int(rng.integers(0, 16))
    scales[index] = bad
    checkpoint = open_checkpoint(fkt, tmp_path, {"layers.3.attn.wq_a.scale": scales})
    with pytest.raises(fkt.LoaderError) as caught:
        checkpoint.read_e8m0_codes("layers.3.attn.wq_a.scale")
    message = str(caught.value)
    assert message.startswith("invalid_checkpoint:") and "'layers.3.attn.wq_a.scale'" in message, message
    assert f"element {index} " in message and "not a power of two" in message, message


def test_scale_in_other_dtypes_is_refused(fkt, tmp_path):
    checkpoint = open_checkpoint(fkt, tmp_path, {"s": np.ones(4, dtype=ml_dtypes.bfloat16)})
    with pytest.raises(fkt.LoaderError, match=r"^unsupported: tensor 's' .* stored as BF16; expected an E8M0 scale"):
        checkpoint.read_e8m0_codes("s")


def test_packed_e2m1_as_i8_or_u8(fkt, tmp_path, rng):
    packed = rng.integers(0, 256, size=(6, 16), dtype=np.uint8)
    checkpoint = open_checkpoint(fkt, tmp_path, {"i8": packed.view(np.int8), "u8": packed, "f": packed.astype(np.float32)})
    assert checkpoint.packed_e2m1_bytes("i8") == packed.tobytes()
    assert checkpoint.packed_e2m1_bytes("u8") == packed.tobytes()
    with pytest.raises(fkt.LoaderError, match=r"^unsupported: tensor 'f' .* stored as F32; expected packed E2M1"):
        checkpoint.packed_e2m1_bytes("f")


def test_e4m3_codes_only_from_f8_e4m3(fkt, tmp_path, rng):
    codes = random_codes(rng, ml_dtypes.float8_e4m3fn, (4, 8))
    checkpoint = open_checkpoint(fkt, tmp_path, {"w": codes, "u": codes.view(np.uint8)})
    assert checkpoint.e4m3_codes("w") == codes.tobytes()
    with pytest.raises(fkt.LoaderError, match=r"^unsupported: tensor 'u' .* stored as U8; expected F8_E4M3"):
        checkpoint.e4m3_codes("u")
