"""KV records and checkpoint weight formats: the C++ codecs against tests/reference/formats.py (numpy + ml_dtypes).

Quantizers must agree byte for byte, dequantizers bit for bit, on fresh random data each run (seed printed on
failure): magnitudes 1e-6 .. 1e4, rows with one huge outlier, rows in the scale-floor region, constant rows,
rows built to land exactly on E2M1/E4M3 ties, signed zeros, and poisoned rows (NaN / Inf). formats.py itself is
checked against hand-computed facts of the spec.
"""

import os

import ml_dtypes
import numpy as np
import pytest

from reference import formats

SEED = int.from_bytes(os.urandom(8), "little")

E4M3 = ml_dtypes.float8_e4m3fn
E2M1_MIDPOINTS = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0], dtype=np.float32)

# name, block, C values, C++ quantize / dequantize / fakequant, formats encode / decode / fakequant / scale codes
RECORDS = {
    "fp8": (32, (32, 64, 512), "quantize_fp8_row", "dequantize_fp8_row", "fakequant_fp8_row",
            formats.encode_fp8_window_row, formats.decode_fp8_window_row, formats.fp8_window_fakequant,
            "fp8_block_scale_code", formats.fp8_window_scale_codes),
    "nvfp4": (16, (32, 64, 512), "quantize_nvfp4_entry", "dequantize_nvfp4_entry", "fakequant_nvfp4",
              formats.encode_nvfp4_entry, formats.decode_nvfp4_entry, formats.nvfp4_fakequant,
              "nvfp4_block_scale_code", formats.nvfp4_scale_codes),
    "mxfp4": (32, (32, 128), "quantize_mxfp4_key", "dequantize_mxfp4_key", "fakequant_mxfp4",
              formats.encode_mxfp4_key, formats.decode_mxfp4_key, formats.mxfp4_fakequant,
              "mxfp4_block_scale_code", formats.mxfp4_scale_codes),
}
CASES = [(name, C) for name, spec in RECORDS.items() for C in spec[1]]


@pytest.fixture
def rng():
    print(f"formats records seed: {SEED}")
    return np.random.default_rng(SEED)


def assert_bytes_equal(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    bad = np.argwhere(got != want)
    if bad.size:
        pytest.fail(f"{what}: {len(bad)} bytes differ (seed {SEED}); first at {tuple(bad[0])}: "
                    f"{got[tuple(bad[0])]:#x} vs {want[tuple(bad[0])]:#x}")


def assert_floats_equal(got, want, what):
    """Bitwise equality, any NaN matching any NaN."""
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    same = (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))
    if not same.all():
        i = tuple(np.argwhere(~same)[0])
        pytest.fail(f"{what}: {np.sum(~same)} values differ (seed {SEED}); first at {i}: {got[i]!r} vs {want[i]!r}")


def tie_rows(rng, name, n_rows, C):
    """Rows whose block scale is known exactly and whose elements sit exactly on rounding ties."""
    block = RECORDS[name][0]
    rows = np.empty((n_rows, C), dtype=np.float32)
    for r in range(n_rows):
        for b in range(0, C, block):
            k = int(rng.integers(-12, 8))
            if name == "fp8":
                scale, top = np.float32(2.0**k), np.float32(448)
                codes = np.arange(0x01, 0x7E, dtype=np.uint8).view(E4M3).astype(np.float64)
                mids = ((codes[:-1] + codes[1:]) / 2).astype(np.float32)
            else:
                # NVFP4: an E4M3 scale value s with 6·s exact; MXFP4: a power of two. amax = 6·s keeps s.
                scale = np.float32(2.0**k * (1 + rng.integers(0, 8) / 8)) if name == "nvfp4" else np.float32(2.0**k)
                top, mids = np.float32(6), E2M1_MIDPOINTS
            values = rng.choice(mids, block) * scale * rng.choice([-1, 1], block)
            values[rng.integers(block)] = top * scale
            rows[r, b:b + block] = values
    return rows


