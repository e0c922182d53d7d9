"""Engram of the reference (MODEL.md §7): prime-sized tables, pinned multipliers, hashing, gate.

Oracles: the prime rule recomputed here with a plain trial-division prime test; the multipliers re-derived with numpy
PCG64 from the rule text; one position's table rows recomputed with Python integers; the gate from the formula.
"""

from __future__ import annotations

import json
import math
import os
import pathlib

import numpy as np
import pytest

from reference import engram
from reference.config import load_config
from reference.numerics import Numerics
from reference.presets import preset

ROOT = pathlib.Path(__file__).resolve().parents[2]
# deepseek_v4 configs have no Engram
DATA_CONFIGS = [path for path in sorted((ROOT / "tests/data/configs").glob("*/config.json"))
                if json.loads(path.read_text(encoding="utf-8")).get("model_type") != "deepseek_v4"]


@pytest.fixture
def rng():
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")
    return np.random.default_rng(seed)


def _trial_division_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))


def _configs():
    configs = [preset(name) for name in ("official", "tiny", "tiny_alt")]
    return configs + [load_config(path) for path in DATA_CONFIGS]


def test_official_tables_follow_the_prime_rule():
    config = preset("official")
    primes = engram.engram_primes(config)
    assert primes[0][:3] == [16000057, 16000079, 16000081]
    assert [sum(p) for p in primes] == [384006168, 384016682]
    flat = primes[0] + primes[1]
    assert all(_trial_division_prime(p) for p in flat)
    # consecutive: no prime is skipped between 15,999,999 and the last one handed out
    assert [n for n in range(16000000, flat[-1] + 1) if _trial_division_prime(n)] == flat
    assert engram.engram_offsets(primes[0])[:3] == [0, 16000057, 16000057 + 16000079]


@pytest.mark.parametrize("config", _configs(), ids=lambda c: c.source)
def test_every_config_declares_the_table_sizes_the_rule_gives(config):
    expected, candidate = [], config.engram_vocab_size
    for _ in config.engram_layer_ids:
        layer = []
        while len(layer) < config.engram_columns:
            if _trial_division_prime(candidate):
                layer.append(candidate)
            candidate += 1
        expected.append(sum(layer))
    assert list(config.engram_num_embeddings) == expected


def test_a_wrong_table_size_is_refused_with_the_field_named():
    config = preset("tiny")
    broken = type(config)(**{**config.__dict__, "engram_num_embeddings": (6126, 6333)})
    with pytest.raises(engram.EngramError, match="engram_num_embeddings"):
        engram.engram_layouts(broken)


def test_pinned_multipliers_are_rederived_exactly():
    document = json.loads(engram.MULTIPLIER_FIXTURE.read_text())
    assert {"official", "tiny"} <= {e["config"] for e in document["entries"]}
    for entry in document["entries"]:
        vocab, layer, size = entry["compressed_vocab_size"], entry["layer_id"], entry["max_ngram_size"]
        bound = (np.iinfo(np.int64).max // vocab) // 2
        draws = np.random.default_rng(10007 * layer).integers(0, bound, size)
        assert [int(v) for v in entry["multipliers"]] == [2 * int(x) + 1 for x in draws], entry
        assert all(isinstance(v, str) for v in entry["multipliers"])  # exact beyond 2^53 for every reader
    official = {e["layer_id"] for e in document["entries"] if e["compressed_vocab_size"] == 99092}
    assert official == {1, 14}


@pytest.mark.parametrize("config", _configs(), ids=lambda c: c.source)
def test_every_shipped_config_has_pinned_multipliers(config):
    pinned = engram.pinned_multipliers()
    for layer in config.engram_layer_ids:
        assert (config.engram_compressed_vocab_size, config.engram_max_ngram_size, layer) in pinned


def test_hash_rows_of_one_position_by_hand(rng):
    config = preset("tiny")
    layout = engram.engram_layouts(config)[2]
    lookup = engram.token_map(config)
    pad = int(lookup[config.engram_pad_token_id])
    ids = rng.integers(0, config.vocab_size, 7)
    history = np.full(3, pad)
    tokens = engram.ngram_ids(history, lookup[ids], 4)
    rows = engram.hash_rows(tokens, layout, config.engram_n_heads)
    m = [int(v) for v in layout.multipliers]
    for t in (1, 6):  # t = 1 pads k = 2, 3 (before the sequence start)
        c = [int(ids[t - k]) % 400 if t - k >= 0 else 2 for k in range(4)]
        products = [c[k] * m[k] for k in range(4)]
        h = {2: products[0] ^ products[1]}
        h[3] = h[2] ^ products[2]
        h[4] = h[3] ^ products[3]
        primes = [int(p) for p in layout.primes]
        offsets = [0, *np.cumsum(primes)[:-1].tolist()]
        for n in (2, 3, 4):
            for e in range(2):
                col = (n - 2) * 2 + e
                assert rows[t, col] == h[n] % primes[col] + offsets[col]
    assert rows.max() < config.engram_num_embeddings[1]


def test_gate_and_update_follow_the_formula(rng):
    config = preset("tiny")
    hc, d, cols = config.hc_mult, config.hidden_size, config.engram_columns
    weights = {"engram.embed.weight": rng.normal(0, 0.5, (50, config.engram_head_dim)),
               "engram.wkv.weight": rng.normal(0, 0.05, ((hc + 1) * d, cols * config.engram_head_dim)),
               "engram.q_weight": 1 + rng.normal(0, 0.1, (hc, d)), "engram.k_weight": 1 + rng.normal(0, 0.1, (hc, d))}
    streams = rng.normal(0, 1, (2, hc, d))
    rows = rng.integers(0, 50, (2, cols))
    out = engram.engram_update(streams, rows, weights, config, Numerics("clean"))
    memory = np.concatenate([weights["engram.embed.weight"][r] for r in rows[1]])
    kv = weights["engram.wkv.weight"] @ memory
    value = kv[hc * d :]
    for i in range(hc):
        key = kv[i * d : (i + 1) * d]
        x = streams[1, i]
        omega = weights["engram.q_weight"][i] * weights["engram.k_weight"][i]
        dot = float(np.sum(x * omega * key)) / math.sqrt(float(np.mean(x * x))) / math.sqrt(float(np.mean(key * key)))
        dot /= math.sqrt(d)
        gate = 1 / (1 + math.exp(-math.copysign(math.sqrt(max(abs(dot), 1e-6)), dot)))
        assert np.allclose(out[1, i], x + gate * value, rtol=1e-10)


def test_explicit_token_map_is_checked(rng):
    config = preset("tiny")
    with pytest.raises(engram.EngramError, match="shape"):
        engram.token_map(config, np.zeros(10, dtype=np.int64))
    with pytest.raises(engram.EngramError, match="compressed_vocab"):
        engram.token_map(config, np.full(config.vocab_size, 400))
    assert engram.token_map(config)[[5, 405, 511]].tolist() == [5, 5, 111]  # §12: id mod 400
