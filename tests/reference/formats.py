"""Number formats of spec/MODEL.md §2.1–2.2 in numpy: the independent oracle of flashkv's C++ codecs.

Written from the spec formulas, not from the C++: element rounding is ml_dtypes' casts (float8_e4m3fn,
float4_e2m1fn), block logic is vectorised numpy over the last axis (any leading shape). docs/formats.md
states every rule used here; the short version:

KV-cache records (one record per row of C channels; packed data first, then one scale byte per block):
  - SWA window row, FP8 E4M3, B=32:  scale = 2^ceil(log2(max(amax, 1e-4)/448)), computed as amax·(1/448)
    in fp32 and rounded up to a power of two; q = e4m3(clamp(x/scale, ±448)).   C + C/32 bytes.
  - compressed entry, NVFP4, B=16:   scale = e4m3(max(amax, 6·2^-9)/6) (an fp32 division, as NeMo and
    TensorRT-LLM write it); q = e2m1(clamp(x/scale, ±6)).                        C/2 + C/16 bytes.
  - index key, MXFP4, B=32:          scale = 2^ceil(log2(max(amax, 6·2^-126)/6)), amax·(1/6) in fp32;
    q = e2m1(clamp(x/scale, ±6)).                                                C/2 + C/32 bytes.
  x/scale is an fp32 division everywhere. E2M1 pairs: low nibble = even channel.
  A block whose scale is NaN (a NaN or ±Inf in the block, or an NVFP4 amax so large that amax/6 rounds
  past 448) is "poisoned": its scale byte is the format's NaN (E8M0 0xFF, E4M3 0x7F), every data code is
  0, and it dequantizes to NaN.

Checkpoint weights (quantizers used by the tiny-checkpoint tool; dequantizers by the reference loader):
  - FP8 E4M3 dense weights, one E8M0 scale per 32x32 tile (grid ceil(r/32) x ceil(c/32)).
  - MXFP4 routed experts: packed [r, c/2] (low nibble = even column), E8M0 scales [r, c/32].
  - FP8 "rows32" (Engram tables): E4M3 [r, c], one E8M0 scale per 32 columns [r, ceil(c/32)].
  Quantizer scale rule: the smallest power of two that maps the block's amax into range,
  scale = 2^ceil(log2(max(amax, M·2^-126)/M)) with M = 448 (FP8) or 6 (E2M1), computed like the KV scales.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np

E4M3 = ml_dtypes.float8_e4m3fn
E2M1 = ml_dtypes.float4_e2m1fn
E8M0 = ml_dtypes.float8_e8m0fnu

FP8_MAX = np.float32(448.0)
FP4_MAX = np.float32(6.0)
FP8_WINDOW_BLOCK = 32
NVFP4_BLOCK = 16
MXFP4_BLOCK = 32
WEIGHT_TILE = 32

FP8_WINDOW_AMAX_FLOOR = np.float32(1e-4)
NVFP4_AMAX_FLOOR = np.float32(6 * 2.0**-9)
MXFP4_AMAX_FLOOR = np.float32(6 * 2.0**-126)
FP8_WEIGHT_AMAX_FLOOR = np.float32(448 * 2.0**-126)

E8M0_NAN = np.uint8(0xFF)
E4M3_NAN = np.uint8(0x7F)


# ---- shared pieces ----------------------------------------------------------------------------------------


def _as_f32(x) -> np.ndarray:
    return np.asarray(x, dtype=np.float32)


def _blocks(x: np.ndarray, block: int, what: str) -> np.ndarray:
    """[..., C] -> [..., C/block, block]; C must be a positive multiple of the block."""
    channels = x.shape[-1] if x.ndim else 0
    if channels == 0 or channels % block:
        raise ValueError(f"{what}: last axis has {channels} channels, need a positive multiple of {block}")
    return x.reshape(*x.shape[:-1], channels // block, block)


def _amax(blocks: np.ndarray) -> np.ndarray:
    """max |x| over the last axis; NaN anywhere gives NaN (np.max propagates it)."""
    return np.max(np.abs(blocks), axis=-1)


def _pow2_ceil_code(amax: np.ndarray, floor: np.float32, max_value: np.float32) -> np.ndarray:
    """E8M0 code of the smallest power of two >= max(amax, floor)·(1/max_value), the product taken in fp32.

    Found with frexp (t = m·2^e, m in [0.5, 1): the answer is 2^(e-1) when m == 0.5, else 2^e), a formulation
    independent of the C++ exponent/mantissa bit test. Non-finite amax gives the E8M0 NaN code.
    """
    with np.errstate(invalid="ignore", over="ignore"):
        target = np.maximum(amax, floor).astype(np.float32) * np.float32(1.0 / float(max_value))
    finite = np.isfinite(target)
    mantissa, exponent = np.frexp(np.where(finite, target, np.float32(1.0)))
    exponent = np.where(mantissa == 0.5, exponent - 1, exponent).astype(np.int64)
    return np.where(finite, exponent + 127, int(E8M0_NAN)).astype(np.uint8)


def _e8m0_value(codes: np.ndarray) -> np.ndarray:
    return np.asarray(codes, dtype=np.uint8).view(E8M0).astype(np.float32)


def _e4m3_value(codes: np.ndarray) -> np.ndarray:
    return np.asarray(codes, dtype=np.uint8).view(E4M3).astype(np.float32)


def _e2m1_value(codes: np.ndarray) -> np.ndarray:
    return (np.asarray(codes, dtype=np.uint8) & 0x0F).view(E2M1).astype(np.float32)


def _times_scale(values: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Dequantized block values: code value · block scale (exact in fp32; ±Inf only for huge scale codes)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return values * scale[..., None]


def _scaled(blocks: np.ndarray, scale: np.ndarray, limit: np.float32) -> np.ndarray:
    """clamp(x/scale, ±limit) in fp32; scale broadcasts over the block axis."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return np.clip(blocks / scale[..., None], -limit, limit).astype(np.float32)


