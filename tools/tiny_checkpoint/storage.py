"""Turning a tensor's float values into the arrays a checkpoint stores, in the released storage formats.

The quantizers are the reference's (tests/reference/formats.py), so the checkpoint and the numpy reference agree
on every rounding. This module only chooses the safetensors dtypes the bytes are labelled with.
"""

from __future__ import annotations

import importlib
import math
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from .inventory import BF16, F32, FP8_BLOCK32, FP8_BLOCK128, FP8_ROWS32, I32, MXFP4, TensorSpec

FP8_TILE = {FP8_BLOCK32: 32, FP8_BLOCK128: 128}

# E8M0 scales: `F8_E8M0` is what the released checkpoint uses; `U8` (raw exponent bytes) is what older tools
# write. MODEL.md §2.4 asks loaders to accept both, so the generator can write either.
SCALE_DTYPES = {"e8m0": ml_dtypes.float8_e8m0fnu, "u8": np.uint8}
# Packed E2M1 pairs: `I8` in the released checkpoint, `U8` from other tools.
PACKED_DTYPES = {"i8": np.int8, "u8": np.uint8}


@dataclass(frozen=True)
class StorageOptions:
    """Labels of the quantized byte arrays; the bytes themselves do not change."""

    scale_dtype: str = "e8m0"
    packed_dtype: str = "i8"


def _formats():
    # Imported late: the reference package lives under tests/ and is put on sys.path by the CLI entry point.
    return importlib.import_module("tests.reference.formats")


def scale_name(weight_name: str) -> str:
    """`<base>.weight` -> `<base>.scale`, the released checkpoint's companion naming."""
    return weight_name.removesuffix(".weight") + ".scale"


def stored_arrays(spec: TensorSpec, values: np.ndarray, options: StorageOptions) -> list[tuple[str, np.ndarray]]:
    """The (name, array) pairs that represent `values` in the checkpoint, weight first."""
    if spec.storage == F32:
        return [(spec.name, values.astype(np.float32))]
    if spec.storage == BF16:
        return [(spec.name, values.astype(ml_dtypes.bfloat16))]
    if spec.storage == I32:
        return [(spec.name, values.astype(np.int32))]
    scale_dtype = SCALE_DTYPES[options.scale_dtype]
    if spec.storage == FP8_BLOCK32:
        codes, scales = _formats().quantize_fp8_block32(values)
        weight = _as_uint8(codes, spec).view(ml_dtypes.float8_e4m3fn)
    elif spec.storage == FP8_BLOCK128:
        codes, scales = _formats().quantize_fp8_tiles(values, FP8_TILE[FP8_BLOCK128])
        weight = _as_uint8(codes, spec).view(ml_dtypes.float8_e4m3fn)
    elif spec.storage == FP8_ROWS32:
        codes, scales = _formats().quantize_fp8_rows32(values)
        weight = _as_uint8(codes, spec).view(ml_dtypes.float8_e4m3fn)
    elif spec.storage == MXFP4:
        codes, scales = _formats().quantize_mxfp4_weight(values)
        weight = _as_uint8(codes, spec).view(PACKED_DTYPES[options.packed_dtype])
    else:
        raise ValueError(f"unknown storage {spec.storage!r} for {spec.name}")
    return [(spec.name, weight), (scale_name(spec.name), _as_uint8(scales, spec).view(scale_dtype))]


def _as_uint8(array: np.ndarray, spec: TensorSpec) -> np.ndarray:
    """The quantizer's byte codes as a contiguous uint8 array (it may hand back uint8 or a 1-byte float type)."""
    array = np.ascontiguousarray(array)
    if array.dtype.itemsize != 1:
        raise ValueError(f"quantizer returned {array.dtype} for {spec.name}; expected 1-byte codes")
    return array.view(np.uint8)


def stored_tensor_count(spec: TensorSpec) -> int:
    """1, or 2 for a quantized tensor (weight + scale)."""
    return 1 if spec.storage in (F32, BF16, I32) else 2


def stored_bytes(spec: TensorSpec) -> int:
    """Bytes `spec` occupies in the checkpoint, computed from its shape alone (no values drawn)."""
    count = math.prod(spec.shape)
    if spec.storage in (F32, I32):
        return 4 * count
    if spec.storage == BF16:
        return 2 * count
    rows, cols = spec.shape
    if spec.storage in FP8_TILE:
        tile = FP8_TILE[spec.storage]
        return count + math.ceil(rows / tile) * math.ceil(cols / tile)
    if spec.storage == FP8_ROWS32:
        return count + rows * math.ceil(cols / 32)
    if spec.storage == MXFP4:
        return count // 2 + rows * math.ceil(cols / 32)
    raise ValueError(f"unknown storage {spec.storage!r} for {spec.name}")
