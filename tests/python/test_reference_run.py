"""The reference's checkpoint loader, command line and comparison helper.

Checkpoints come from tools/make-tiny-checkpoint (fresh seed per run) or are written here with the `safetensors`
package; the comparison helper is checked against hand-computed values.
"""

from __future__ import annotations

import json
import math
import os
import pathlib
import shutil
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest
from safetensors.numpy import save_file

from reference import compare, run
from reference.compare import compare_logits, kl_divergence, relative_error, top1_agreement, topk_sets_equal
from reference.dumps import Dump
from reference.model import Model
from reference.presets import TINY, preset
from reference.weights import WeightError, load_checkpoint, random_weights
from tiny_checkpoint_tool import make_tiny_checkpoint

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "make-tiny-checkpoint"
SEED = int.from_bytes(os.urandom(4), "little")


@pytest.fixture(autouse=True)
def show_seed():
    print(f"seed {SEED}")


def make_checkpoint(out: pathlib.Path, config: str = "tiny-v41", *extra: str) -> pathlib.Path:
    assert TOOL.exists(), f"{TOOL} missing: the checkpoint generator is part of the repository"
    return make_tiny_checkpoint(out, config, SEED, *extra)


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tests.reference.run", *args], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_checkpoint(tmp_path_factory.mktemp("tiny") / "ckpt")


# --- loader ----------------------------------------------------------------------------------------------------


def test_scale_and_packed_dtype_labels_do_not_change_the_weights(checkpoint, tmp_path):
    _, released = load_checkpoint(checkpoint)
    _, relabelled = load_checkpoint(make_checkpoint(tmp_path / "u8", "tiny-v41", "--scale-dtype", "u8",
                                                    "--packed-dtype", "u8"))
    assert released.keys() == relabelled.keys()
    for name in released:
        assert np.array_equal(released[name], relabelled[name]), name


def _write_float_checkpoint(directory: pathlib.Path, weights: dict, override: dict | None = None) -> pathlib.Path:
    directory.mkdir()
    (directory / "config.json").write_text(json.dumps(TINY))
    tensors = {name: value.astype(ml_dtypes.bfloat16 if value.ndim == 1 else np.float32)
               for name, value in weights.items()}
    tensors.update(override or {})
    save_file(tensors, str(directory / "model.safetensors"))
    return directory


def test_unquantized_checkpoint_loads_its_values(tmp_path):
    weights = random_weights(preset("tiny"), SEED)
    _, loaded = load_checkpoint(_write_float_checkpoint(tmp_path / "f", weights))
    name = "layers.3.attn.wq_a.weight"
    assert np.array_equal(loaded[name], weights[name])
    assert np.array_equal(loaded["norm.weight"], weights["norm.weight"].astype(ml_dtypes.bfloat16).astype(np.float32))


def test_bad_tensors_are_named(tmp_path, checkpoint):
    weights = random_weights(preset("tiny"), SEED)
    bad = _write_float_checkpoint(tmp_path / "dtype", weights, {"layers.2.attn.kv_norm.weight": np.zeros(64, np.int32)})
    with pytest.raises(WeightError, match=r"layers\.2\.attn\.kv_norm\.weight.*I32"):
        load_checkpoint(bad)
    shapes = _write_float_checkpoint(tmp_path / "shape", weights, {"head.weight": np.zeros((512, 255), np.float32)})
    with pytest.raises(WeightError, match=r"head\.weight.*shape"):
        load_checkpoint(shapes)
    missing = tmp_path / "missing"
    shutil.copytree(checkpoint, missing)
    index = json.loads((missing / "model.safetensors.index.json").read_text())
    shard = sorted(set(index["weight_map"].values()))[-1]
    (missing / shard).unlink()
    with pytest.raises(WeightError, match=shard):
        load_checkpoint(missing)


def test_checkpoint_prefill_then_decode_equals_full_forward_faithful(checkpoint):
    config, weights = load_checkpoint(checkpoint)
    model = Model(config, weights, "faithful")
    ids = np.random.default_rng(SEED).integers(0, config.vocab_size, 48)
    full = model.forward(model.new_state(), ids)
    state = model.new_state()
    steps = [model.forward(state, ids[:40])] + [model.forward(state, [t]) for t in ids[40:]]
    assert compare_logits(full, np.concatenate(steps)).top1_agreement == 1.0


# --- command line ----------------------------------------------------------------------------------------------


