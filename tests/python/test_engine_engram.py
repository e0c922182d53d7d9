"""Engram hashing of the CPU engine (lib/runtime/engram_hash.cpp, numpy_random.cpp) against numpy and the reference:

- the C++ reproduction of numpy's default_rng(seed).integers(0, high, n) (SeedSequence + PCG64 + Lemire) draws
  numpy's numbers for random seeds and bounds;
- the hash multipliers equal the pinned fixture (tests/reference/engram_multipliers.json) and the reference's
  derivation for random vocabularies and layers;
- an `engram_token_map.json` in the checkpoint directory replaces the id mod compressed-vocab rule: the engine's
  table rows and logits follow the reference given the same map; a malformed map is refused naming the file.
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from reference.compare import relative_error
from reference.dumps import Dump
from reference.engram import derive_multipliers, pinned_multipliers
from reference.model import Model
from reference.weights import load_checkpoint
from tiny_checkpoint_tool import make_tiny_checkpoint

SEED = int.from_bytes(os.urandom(4), "little")
NOTE = f"(seed {SEED})"


@pytest.fixture(autouse=True)
def show_seed():
    print(f"seed {SEED}")


def test_numpy_generator_reproduced_bit_for_bit(fkt):
    rng = np.random.default_rng(SEED)
    seeds = [0, 1, 10007, 10007 * 14, 2**32 - 1, 2**32 + 5] + [int(s) for s in rng.integers(0, 2**63, 6)]
    for seed in seeds:
        for high in [2**32 + 1, 2**62 + 3, 2**63 - 1] + [int(h) for h in rng.integers(2**33, 2**63, 3)]:
            expected = np.random.default_rng(seed).integers(0, high, 7, dtype=np.int64).tolist()
            assert fkt.numpy_default_rng_integers(seed, high, 7) == expected, (seed, high, NOTE)


def test_small_bounds_take_numpys_other_path_and_are_refused(fkt):
    with pytest.raises(fkt.EngineError, match="unsupported: .*2\\^32"):
        fkt.numpy_default_rng_integers(1, 2**32, 3)


def test_multipliers_equal_the_pinned_fixture_and_the_reference_derivation(fkt):
    for (vocab, size, layer), values in pinned_multipliers().items():
        assert fkt.engram_multipliers(vocab, layer, size) == values, (vocab, size, layer)
    rng = np.random.default_rng(SEED)
    for _ in range(8):
        vocab, layer, size = int(rng.integers(2, 10**6)), int(rng.integers(0, 64)), int(rng.integers(2, 6))
        assert fkt.engram_multipliers(vocab, layer, size) == derive_multipliers(vocab, layer, size), (vocab, layer)


@pytest.fixture(scope="module")
def mapped_checkpoint(tmp_path_factory):
    """A tiny checkpoint with an explicit token map (a random many-to-one map onto the compressed vocabulary)."""
    out = tmp_path_factory.mktemp("mapped") / "ckpt"
    make_tiny_checkpoint(out, "tiny-v41", SEED)
    config, weights = load_checkpoint(out)
    token_map = np.random.default_rng(SEED).integers(0, config.engram_compressed_vocab_size, config.vocab_size)
    (out / "engram_token_map.json").write_text(json.dumps(token_map.tolist()))
    return out, config, weights, token_map


def test_an_explicit_token_map_is_used(fkt, mapped_checkpoint):
    directory, config, weights, token_map = mapped_checkpoint
    prompt = np.random.default_rng(SEED + 1).integers(0, config.vocab_size, 24).tolist()
    dump = Dump()
    mapped = Model(config, weights, "clean", engram_token_map=token_map)
    reference = mapped.forward(mapped.new_state(), prompt, dump)
    engine = fkt.load_cpu_engine(str(directory), "clean", 1)
    logits, trace = engine.forward_traced(engine.new_state(), prompt, True)
    for layer in config.engram_layer_ids:
        assert np.array_equal(trace[f"layer{layer}.engram_rows"], dump.arrays[f"layer{layer}.engram_rows"]), NOTE
    assert relative_error(reference, logits) <= 1e-5, NOTE
    unmapped = Model(config, weights, "clean")
    default = unmapped.forward(unmapped.new_state(), prompt)
    assert relative_error(default, logits) > 1e-3, "the map must matter for this test to mean anything"


def test_a_malformed_token_map_is_refused(fkt, mapped_checkpoint, tmp_path):
    directory, config, _, token_map = mapped_checkpoint
    broken = tmp_path / "broken"
    shutil.copytree(directory, broken)
    (broken / "engram_token_map.json").write_text(json.dumps(token_map.tolist()[:-1]))
    with pytest.raises(fkt.EngineError, match="invalid_checkpoint: Engram token map .*engram_token_map.json"):
        fkt.load_cpu_engine(str(broken), "clean", 1)
    bad = token_map.tolist()
    bad[5] = config.engram_compressed_vocab_size
    (broken / "engram_token_map.json").write_text(json.dumps(bad))
    with pytest.raises(fkt.EngineError, match="invalid_checkpoint: .*entry 5"):
        fkt.load_cpu_engine(str(broken), "clean", 1)
