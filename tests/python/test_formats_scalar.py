"""Scalar codecs of include/flashkv/numeric/scalar_codecs.hpp against ml_dtypes, bit for bit.

Decoders: every code of E4M3, E2M1, E8M0 and BF16. Encoders: a fresh random float32 sample per run (seed printed
on failure) spanning every binade, exact ties between neighbouring codes and their fp32 neighbours, fp32
subnormals, values around each format's largest finite value, ±0, ±Inf and NaNs with random payloads and signs.
"""

import os

import ml_dtypes
import numpy as np
import pytest

SEED = int.from_bytes(os.urandom(8), "little")

E4M3 = ml_dtypes.float8_e4m3fn
E2M1 = ml_dtypes.float4_e2m1fn
E8M0 = ml_dtypes.float8_e8m0fnu
BF16 = ml_dtypes.bfloat16


@pytest.fixture
def rng():
    print(f"formats scalar seed: {SEED}")
    return np.random.default_rng(SEED)


def bits(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float32).view(np.uint32)


def assert_same_bits(got: np.ndarray, want: np.ndarray, inputs: np.ndarray, what: str) -> None:
    got = np.asarray(got)
    want = np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, what
    bad = np.flatnonzero(got.reshape(-1) != want.reshape(-1))
    if bad.size:
        i = bad[0]
        inp = np.asarray(inputs).reshape(-1)[i]
        shown = hex(int(inp.view(np.uint32))) if inp.dtype == np.float32 else hex(int(inp))
        pytest.fail(
            f"{what}: {bad.size} mismatches (seed {SEED}); first input {shown} -> "
            f"{hex(int(got.reshape(-1)[i]))}, ml_dtypes {hex(int(want.reshape(-1)[i]))}"
        )


# ---- decoders: every code ------------------------------------------------------------------------------


def test_every_e4m3_code_decodes_like_ml_dtypes(fkt):
    codes = np.arange(256, dtype=np.uint8)
    assert_same_bits(bits(fkt.e4m3_to_float(codes)), bits(codes.view(E4M3).astype(np.float32)), codes, "e4m3")


def test_every_e2m1_code_decodes_like_ml_dtypes_and_the_high_nibble_is_ignored(fkt):
    codes = np.arange(256, dtype=np.uint8)
    want = (codes & 0x0F).view(E2M1).astype(np.float32)
    assert_same_bits(bits(fkt.e2m1_to_float(codes)), bits(want), codes, "e2m1")


def test_every_e8m0_code_decodes_like_ml_dtypes(fkt):
    codes = np.arange(256, dtype=np.uint8)
    with np.errstate(invalid="ignore"):
        want = codes.view(E8M0).astype(np.float32)
    assert_same_bits(bits(fkt.e8m0_to_float(codes)), bits(want), codes, "e8m0")


def test_every_bf16_code_decodes_like_ml_dtypes(fkt):
    codes = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    assert_same_bits(bits(fkt.bf16_to_float(codes)), bits(codes.view(BF16).astype(np.float32)), codes, "bf16")


# ---- encoders: adversarial random sample ---------------------------------------------------------------


def representable(dtype, n_codes: int) -> np.ndarray:
    """Finite non-negative values of a format, ascending."""
    with np.errstate(invalid="ignore"):
        values = np.arange(n_codes, dtype=np.uint8).view(dtype).astype(np.float64)
    values = values[np.isfinite(values) & (values >= 0)]
    return np.unique(values)


def ties_and_neighbours(values: np.ndarray) -> np.ndarray:
    """Midpoints between consecutive representable values (exact in fp32), their fp32 neighbours, the values
    themselves and half the smallest step above the largest value (where rounding overflows)."""
    mids = (values[:-1] + values[1:]) / 2
    above = values[-1] + (values[-1] - values[-2]) / 2
    points = np.concatenate([mids, [above], values]).astype(np.float32)
    assert np.all(points[: mids.size].astype(np.float64) == mids), "midpoints must be exact in fp32"
    up = np.nextafter(points, np.float32(np.inf))
    down = np.nextafter(points, np.float32(0))
    with np.errstate(over="ignore"):
        return np.concatenate([points, up, down, 2 * points, points / 2])


def special_values(rng) -> np.ndarray:
    nan_payloads = rng.integers(1, 1 << 23, 64, dtype=np.uint32)
    nans = np.concatenate([0x7F800000 | nan_payloads, 0xFF800000 | nan_payloads, [0x7FC00000, 0xFFC00000]])
    edges = np.array(
        [0.0, -0.0, np.inf, -np.inf, 448, 449, 464, 480, 6, 7, 2.0**127, 1.5 * 2.0**127, 3.4e38, 2.0**-126,
         2.0**-127, 2.0**-149, 1.0, 1.5],
        dtype=np.float32,
    )
    return np.concatenate([nans.astype(np.uint32).view(np.float32), edges, -edges])