def test_cli_prints_the_greedy_tokens_and_logits_of_the_model(checkpoint):
    result = run_cli("--model", str(checkpoint), "--prompt-ids", "5,17,300,2,9,44", "-n", "5", "--json",
                     "--numerics", "clean")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    config, weights = load_checkpoint(checkpoint)
    generation = Model(config, weights, "clean").generate([5, 17, 300, 2, 9, 44], 5)
    assert out["tokens"] == generation.tokens
    assert np.allclose(out["logits_last"], generation.logits_last[:16], rtol=1e-12)
    assert np.allclose(out["prefill_logits_last"], generation.prefill_logits_last[:16], rtol=1e-12)


def test_ced_golden_file_compares_equal_to_itself_and_not_to_another_seed(checkpoint, tmp_path, capsys):
    golden, other = tmp_path / "golden.npz", tmp_path / "other.npz"
    prompt = ",".join(map(str, range(3, 40)))
    assert run.main(["--model", str(checkpoint), "--prompt-ids", prompt, "-n", "4", "--prefill", "ced",
                     "--golden", str(golden), "--dump"]) == 0
    data = np.load(golden)
    assert data["prefill_logits"].shape == (1, 512) and data["decode_logits"].shape == (3, 512)
    assert data["layer4.topk"].shape[1] == 16 and data["layer0.streams"].shape[0] == 37 + 3
    assert data["layer5.streams"].shape[0] == 16 + 3  # CED: decoder rows are the last window only
    assert compare.main([str(golden), str(golden)]) == 0
    assert run.main(["--preset", "tiny", "--seed", "1", "--prompt-ids", prompt, "-n", "4", "--prefill", "ced",
                     "--golden", str(other)]) == 0
    assert compare.main([str(golden), str(other)]) == 1
    capsys.readouterr()


@pytest.mark.parametrize("args, message", [
    (["--model", "/nonexistent-dir", "--prompt-ids", "1"], "/nonexistent-dir"),
    (["--preset", "tiny", "--prompt-ids", "1,512"], "token id 512"),
    (["--preset", "tiny", "--prompt-ids", "1,x"], "--prompt-ids"),
    (["--preset", "nosuch", "--prompt-ids", "1"], "nosuch"),
])
def test_cli_refuses_bad_input_with_a_message(args, message, capsys):
    assert run.main(args) == 2
    assert message in capsys.readouterr().err


# --- comparison helper -----------------------------------------------------------------------------------------


def test_comparison_measures_by_hand():
    reference = np.array([[1.0, 3.0, 3.0], [0.0, -2.0, 4.0]])
    candidate = np.array([[1.0, 2.5, 3.0], [0.5, -2.0, 4.0]])
    assert relative_error(reference, candidate) == pytest.approx(0.5 / 4.0)
    assert top1_agreement(reference, np.array([[0.0, 9.0, 0.0], [0.0, 9.0, 0.0]])) == 0.5  # a tied top counts
    p = np.exp([1.0, 3.0, 3.0]) / np.exp([1.0, 3.0, 3.0]).sum()
    q = np.exp([1.0, 2.5, 3.0]) / np.exp([1.0, 2.5, 3.0]).sum()
    assert kl_divergence(reference, candidate)[0] == pytest.approx(sum(p[i] * math.log(p[i] / q[i]) for i in range(3)))
    assert np.all(kl_divergence(reference, reference) == 0.0)
    assert relative_error(np.array([1.0, np.inf]), np.array([1.0, 5.0])) == math.inf
    scores = np.array([[5.0, 1.0, 1.0, 0.0]])
    assert topk_sets_equal(scores, np.array([[0, 1]]), np.array([[0, 2]]), 2).all()
    assert not topk_sets_equal(scores, np.array([[0, 1]]), np.array([[1, 2]]), 2).any()


def test_compare_dumps_names_the_first_layer_and_mechanism_that_differs():
    config = preset("tiny")
    model = Model(config, random_weights(config, SEED), "clean")
    dump = Dump()
    model.forward(model.new_state(), np.random.default_rng(SEED).integers(0, 512, 40), dump)
    reference = dump.arrays
    assert compare.compare_dumps(reference, dict(reference), 1e-12, config.index_topk) == []
    candidate = dict(reference)
    candidate["layer5.attn_output"] = reference["layer5.attn_output"] * (1 + 1e-3)
    candidate["layer6.topk"] = np.where(reference["layer6.topk"] == reference["layer6.topk"][-1, 0], -1,
                                        reference["layer6.topk"])
    mismatches = compare.compare_dumps(reference, candidate, 1e-6, config.index_topk)
    assert [m.key for m in mismatches] == ["layer5.attn_output", "layer6.topk"]
    assert mismatches[0].value == pytest.approx(1e-3, rel=1e-6)