def adversarial_rows(rng, name, C):
    n = 24
    gauss = rng.standard_normal((n, C)).astype(np.float32)
    magnitude = np.float32(10.0) ** rng.uniform(-6, 4, (n, 1)).astype(np.float32)
    rows = [gauss * magnitude]
    outlier = rng.standard_normal((n, C)).astype(np.float32) * np.float32(0.01)
    outlier[np.arange(n), rng.integers(0, C, n)] = rng.choice([-1, 1], n) * np.float32(10.0) ** rng.uniform(2, 4, n)
    rows.append(outlier)
    floor = {"fp8": 1e-4, "nvfp4": 6 * 2.0**-9, "mxfp4": 6 * 2.0**-126}[name]
    rows.append((rng.uniform(-1, 1, (n, C)) * floor * rng.uniform(0.01, 1.5, (n, 1))).astype(np.float32))
    rows.append(np.repeat(rng.standard_normal((n, 1)).astype(np.float32) * 3, C, axis=1))
    rows.append(tie_rows(rng, name, n, C))
    zeros = gauss.copy()
    zeros[:, ::3] = 0.0
    zeros[:, 1::3] = -0.0
    zeros[0] = 0.0
    zeros[1] = -0.0
    rows.append(zeros)
    poisoned = rng.standard_normal((4, C)).astype(np.float32)
    poisoned[0, rng.integers(C)] = np.nan
    poisoned[1, rng.integers(C)] = np.inf
    poisoned[2, rng.integers(C)] = -np.inf
    poisoned[3, :] = np.float32(3e4) if name == "nvfp4" else np.nan  # NVFP4: amax/6 rounds past 448
    rows.append(poisoned)
    return np.concatenate(rows)


@pytest.mark.parametrize("name,C", CASES)
def test_quantize_matches_formats_py_byte_for_byte(fkt, rng, name, C):
    _, _, quantize, dequantize, fakequant, encode, decode, fake_ref, _, _ = RECORDS[name]
    x = adversarial_rows(rng, name, C).reshape(4, -1, C)  # leading shape is kept
    records = getattr(fkt, quantize)(x)
    assert_bytes_equal(records, encode(x), f"{quantize} C={C}")
    assert_floats_equal(getattr(fkt, dequantize)(records, C), decode(records, C), f"{dequantize} C={C}")
    assert_floats_equal(getattr(fkt, fakequant)(x), fake_ref(x), f"{fakequant} C={C}")


@pytest.mark.parametrize("name,C", CASES)
def test_dequantize_random_bytes_matches_formats_py(fkt, rng, name, C):
    """Every byte pattern decodes alike, NaN scales and unused codes included (independent of the encoders)."""
    _, _, _, dequantize, _, encode, decode, _, _, _ = RECORDS[name]
    n_bytes = encode(np.ones((1, C), np.float32)).shape[-1]
    records = rng.integers(0, 256, (64, n_bytes), dtype=np.uint8)
    assert_floats_equal(getattr(fkt, dequantize)(records, C), decode(records, C), f"{dequantize} C={C}")


@pytest.mark.parametrize("name", RECORDS)
def test_block_scale_codes_match_formats_py(fkt, rng, name):
    scale_fn, scale_ref = RECORDS[name][8], RECORDS[name][9]
    amax = np.abs(np.exp2(rng.uniform(-140, 128, 200_000))).astype(np.float32)
    # Around every power of two times 448 and 6, where the rounding up switches.
    edges = np.array([448.0 * 2.0**k for k in range(-140, 118)] + [6.0 * 2.0**k for k in range(-140, 124)], np.float32)
    edges = np.concatenate([edges, np.nextafter(edges, np.float32(np.inf)), np.nextafter(edges, np.float32(0))])
    amax = np.concatenate([amax, edges, [0.0, np.nan, np.inf, 1e-4, 6 * 2.0**-9, 6 * 2.0**-126]]).astype(np.float32)
    assert_bytes_equal(getattr(fkt, scale_fn)(amax), scale_ref(amax), scale_fn)