def random_sample(rng, n: int = 400_000) -> np.ndarray:
    random_bits = rng.integers(0, 1 << 32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore"):
        log_uniform = (np.exp2(rng.uniform(-150, 128, n)) * rng.choice([-1, 1], n)).astype(np.float32)
    magnitudes = [1e-6, 1e-3, 0.1, 1, 10, 448, 1e4]
    uniform = np.concatenate([rng.uniform(-m, m, n // 8) for m in magnitudes]).astype(np.float32)
    subnormal_bits = rng.integers(1, 1 << 23, n // 8, dtype=np.uint32) | (rng.integers(0, 2, n // 8, dtype=np.uint32) << 31)
    sample = [random_bits, log_uniform, uniform, subnormal_bits.view(np.float32), special_values(rng)]
    for dtype, n_codes in ((E4M3, 256), (E2M1, 16), (E8M0, 256), (BF16, 0)):
        if n_codes:
            ties = ties_and_neighbours(representable(dtype, n_codes))
            sample += [ties, -ties]
    # BF16 ties: values halfway between random neighbouring BF16 codes (an fp32 with the low 16 bits 0x8000).
    bf16_ties = (rng.integers(0, 1 << 16, n // 8, dtype=np.uint32) << 16) | 0x8000
    sample += [bf16_ties.view(np.float32), (bf16_ties ^ 1).view(np.float32)]
    return rng.permutation(np.concatenate(sample).astype(np.float32))


@pytest.mark.parametrize(
    "codec,dtype,mask",
    [("e4m3_from_float", E4M3, 0xFF), ("e2m1_from_float", E2M1, 0x0F), ("e8m0_from_float", E8M0, 0xFF)],
)
def test_8bit_encoders_match_ml_dtypes(fkt, rng, codec, dtype, mask):
    x = random_sample(rng)
    with np.errstate(invalid="ignore", over="ignore"):
        want = x.astype(dtype).view(np.uint8) & np.uint8(mask)
    assert_same_bits(getattr(fkt, codec)(x), want, x, codec)


def test_bf16_encoder_matches_ml_dtypes(fkt, rng):
    x = random_sample(rng)
    with np.errstate(invalid="ignore"):
        want = x.astype(BF16).view(np.uint16)
    assert_same_bits(fkt.bf16_from_float(x), want, x, "bf16_from_float")


def test_e4m3_satfinite_saturates_to_448_and_keeps_nan(fkt, rng):
    x = random_sample(rng)
    got = fkt.e4m3_from_float_satfinite(x)
    nan = np.isnan(x)
    clipped = np.clip(x[~nan], -448, 448)
    assert_same_bits(got[~nan], clipped.astype(E4M3).view(np.uint8), x[~nan], "satfinite on non-NaN")
    want_nan = np.where(np.signbit(x[nan]), 0xFF, 0x7F).astype(np.uint8)
    assert_same_bits(got[nan], want_nan, x[nan], "satfinite on NaN")
    # Every value that would overflow saturates rather than becoming NaN.
    big = np.array([464.0001, 480, 1e30, np.inf], dtype=np.float32)
    assert list(fkt.e4m3_from_float_satfinite(big)) == [0x7E] * 4
    assert list(fkt.e4m3_from_float_satfinite(-big)) == [0xFE] * 4


def test_e8m0_ceil_pow2_is_the_smallest_power_of_two_not_below_x(fkt, rng):
    x = np.abs(random_sample(rng))
    x = x[np.isfinite(x) & (x > 2.0**-127) & (x <= 2.0**127)]
    codes = fkt.e8m0_ceil_pow2(x).astype(np.int64)
    # Independent of the bit test: frexp gives x = m·2^e with m in [0.5, 1).
    mantissa, exponent = np.frexp(x.astype(np.float64))
    want = np.where(mantissa == 0.5, exponent - 1, exponent) + 127
    assert_same_bits(codes, want.astype(np.int64), x, "e8m0_ceil_pow2")
    value = np.ldexp(1.0, codes - 127)
    assert np.all(value >= x) and np.all(value / 2 < x)


def test_e8m0_ceil_pow2_edges(fkt):
    x = np.array(
        [0.0, -0.0, -1.0, np.nan, np.inf, -np.inf, 2.0**-127, 2.0**-149, 1.5 * 2.0**-127, 2.0**-126, 1.0,
         np.nextafter(np.float32(1), np.float32(2)), 2.0**127, np.nextafter(np.float32(2.0**127), np.float32(np.inf))],
        dtype=np.float32,
    )
    want = [0, 0, 0, 0xFF, 0xFF, 0, 0, 0, 1, 1, 127, 128, 254, 0xFF]
    assert list(fkt.e8m0_ceil_pow2(x)) == want


@pytest.mark.parametrize("codec,dtype,n_codes", [("e4m3", E4M3, 256), ("e2m1", E2M1, 16), ("e8m0", E8M0, 255)])
def test_decode_then_encode_returns_every_non_nan_code(fkt, codec, dtype, n_codes):
    codes = np.arange(n_codes, dtype=np.uint8)
    values = getattr(fkt, f"{codec}_to_float")(codes)
    keep = ~np.isnan(values)
    assert_same_bits(getattr(fkt, f"{codec}_from_float")(values[keep]), codes[keep], codes[keep], codec)
