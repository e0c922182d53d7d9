"""One convention for the V4-Flash KV record (window rows and compressed entries) on every deepseek_v4 config in
tests/data (the released config, tiny-v4, the transformers golden configs): FP8 E4M3 non-RoPE channels with one
UE8M0 scale per 64 of them -- a partial last group has its scale too -- plus the BF16 RoPE channels, padded to 8
bytes (MODEL.md §2.2 last paragraph). Three implementations must agree with that layout and with each other:

- the C++ memory report (`flashkv info --json`: kv_entry_bytes, window_row_bytes, index_key_bytes),
- the numpy reference (config_v4.kv_row_bytes_v4 / index_key_bytes_v4, formats.v4_kv_fakequant),
- the CPU engine's record code (backend::record_bytes and CpuBackend::quantize_rope_rows through flashkv_testing):
  its records have that many bytes and decode to the reference's values bit for bit on fresh random rows.

Golden v4-a/b/c have non-RoPE widths 24, 8 and 32 (partial groups), so the convention is exercised."""

from __future__ import annotations

import json
import os
import pathlib

import numpy as np
import pytest

from reference import formats
from reference.config_v4 import config_v4_from_dict, index_key_bytes_v4, kv_row_bytes_v4

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("FLASHKV_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
CONFIGS = [path for path in sorted((ROOT / "tests/data").glob("**/config.json"))
           if json.loads(path.read_text(encoding="utf-8")).get("model_type") == "deepseek_v4"]


def spec_record_bytes(channels: int, rope: int) -> int:
    """The layout written out: nope FP8 codes + ceil(nope / 64) scale bytes + 2 bytes per RoPE channel, to 8."""
    nope = channels - rope
    scales = (nope + 63) // 64
    return (nope + scales + 2 * rope + 7) // 8 * 8


def test_every_kind_of_config_is_covered():
    names = {path.parent.name for path in CONFIGS}
    assert {"deepseek-v4-flash", "tiny-v4", "v4-a", "v4-b", "v4-c"} <= names
    partial = [path.parent.name for path in CONFIGS if _widths(path)[0] % 64]
    assert partial, "no V4 config with a partial scale group: the convention would go untested"


def _widths(path: pathlib.Path) -> tuple[int, int, int]:
    config = config_v4_from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))
    return config.head_dim - config.qk_rope_head_dim, config.qk_rope_head_dim, config.index_head_dim


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.parent.name)
def test_record_bytes_agree(path, flashkv_info, fkt):
    config = config_v4_from_dict(json.loads(path.read_text(encoding="utf-8")), str(path))
    channels, rope, index_dim = config.head_dim, config.qk_rope_head_dim, config.index_head_dim
    expected = spec_record_bytes(channels, rope)
    info = flashkv_info(path)
    assert info["kv_entry_bytes"] == info["window_row_bytes"] == expected, "C++ memory report"
    assert kv_row_bytes_v4(config) == expected, "numpy reference"
    assert fkt.v4_record_bytes(channels, rope) == expected, "engine record code"
    # MXFP4 index keys: a partial block of 32 has its scale too in the report and the reference; the engine runs
    # faithful numerics only for power-of-two index widths >= 32 (whole blocks), where its size must agree.
    key = (index_dim + 1) // 2 + (index_dim + 31) // 32
    assert info["index_key_bytes"] == index_key_bytes_v4(config) == key
    if index_dim % 32 == 0:
        assert fkt.engine_index_key_bytes(index_dim) == key


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.parent.name)
def test_engine_records_decode_to_the_reference_values(path, fkt):
    """Size and content: the engine's records of fresh random rows (wide and narrow magnitudes per group, so
    scales differ between groups) decode to formats.v4_kv_fakequant's values bit for bit."""
    nope, rope, _ = _widths(path)
    channels = nope + rope
    rng = np.random.default_rng([SEED, channels, rope])
    x = (rng.standard_normal((7, channels)) * np.exp2(rng.integers(-12, 8, size=(7, channels)))).astype(np.float32)
    records, values = fkt.quantize_v4_records(x, rope)
    assert records.shape == (7, spec_record_bytes(channels, rope))
    expected = formats.v4_kv_fakequant(x, rope)
    assert np.array_equal(values, expected), f"seed {SEED}: engine and reference V4 records differ"
    assert not np.array_equal(values[:, :nope], x[:, :nope])  # the quantizer did something