def test_nvfp4_scale_is_a_division_by_6_near_every_e4m3_tie(fkt):
    """amax/6 and amax·(1/6) round to different E4M3 scales for a few fp32 amax next to 6·(E4M3 midpoint):
    the C++ must follow the division (NeMo, TensorRT-LLM, spec), and so must formats.py."""
    codes = np.arange(0x01, 0x7E, dtype=np.uint8).view(E4M3).astype(np.float64)
    tie_amax = ((codes[:-1] + codes[1:]) / 2 * 6).astype(np.float32)
    candidates = [tie_amax]
    lower, upper = tie_amax.copy(), tie_amax.copy()
    for _ in range(4):
        lower = np.nextafter(lower, np.float32(0))
        upper = np.nextafter(upper, np.float32(np.inf))
        candidates += [lower, upper]
    amax = np.concatenate(candidates)
    by_division = (amax / np.float32(6)).astype(E4M3).view(np.uint8)
    by_reciprocal = (amax * np.float32(1 / 6)).astype(E4M3).view(np.uint8)
    assert np.any(by_division != by_reciprocal), "the test set no longer separates the two rules"
    assert_bytes_equal(fkt.nvfp4_block_scale_code(amax), by_division, "nvfp4_block_scale_code")
    assert_bytes_equal(formats.nvfp4_scale_codes(amax), by_division, "formats.nvfp4_scale_codes")


# ---- formats.py against hand-computed facts of the spec ---------------------------------------------------


def test_formats_py_record_sizes_and_hand_computed_nvfp4_block():
    assert formats.nvfp4_entry_bytes(512) == 288
    assert formats.mxfp4_key_bytes(128) == 68
    assert formats.fp8_window_row_bytes(512) == 528
    # amax 3 -> scale e4m3(0.5) = 0x30. 3/0.5 = 6 -> 0x7; 0.25/0.5 = 0.5 -> 0x1; 0.375/0.5 = 0.75, a tie between
    # 0.5 (odd code 1) and 1 (even code 2) -> 0x2; -1.25/0.5 = -2.5, a tie between 2 (code 4) and 3 (code 5)
    # -> -2 = 0xC; -0.0 -> 0x8.
    x = np.zeros(16, np.float32)
    x[:5] = [3.0, 0.25, 0.375, -1.25, -0.0]
    record = formats.encode_nvfp4_entry(x)
    assert record.shape == (9,)
    assert record[8] == 0x30
    assert record[0] == 0x7 | (0x1 << 4)
    assert record[1] == 0x2 | (0xC << 4)
    assert record[2] == 0x8
    assert list(formats.decode_nvfp4_entry(record)[:5]) == [3.0, 0.25, 0.5, -1.0, 0.0]


def test_formats_py_hand_computed_fp8_and_mxfp4_scales():
    # FP8: amax 448 -> scale 2^0 (code 127); 449 -> 2^1 (128); all zero -> floor 1e-4/448 -> 2^-22 (105).
    assert list(formats.fp8_window_scale_codes(np.float32([448, 449, 0]))) == [127, 128, 105]
    # MXFP4: amax 6 -> 2^0; 6.5 -> 2^1; 0 -> 2^-126 (code 1).
    assert list(formats.mxfp4_scale_codes(np.float32([6, 6.5, 0]))) == [127, 128, 1]
    row = np.zeros(32, np.float32)
    row[0], row[1] = 6.5, 1.0  # scale 2: 6.5/2 = 3.25 -> 3 (code 5); 1/2 = 0.5 (code 1)
    record = formats.encode_mxfp4_key(row)
    assert record[0] == 0x5 | (0x1 << 4) and record[16] == 128


# ---- checkpoint weight formats ----------------------------------------------------------------------------

WEIGHT_SHAPES = [(1, 1), (31, 33), (32, 32), (45, 70), (64, 96), (100, 37)]


