"""Generated weights exercise every mechanism: run the numpy reference (tests/reference/run.py) on a generated
tiny checkpoint with a T = 96 prompt (MODEL.md §12) and check that activations stay O(1) through the layers, that
the index scores are informative enough for top-k to choose, that the candidate pool binds, and that the SwiGLU
clamps fire on typical expert inputs."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED = int.from_bytes(os.urandom(4), "little")
NOTE = f"(seed {SEED})"
PROMPT_TOKENS = 96

sys.path.append(str(ROOT))
from tests.reference.weights import load_checkpoint  # noqa: E402
from tiny_checkpoint_tool import make_tiny_checkpoint  # noqa: E402


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x))))


@pytest.fixture(scope="module", params=["tiny-v41", "tiny-v41-alt"])
def golden(request, tmp_path_factory):
    """(checkpoint dir, config text fields, the reference's per-layer dumps of one prefill + 4 decode steps)."""
    out = tmp_path_factory.mktemp(request.param) / "ckpt"
    make_tiny_checkpoint(out, request.param, SEED)
    config = json.loads((out / "config.json").read_text())["text_config"]
    prompt = np.random.default_rng(SEED).integers(0, config["vocab_size"], PROMPT_TOKENS)
    npz = out / "golden.npz"
    ran = subprocess.run([sys.executable, "-m", "tests.reference.run", "--model", str(out), "--prompt-ids",
                          ",".join(map(str, prompt)), "-n", "4", "--json", "--dump", "--golden", str(npz)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    with np.load(npz) as dumps:
        return out, config, {name: dumps[name] for name in dumps.files}


def test_activations_stay_order_one_through_the_layers(golden):
    _, config, dumps = golden
    for layer in range(config["num_hidden_layers"]):
        streams = rms(dumps[f"layer{layer}.streams"])
        attention, ffn = rms(dumps[f"layer{layer}.attn_output"]), rms(dumps[f"layer{layer}.ffn_output"])
        assert 0.5 < streams < 4, (layer, streams, NOTE)
        # sublayer outputs are a visible fraction of the stream: every mechanism moves the logits
        assert 0.05 < attention / streams < 2 and 0.03 < ffn / streams < 2, (layer, attention, ffn, NOTE)
    assert 0.3 < float(np.std(dumps["logits"][-1])) < 5, NOTE


def test_index_scores_discriminate_and_the_pool_binds(golden):
    _, config, dumps = golden
    topk, heads = config["index_topk"], config["index_n_heads"]
    for layer in config["index_source_layer_ids"]:
        scores = dumps[f"layer{layer}.index_scores"]
        assert np.isfinite(scores[-1]).sum() > topk, (layer, "top-k must choose among more visible entries", NOTE)
        zero_share, distinct_share = [], []
        for row in scores[PROMPT_TOKENS // 4 :]:
            visible = row[np.isfinite(row)]
            nonzero = visible[visible != 0]
            zero_share.append(np.mean(visible == 0))
            distinct_share.append(len(np.unique(nonzero)) / max(nonzero.size, 1))
        # A score is exactly 0 when every head's ReLU cuts the entry off: about 2^-heads of them for independent
        # heads. Beyond that, ties are rare (BF16 scores): top-k is decided by the weights, not by tie-breaking.
        assert np.mean(zero_share) < 1.8 * 0.5**heads, (layer, np.mean(zero_share), NOTE)
        assert np.mean(distinct_share) > 0.85, (layer, np.mean(distinct_share), NOTE)
    pool = dumps[f"layer{config['candidate_source_layer_id']}.pool"][-1]
    pool_cap = config["candidate_topk_blocks"] * config["candidate_block_size"]
    assert topk < pool.sum() <= pool_cap < pool.size, NOTE


def test_swiglu_clamps_fire_on_typical_expert_inputs(golden):
    """The expert input v is RMS-normalized like the attention input u; project u through every routed w1/w3
    and count how often the clamp at swiglu_limit applies."""
    out, config, dumps = golden
    _, weights = load_checkpoint(out)
    limit = config["swiglu_limit"]
    for layer in range(config["num_hidden_layers"]):
        u = dumps[f"layer{layer}.attn_input"]
        for expert in range(config["n_routed_experts"]):
            prefix = f"layers.{layer}.ffn.experts.{expert}."
            gate, up = u @ weights[prefix + "w1.weight"].T, u @ weights[prefix + "w3.weight"].T
            clamped = np.mean(gate > limit), np.mean(np.abs(up) > limit)
            assert 0.02 < min(clamped) and max(clamped) < 0.98, (layer, expert, clamped, NOTE)