def _e4m3_codes(values: np.ndarray, poisoned: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        codes = values.astype(E4M3).view(np.uint8)
    return np.where(poisoned[..., None], np.uint8(0), codes)


def _e2m1_codes(values: np.ndarray, poisoned: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        codes = values.astype(E2M1).view(np.uint8) & np.uint8(0x0F)
    return np.where(poisoned[..., None], np.uint8(0), codes)


def _pack_nibbles(codes: np.ndarray) -> np.ndarray:
    """[..., n] 4-bit codes -> [..., n/2] bytes, low nibble = even element."""
    return (codes[..., 0::2] | (codes[..., 1::2] << 4)).astype(np.uint8)


def _unpack_nibbles(packed: np.ndarray) -> np.ndarray:
    packed = np.asarray(packed, dtype=np.uint8)
    codes = np.empty((*packed.shape[:-1], packed.shape[-1] * 2), dtype=np.uint8)
    codes[..., 0::2] = packed & 0x0F
    codes[..., 1::2] = packed >> 4
    return codes


def _split_record(record: np.ndarray, data_bytes: int, scale_bytes: int, what: str):
    record = np.asarray(record, dtype=np.uint8)
    if record.shape[-1] != data_bytes + scale_bytes:
        raise ValueError(f"{what}: record has {record.shape[-1]} bytes, expected {data_bytes + scale_bytes}")
    return record[..., :data_bytes], record[..., data_bytes:]


# ---- KV-cache records (§2.2) ------------------------------------------------------------------------------


def fp8_window_row_bytes(channels: int) -> int:
    return channels + channels // FP8_WINDOW_BLOCK


def nvfp4_entry_bytes(channels: int) -> int:
    return channels // 2 + channels // NVFP4_BLOCK


def mxfp4_key_bytes(channels: int) -> int:
    return channels // 2 + channels // MXFP4_BLOCK


def fp8_window_scale_codes(amax) -> np.ndarray:
    return _pow2_ceil_code(_as_f32(amax), FP8_WINDOW_AMAX_FLOOR, FP8_MAX)


def nvfp4_scale_codes(amax) -> np.ndarray:
    """E4M3 scale code: e4m3_rne(max(amax, 6·2^-9) / 6), an fp32 division; overflow or NaN -> 0x7F."""
    with np.errstate(invalid="ignore", over="ignore"):
        quotient = np.maximum(_as_f32(amax), NVFP4_AMAX_FLOOR).astype(np.float32) / FP4_MAX
        codes = np.asarray(quotient.astype(E4M3).view(np.uint8))
    # Only a non-negative quotient reaches here, so NaN is always the positive NaN code.
    return np.where(np.isnan(_e4m3_value(codes)), E4M3_NAN, codes).astype(np.uint8)


def mxfp4_scale_codes(amax) -> np.ndarray:
    return _pow2_ceil_code(_as_f32(amax), MXFP4_AMAX_FLOOR, FP4_MAX)


def encode_fp8_window_row(x) -> np.ndarray:
    """[..., C] float -> [..., C + C/32] uint8: E4M3 data, then one UE8M0 scale per 32 channels."""
    blocks = _blocks(_as_f32(x), FP8_WINDOW_BLOCK, "encode_fp8_window_row")
    scale_codes = fp8_window_scale_codes(_amax(blocks))
    poisoned = scale_codes == E8M0_NAN
    codes = _e4m3_codes(_scaled(blocks, _e8m0_value(scale_codes), FP8_MAX), poisoned)
    return np.concatenate([codes.reshape(*codes.shape[:-2], -1), scale_codes], axis=-1)


def decode_fp8_window_row(record, channels: int | None = None) -> np.ndarray:
    record = np.asarray(record, dtype=np.uint8)
    channels = channels if channels is not None else record.shape[-1] * 32 // 33
    data, scales = _split_record(record, channels, channels // FP8_WINDOW_BLOCK, "decode_fp8_window_row")
    values = _blocks(_e4m3_value(data), FP8_WINDOW_BLOCK, "decode_fp8_window_row")
    return _times_scale(values, _e8m0_value(scales)).reshape(data.shape)


def encode_nvfp4_entry(x) -> np.ndarray:
    """[..., C] float -> [..., C/2 + C/16] uint8: E2M1 pairs, then one E4M3 scale per 16 channels."""
    blocks = _blocks(_as_f32(x), NVFP4_BLOCK, "encode_nvfp4_entry")
    scale_codes = nvfp4_scale_codes(_amax(blocks))
    scale = _e4m3_value(scale_codes)
    codes = _e2m1_codes(_scaled(blocks, scale, FP4_MAX), np.isnan(scale))
    return np.concatenate([_pack_nibbles(codes.reshape(*codes.shape[:-2], -1)), scale_codes], axis=-1)


def decode_nvfp4_entry(record, channels: int | None = None) -> np.ndarray:
    record = np.asarray(record, dtype=np.uint8)
    channels = channels if channels is not None else record.shape[-1] * 16 // 9
    data, scales = _split_record(record, channels // 2, channels // NVFP4_BLOCK, "decode_nvfp4_entry")
    values = _blocks(_e2m1_value(_unpack_nibbles(data)), NVFP4_BLOCK, "decode_nvfp4_entry")
    return _times_scale(values, _e4m3_value(scales)).reshape(*data.shape[:-1], channels)


def encode_mxfp4_key(x) -> np.ndarray:
    """[..., C] float -> [..., C/2 + C/32] uint8: E2M1 pairs, then one E8M0 scale per 32 channels."""
    blocks = _blocks(_as_f32(x), MXFP4_BLOCK, "encode_mxfp4_key")
    scale_codes = mxfp4_scale_codes(_amax(blocks))
    poisoned = scale_codes == E8M0_NAN
    codes = _e2m1_codes(_scaled(blocks, _e8m0_value(scale_codes), FP4_MAX), poisoned)
    return np.concatenate([_pack_nibbles(codes.reshape(*codes.shape[:-2], -1)), scale_codes], axis=-1)


def decode_mxfp4_key(record, channels: int | None = None) -> np.ndarray:
    record = np.asarray(record, dtype=np.uint8)
    channels = channels if channels is not None else record.shape[-1] * 32 // 17
    data, scales = _split_record(record, channels // 2, channels // MXFP4_BLOCK, "decode_mxfp4_key")
    values = _blocks(_e2m1_value(_unpack_nibbles(data)), MXFP4_BLOCK, "decode_mxfp4_key")
    return _times_scale(values, _e8m0_value(scales)).reshape(*data.shape[:-1], channels)


def fp8_window_fakequant(x) -> np.ndarray:
    """Quantize-dequantize over the last axis (window KV rows, §2.2.1); float32 out, same shape."""
    x = _as_f32(x)
    return decode_fp8_window_row(encode_fp8_window_row(x), x.shape[-1])


def nvfp4_fakequant(x) -> np.ndarray:
    """Quantize-dequantize over the last axis (compressed KV entries, §2.2.2); float32 out, same shape."""
    x = _as_f32(x)
    return decode_nvfp4_entry(encode_nvfp4_entry(x), x.shape[-1])


def mxfp4_fakequant(x) -> np.ndarray:
    """Quantize-dequantize over the last axis (index keys and queries, §2.2.3); float32 out, same shape."""
    x = _as_f32(x)
    return decode_mxfp4_key(encode_mxfp4_key(x), x.shape[-1])


# ---- checkpoint weights (§2.1) ----------------------------------------------------------------------------


def _matrix(w, what: str) -> np.ndarray:
    w = _as_f32(w)
    if w.ndim != 2:
        raise ValueError(f"{what}: expected a 2-D matrix, got shape {w.shape}")
    return w


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def quantize_fp8_block32(w):
    """[r, c] float -> (E4M3 codes uint8 [r, c], E8M0 scales uint8 [ceil(r/32), ceil(c/32)]), 32x32 tiles."""
    return quantize_fp8_tiles(w, WEIGHT_TILE)


def quantize_fp8_tiles(w, tile: int):
    """[r, c] float -> (E4M3 codes uint8 [r, c], E8M0 scales uint8 [ceil(r/tile), ceil(c/tile)]); V4.1 tiles are
    32x32, V4's 128x128."""
    w = _matrix(w, f"quantize_fp8_tiles({tile})")
    rows, cols = w.shape
    tr, tc = _ceil_div(rows, tile), _ceil_div(cols, tile)
    # Zero padding never changes a tile's amax: every tile holds at least one real element.
    padded = np.zeros((tr * tile, tc * tile), dtype=np.float32)
    padded[:rows, :cols] = w
    tiles = padded.reshape(tr, tile, tc, tile).transpose(0, 2, 1, 3).reshape(tr, tc, -1)
    scale_codes = _pow2_ceil_code(_amax(tiles), FP8_WEIGHT_AMAX_FLOOR, FP8_MAX)
    codes = _e4m3_codes(_scaled(tiles, _e8m0_value(scale_codes), FP8_MAX), scale_codes == E8M0_NAN)
    codes = codes.reshape(tr, tc, tile, tile).transpose(0, 2, 1, 3).reshape(padded.shape)
    return np.ascontiguousarray(codes[:rows, :cols]), scale_codes


def dequantize_fp8_block32(q, s) -> np.ndarray:
    """(E4M3 codes [r, c], E8M0 scales [ceil(r/32), ceil(c/32)]) -> float32 [r, c]."""
    return dequantize_fp8_tiles(q, s, WEIGHT_TILE)


def dequantize_fp8_tiles(q, s, tile: int) -> np.ndarray:
    """(E4M3 codes [r, c], E8M0 scales [ceil(r/tile), ceil(c/tile)]) -> float32 [r, c]; V4.1 tiles are 32x32,
    V4's 128x128."""
    q = np.asarray(q)
    s = np.asarray(s)
    if q.ndim != 2 or s.shape != (_ceil_div(q.shape[0], tile), _ceil_div(q.shape[1], tile)):
        raise ValueError(f"dequantize_fp8_tiles({tile}): codes {q.shape} do not match scales {s.shape}")
    scale = np.repeat(np.repeat(_e8m0_value(s.view(np.uint8)), tile, 0), tile, 1)
    with np.errstate(over="ignore", invalid="ignore"):
        return _e4m3_value(q.view(np.uint8)) * scale[: q.shape[0], : q.shape[1]]


def quantize_mxfp4_weight(w):
    """[r, c] float (c % 32 == 0) -> (packed uint8 [r, c/2], low nibble = even column; E8M0 [r, c/32])."""
    w = _matrix(w, "quantize_mxfp4_weight")
    blocks = _blocks(w, MXFP4_BLOCK, "quantize_mxfp4_weight")
    scale_codes = _pow2_ceil_code(_amax(blocks), MXFP4_AMAX_FLOOR, FP4_MAX)
    codes = _e2m1_codes(_scaled(blocks, _e8m0_value(scale_codes), FP4_MAX), scale_codes == E8M0_NAN)
    return _pack_nibbles(codes.reshape(w.shape)), scale_codes


def dequantize_mxfp4_weight(packed, s) -> np.ndarray:
    """(packed [r, c/2], E8M0 [r, c/32]) -> float32 [r, c]."""
    packed = np.asarray(packed).view(np.uint8)
    s = np.asarray(s).view(np.uint8)
    cols = packed.shape[-1] * 2 if packed.ndim == 2 else 0
    if packed.ndim != 2 or cols % MXFP4_BLOCK or s.shape != (packed.shape[0], cols // MXFP4_BLOCK):
        raise ValueError(f"dequantize_mxfp4_weight: packed {packed.shape} does not match scales {s.shape}")
    values = _blocks(_e2m1_value(_unpack_nibbles(packed)), MXFP4_BLOCK, "dequantize_mxfp4_weight")
    return _times_scale(values, _e8m0_value(s)).reshape(packed.shape[0], cols)


def quantize_fp8_rows32(t):
    """[r, c] float -> (E4M3 codes [r, c], E8M0 scales [r, ceil(c/32)]): one scale per 32 columns of a row."""
    t = _matrix(t, "quantize_fp8_rows32")
    rows, cols = t.shape
    groups = _ceil_div(cols, WEIGHT_TILE)
    padded = np.zeros((rows, groups * WEIGHT_TILE), dtype=np.float32)
    padded[:, :cols] = t
    blocks = padded.reshape(rows, groups, WEIGHT_TILE)
    scale_codes = _pow2_ceil_code(_amax(blocks), FP8_WEIGHT_AMAX_FLOOR, FP8_MAX)
    codes = _e4m3_codes(_scaled(blocks, _e8m0_value(scale_codes), FP8_MAX), scale_codes == E8M0_NAN)
    return np.ascontiguousarray(codes.reshape(padded.shape)[:, :cols]), scale_codes


def dequantize_fp8_rows32(q, s) -> np.ndarray:
    """(E4M3 codes [r, c], E8M0 scales [r, ceil(c/32)]) -> float32 [r, c]."""
    q = np.asarray(q)
    s = np.asarray(s)
    if q.ndim != 2 or s.shape != (q.shape[0], _ceil_div(q.shape[1], WEIGHT_TILE)):
        raise ValueError(f"dequantize_fp8_rows32: codes {q.shape} do not match scales {s.shape}")
    scale = np.repeat(_e8m0_value(s.view(np.uint8)), WEIGHT_TILE, 1)[:, : q.shape[1]]
    with np.errstate(over="ignore", invalid="ignore"):
        return _e4m3_value(q.view(np.uint8)) * scale


# ---- DeepSeek-V4 KV rows (window rows and compressed entries of deepseek_v4 checkpoints) -----------------

V4_KV_FP8_BLOCK = 64


def v4_kv_record_bytes(channels: int, rope_channels: int) -> int:
    """FP8 E4M3 non-RoPE channels + one UE8M0 scale per 64 of them (a partial block has one too) + BF16 RoPE
    channels, padded to 8 bytes (584 for 512 channels with 64 RoPE: 448 + 7 + 128, one pad byte)."""
    nope = channels - rope_channels
    return -(-(nope + -(-nope // V4_KV_FP8_BLOCK) + 2 * rope_channels) // 8) * 8


def v4_kv_fakequant(x, rope_channels: int) -> np.ndarray:
    """Quantize-dequantize a V4 KV row over the last axis: the leading non-RoPE channels FP8 E4M3 with a
    power-of-two (UE8M0) scale per 64 channels -- the official `act_quant(kv[..., :-rd], 64, 'ue8m0')` --, the
    trailing RoPE channels rounded to BF16. float32 out, same shape. A non-RoPE width that is not a multiple of 64
    ends in a partial group with a scale of its own over its channels (v4_kv_record_bytes counts its byte)."""
    x = _as_f32(x)
    nope = x.shape[-1] - rope_channels
    # Zero padding to whole groups leaves the partial group's amax (hence its scale) as over its own channels.
    padded = -(-nope // V4_KV_FP8_BLOCK) * V4_KV_FP8_BLOCK
    head = np.zeros((*x.shape[:-1], padded), np.float32)
    head[..., :nope] = x[..., :nope]
    blocks = _blocks(head, V4_KV_FP8_BLOCK, "v4_kv_fakequant")
    scale_codes = fp8_window_scale_codes(_amax(blocks))
    poisoned = scale_codes == E8M0_NAN
    codes = _e4m3_codes(_scaled(blocks, _e8m0_value(scale_codes), FP8_MAX), poisoned)
    values = _times_scale(_e4m3_value(codes), _e8m0_value(scale_codes)).reshape(*x.shape[:-1], padded)[..., :nope]
    rope = x[..., nope:].astype(ml_dtypes.bfloat16).astype(np.float32)
    return np.concatenate([values, rope], axis=-1)