def random_weights(rng, rows, cols):
    w = rng.standard_normal((rows, cols)).astype(np.float32) * np.float32(10.0) ** rng.uniform(-6, 3)
    w[rng.integers(rows), rng.integers(cols)] *= 1000  # one outlier tile
    return w


@pytest.mark.parametrize("fmt", ["fp8_block32", "fp8_rows32"])
@pytest.mark.parametrize("rows,cols", WEIGHT_SHAPES)
def test_fp8_formats_match_formats_py(fkt, rng, rows, cols, fmt):
    w = random_weights(rng, rows, cols)
    q, s = getattr(fkt, f"quantize_{fmt}")(w)
    q_ref, s_ref = getattr(formats, f"quantize_{fmt}")(w)
    assert_bytes_equal(q, q_ref, f"{fmt} codes")
    assert_bytes_equal(s, s_ref, f"{fmt} scales")
    codes = rng.integers(0, 256, (rows, cols), dtype=np.uint8)
    scales = rng.integers(100, 150, s.shape, dtype=np.uint8)
    assert_floats_equal(getattr(fkt, f"dequantize_{fmt}")(codes, scales),
                        getattr(formats, f"dequantize_{fmt}")(codes, scales), f"dequantize_{fmt}")


@pytest.mark.parametrize("rows,cols", [(1, 32), (7, 64), (33, 96), (64, 256)])
def test_mxfp4_weight_matches_formats_py(fkt, rng, rows, cols):
    w = random_weights(rng, rows, cols)
    packed, s = fkt.quantize_mxfp4_weight(w)
    packed_ref, s_ref = formats.quantize_mxfp4_weight(w)
    assert packed.shape == (rows, cols // 2) and s.shape == (rows, cols // 32)
    assert_bytes_equal(packed, packed_ref, "mxfp4 packed")
    assert_bytes_equal(s, s_ref, "mxfp4 scales")
    codes = rng.integers(0, 256, (rows, cols // 2), dtype=np.uint8)
    scales = rng.integers(100, 150, s.shape, dtype=np.uint8)
    assert_floats_equal(fkt.dequantize_mxfp4_weight(codes, scales), formats.dequantize_mxfp4_weight(codes, scales),
                        "dequantize_mxfp4_weight")


def test_weight_quantizers_bound_the_error(rng):
    """formats.py weight quantizers: every value within half a step of its block's grid (scale·step/2)."""
    w = random_weights(rng, 45, 70)
    q, s = formats.quantize_fp8_block32(w)
    deq = formats.dequantize_fp8_block32(q, s)
    scale = np.repeat(np.repeat(np.ldexp(1.0, s.astype(np.int64) - 127), 32, 0), 32, 1)[:45, :70]
    assert np.all(np.abs(w / scale) <= 448)
    # E4M3 spacing at |v|: 2^(floor(log2|v|) - 3), at least 2^-9.
    v = np.abs(w / scale)
    step = np.ldexp(1.0, np.maximum(np.floor(np.log2(np.maximum(v, 2.0**-6))), -6).astype(np.int64) - 3)
    assert np.all(np.abs(deq - w) <= scale * step / 2 * (1 + 1e-6))


def test_bad_arguments_raise_errors_naming_the_function(fkt):
    with pytest.raises(RuntimeError, match="quantize_nvfp4_entry: C = 24"):
        fkt.quantize_nvfp4_entry(np.zeros((2, 24), np.float32))
    with pytest.raises(RuntimeError, match="dequantize_fp8_row: records must be"):
        fkt.dequantize_fp8_row(np.zeros((2, 10), np.uint8), 64)
    with pytest.raises(RuntimeError, match="dequantize_mxfp4_weight: scales must have shape"):
        fkt.dequantize_mxfp4_weight(np.zeros((2, 16), np.uint8), np.zeros((2, 2), np.uint8))
    with pytest.raises(ValueError, match="multiple of 16"):
        formats.encode_nvfp4_entry(np.zeros((2, 24), np.float32))
