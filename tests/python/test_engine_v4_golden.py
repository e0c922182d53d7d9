"""The C++ CPU engine's V4-Flash mode (deepseek_v4) against HF transformers' DeepseekV4ForCausalLM, and its consistency
laws in faithful numerics.

Oracle: the committed golden data of tests/data/golden/v4 (tools/make_v4_golden.py: transformers 5.24.0 in fp32,
checkpoints under the released tensor names), which nobody here wrote. The engine runs in `clean` numerics (fp32
storage, no KV quantizers), the numerics the golden data has.

Relative error of a position s: max_v |engine[s, v] − hf[s, v]| / max_v |hf[s, v]|; every position must be within
1e-4 in a full forward, in prefill (the golden prefill length) + single-token decode, in the golden chunked prefill and
in batched decode (forward_batch). On a mismatch the message names the positions and the first layer whose streams
(the engine's forward trace) diverge from HF's per-layer dump (fp16, compared at 1e-2 of the row's magnitude); a test
breaks one layer's weights on purpose and checks that the message names it.

Faithful numerics (V4 KV storage: FP8 + BF16 RoPE rows and entries, Hadamard-rotated MXFP4 index keys and queries,
fp32 index scores) are outside transformers; on random V4 checkpoints whose widths fit the quantizers the engine
equals the numpy reference's V4 mode (tests/reference, written separately from HF and the spec): the same top-k sets,
logits bit-equal on nearly every run (see check_against_reference); and it obeys its own laws bit for bit: prefill + decode == full, chunked == one call, truncate + re-append == never truncated,
forward_batch == one by one; state_bytes follows the V4 record sizes.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess

import ml_dtypes  # noqa: F401 -- registers numpy's bfloat16 (the golden checkpoints store BF16 weights)
import numpy as np
import pytest
import safetensors.numpy

from tiny_checkpoint_tool import make_tiny_checkpoint

ROOT = pathlib.Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests/data/golden/v4"
CASES = sorted(path.name for path in GOLDEN.iterdir() if (path / "golden.safetensors").is_file())
RTOL = 1e-4
STREAM_RTOL = 1e-2  # the HF stream dumps are float16
SEED = int.from_bytes(os.urandom(4), "little")


@pytest.fixture(autouse=True)
def show_seed():
    print(f"seed {SEED}")


def test_golden_cases_exist():
    assert len(CASES) >= 3, f"expected >= 3 golden V4 cases under {GOLDEN}, found {CASES}"


@pytest.fixture(scope="module", params=CASES)
def case(request, fkt):
    path = GOLDEN / request.param
    golden = safetensors.numpy.load_file(str(path / "golden.safetensors"))
    meta = json.loads((path / "meta.json").read_text(encoding="utf-8"))
    engine = fkt.load_cpu_engine(str(path), "clean", 1)
    return request.param, engine, golden, meta, path


def row_errors(ours: np.ndarray, hf: np.ndarray) -> np.ndarray:
    hf = np.asarray(hf, dtype=np.float64)
    return np.max(np.abs(np.asarray(ours, dtype=np.float64) - hf), axis=-1) / np.max(np.abs(hf), axis=-1)


def merged_streams(traces: list[dict], layers: int) -> dict[int, np.ndarray]:
    """layer -> streams [rows, hc, D] of every traced call, concatenated in call order."""
    return {layer: np.concatenate([t[f"layer{layer}.streams"] for t in traces]) for layer in range(layers)}


def first_diverging_layer(streams: dict[int, np.ndarray], golden: dict, positions: np.ndarray) -> str:
    hf_streams = golden["hidden_streams"].astype(np.float64)  # [layers, T, hc, D]
    for layer in range(hf_streams.shape[0]):
        ours = streams[layer][positions].astype(np.float64)
        theirs = hf_streams[layer][positions]
        error = np.max(np.abs(ours - theirs), axis=(1, 2)) / np.max(np.abs(theirs), axis=(1, 2))
        if np.any(error > STREAM_RTOL):
            worst = int(np.argmax(error))
            return (f"first diverging layer {layer} (position {int(positions[worst])}: streams relative error "
                    f"{error[worst]:.2e})")
    return "no layer's streams diverge beyond the fp16 dump precision (look at hc_head / final norm / head)"


def mismatch(name: str, what: str, logits: np.ndarray, hf: np.ndarray, positions: np.ndarray,
             streams: dict[int, np.ndarray] | None, golden: dict) -> str | None:
    """None when every row is within RTOL, else the message naming positions and the first diverging layer."""
    errors = row_errors(logits, hf)
    bad = np.flatnonzero(errors > RTOL)
    if bad.size == 0:
        return None
    where = first_diverging_layer(streams, golden, positions[bad]) if streams else "no trace"
    return (f"{name} {what}: {bad.size} of {errors.size} positions exceed {RTOL:g} relative; positions "
            f"{positions[bad][:8].tolist()} (worst {int(positions[np.argmax(errors)])}: {errors.max():.2e}); {where}")


def traced_run(engine, chunks) -> tuple[np.ndarray, list[dict], object]:
    state = engine.new_state()
    logits, traces = [], []
    for chunk in chunks:
        rows, trace = engine.forward_traced(state, [int(t) for t in chunk], True)
        logits.append(rows)
        traces.append(trace)
    return np.concatenate(logits), traces, state


def layers_of(golden: dict) -> int:
    return golden["hidden_streams"].shape[0]


def test_full_forward_equals_transformers(case):
    name, engine, golden, _, _ = case
    ids = golden["input_ids"]
    logits, traces, _ = traced_run(engine, [ids])
    streams = merged_streams(traces, layers_of(golden))
    message = mismatch(name, "full forward", logits, golden["logits_full"], np.arange(len(ids)), streams, golden)
    assert message is None, message
    hidden = golden["final_hidden"].astype(np.float64)
    assert np.max(np.abs(traces[0]["final_hidden"] - hidden)) <= RTOL * np.max(np.abs(hidden)), name


def test_prefill_then_decode_equals_transformers(case):
    """Prefill of the golden length, then one token per call: every row against HF's full forward, the decode rows
    also against HF's own incremental (cache) logits."""
    name, engine, golden, meta, _ = case
    ids = golden["input_ids"]
    prefill = meta["prefill_len"]
    chunks = [ids[:prefill]] + [ids[t : t + 1] for t in range(prefill, len(ids))]
    logits, traces, _ = traced_run(engine, chunks)
    streams = merged_streams(traces, layers_of(golden))
    positions = np.arange(len(ids))
    message = mismatch(name, "prefill + decode", logits, golden["logits_full"], positions, streams, golden)
    assert message is None, message
    assert golden["logits_decode"].shape[0] == len(ids) - prefill == meta["decode_steps"]
    message = mismatch(name, "decode vs HF cache", logits[prefill:], golden["logits_decode"], positions[prefill:],
                       {k: v[prefill:] for k, v in streams.items()}, golden)
    assert message is None, message


def test_chunked_prefill_equals_transformers(case):
    name, engine, golden, meta, _ = case
    ids = golden["input_ids"]
    bounds = np.cumsum(meta["chunks"])[:-1]
    assert sum(meta["chunks"]) == len(ids) and any(size % 4 for size in meta["chunks"])  # windows open across calls
    logits, traces, _ = traced_run(engine, np.split(ids, bounds))
    message = mismatch(name, "chunked prefill", logits, golden["logits_full"], np.arange(len(ids)),
                       merged_streams(traces, layers_of(golden)), golden)
    assert message is None, message


def test_batched_decode_equals_transformers(case):
    """Two sessions at different lengths decode together (forward_batch); each row equals HF's logits."""
    name, engine, golden, meta, _ = case
    ids = golden["input_ids"]
    prefill = meta["prefill_len"]
    starts = [prefill, prefill - 5]
    states = [engine.new_state() for _ in starts]
    for state, start in zip(states, starts):
        engine.forward(state, [int(t) for t in ids[:start]])
    for step in range(len(ids) - prefill):
        rows = engine.forward_batch(states, [int(ids[start + step]) for start in starts])
        for row, start in zip(rows, starts):
            position = np.array([start + step])
            message = mismatch(name, "forward_batch", row, golden["logits_full"][position], position, None, golden)
            assert message is None, message


def test_the_golden_data_binds_every_mechanism(case):
    """CSA top-k selects fewer entries than are visible, HCA layers attend several entries, hash layers exist: an
    engine that dropped one of these mechanisms could not pass by accident."""
    name, engine, golden, _, path = case
    config = json.loads((path / "config.json").read_text(encoding="utf-8"))
    ratios = config["compress_ratios"][: config["num_hidden_layers"]]
    assert 4 in ratios and any(r not in (0, 4) for r in ratios) and config["num_hash_layers"] > 0, name
    ids = golden["input_ids"]
    _, traces, _ = traced_run(engine, [ids])
    for layer, ratio in enumerate(ratios):
        if ratio == 4:
            assert len(ids) // 4 > config["index_topk"], (name, layer)
            assert np.all(traces[0][f"layer{layer}.topk"][-1] >= 0), (name, layer)
        elif ratio > 0:
            assert traces[0][f"layer{layer}.entries"].shape[0] >= 2, (name, layer)


def test_a_broken_layer_is_named(case, fkt, tmp_path):
    """Scaling one layer's output projection breaks the comparison, and the message names that layer."""
    name, _, golden, _, path = case
    layer = layers_of(golden) // 2
    broken = tmp_path / "broken"
    shutil.copytree(path, broken)
    weights = safetensors.numpy.load_file(str(broken / "model.safetensors"))
    key = f"layers.{layer}.attn.wo_b.weight"
    weights[key] = (weights[key].astype(np.float32) * 1.5).astype(weights[key].dtype)
    safetensors.numpy.save_file(weights, str(broken / "model.safetensors"))
    engine = fkt.load_cpu_engine(str(broken), "clean", 1)
    ids = golden["input_ids"]
    logits, traces, _ = traced_run(engine, [ids])
    message = mismatch(name, "full forward", logits, golden["logits_full"], np.arange(len(ids)),
                       merged_streams(traces, layers_of(golden)), golden)
    assert message is not None and f"first diverging layer {layer} " in message, message


def test_flashkv_run_on_a_v4_checkpoint(case, cli):
    """`flashkv run` (Model / Session of the public API) on the released-format golden checkpoint: the last prompt
    row's logits (the first 16 the JSON shows) are HF's, and the greedy token is their argmax."""
    name, _, golden, _, path = case
    ids = golden["input_ids"]
    result = subprocess.run([str(cli), "run", "-m", str(path), "--prompt-ids", ",".join(map(str, ids.tolist())),
                             "-n", "1", "--numerics", "clean", "--ignore-eos", "--json"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    last = golden["logits_full"][-1].astype(np.float64)
    shown = np.array(report["prefill_logits_last"])
    error = np.max(np.abs(shown - last[: shown.size])) / np.max(np.abs(last))
    assert shown.size == 16 and error <= RTOL, (name, error)
    assert report["tokens"] == [int(np.argmax(last))], name


def index_head_dim(name: str) -> int:
    return json.loads((GOLDEN / name / "config.json").read_text(encoding="utf-8"))["index_head_dim"]


# The golden cases whose index heads do not fill an MXFP4 block of 32: faithful numerics must refuse exactly these.
NARROW_INDEX_CASES = [name for name in CASES if index_head_dim(name) % 32]


def test_narrow_index_cases_exist():
    assert NARROW_INDEX_CASES, f"no golden V4 case under {GOLDEN} has index heads narrower than an MXFP4 block"


@pytest.mark.parametrize("name", NARROW_INDEX_CASES)
def test_faithful_needs_mxfp4_index_heads(name, fkt):
    """Index heads that do not fill an MXFP4 block (the 16-channel golden configs): faithful numerics refuse them."""
    with pytest.raises(fkt.EngineError, match="unsupported.*index_head_dim"):
        fkt.load_cpu_engine(str(GOLDEN / name), "faithful", 1)


# ---- faithful-mode laws on a random V4 checkpoint ---------------------------------------------------------------

def random_v4_checkpoint(fkt, out: pathlib.Path) -> dict:
    """A golden config widened so faithful numerics apply (index heads of 32 channels), random fp32 weights under the
    released names of the engine's own inventory; the prompt must bind CSA top-k and several HCA windows."""
    config = json.loads((GOLDEN / CASES[0] / "config.json").read_text(encoding="utf-8"))
    config.update(head_dim=72, index_head_dim=32, index_n_heads=16, max_position_embeddings=256)
    out.mkdir(parents=True)
    (out / "config.json").write_text(json.dumps(config), encoding="utf-8")
    rng = np.random.default_rng(SEED)
    tensors = {}
    for row in fkt.expected_tensors(str(out / "config.json")):
        name, shape = row["name"], tuple(row["shape"])
        if name.endswith("tid2eid"):
            tensors[name] = np.stack([rng.permutation(config["n_routed_experts"])[: shape[1]]
                                      for _ in range(shape[0])]).astype(np.int32)
        elif name.endswith(("norm.weight", "_scale")):
            tensors[name] = (1 + 0.1 * rng.standard_normal(shape)).astype(np.float32)
        elif name.endswith(("attn_sink", "_base", ".ape", "gate.bias")):
            tensors[name] = (0.5 * rng.standard_normal(shape)).astype(np.float32)
        else:
            scale = 0.02 if name.endswith("_fn") else 1.0 / np.sqrt(shape[-1])
            tensors[name] = (scale * rng.standard_normal(shape)).astype(np.float32)
    safetensors.numpy.save_file(tensors, str(out / "model.safetensors"))
    return config


@pytest.fixture(scope="module")
def faithful(fkt, tmp_path_factory):
    directory = tmp_path_factory.mktemp("v4-faithful") / "ckpt"
    config = random_v4_checkpoint(fkt, directory)
    engine = fkt.load_cpu_engine(str(directory), "faithful", 2)
    ids = np.random.default_rng(SEED + 1).integers(0, config["vocab_size"], 72).tolist()
    state = engine.new_state()
    whole = engine.forward(state, ids, True)
    return engine, config, ids, whole, state, directory


def reference_run(directory: pathlib.Path, numerics: str, ids: list[int]) -> tuple[np.ndarray, dict]:
    from reference.dumps import Dump  # noqa: PLC0415 -- tests/ is on sys.path (conftest)
    from reference.model_v4 import ModelV4  # noqa: PLC0415
    from reference.weights import load_checkpoint  # noqa: PLC0415

    config, weights = load_checkpoint(directory)
    model = ModelV4(config, weights, numerics)
    dump = Dump()
    return model.forward(model.new_state(), np.array(ids), dump), dump.arrays


def first_dump_difference(engine_trace: dict, reference: dict, layers: int) -> str:
    for layer in range(layers):
        for what in ("topk", "entries", "index_keys", "streams"):
            key = f"layer{layer}.{what}"
            if key in engine_trace and key in reference and not np.array_equal(engine_trace[key], reference[key]):
                return f"first difference: {key}"
    return "no per-layer difference"


def selections_agree(engine_trace: dict, reference: dict, layers: int) -> str | None:
    """None when every layer's top-k selections are the same sets row by row, else the first that differs."""
    for layer in range(layers):
        key = f"layer{layer}.topk"
        if key in engine_trace and key in reference:
            ours, theirs = np.sort(engine_trace[key], axis=1), np.sort(reference[key], axis=1)
            if ours.shape != theirs.shape or not np.array_equal(ours, theirs):
                return key
    return None


ATTEMPTS = 3


def disagreement(logits, trace, reference, dump, layers: int, numerics: str) -> str | None:
    """None when the engine agrees with the reference, else why not. clean: within 1e-5. faithful: the same top-k
    sets everywhere and logits within 1e-3 -- bit-equal on nearly every prompt. The two compute in different libms
    (numpy's SIMD exp against glibc), so a last-ulp difference in a double can, rarely, flip one BF16 channel of a
    row; the FP8 / MXFP4 quantizers downstream then amplify it (about one prompt in ten on tiny-v4)."""
    errors = row_errors(logits, reference)
    where = first_dump_difference(trace, dump, layers)
    print(f"{numerics}: relative error {errors.max():.2e}, bit-equal rows {int(np.sum(errors == 0))}/{errors.size}, "
          f"{where}")
    summary = f"worst position {int(np.argmax(errors))}: {errors.max():.2e}, {where}"
    if numerics == "clean":
        return None if errors.max() <= 1e-5 else summary
    flipped = selections_agree(trace, dump, layers)
    if flipped is not None:
        return f"top-k of {flipped} differs; {summary}"
    return None if errors.max() <= 1e-3 else summary


def agrees_on_some_prompt(run_engine, directory: pathlib.Path, vocab: int, length: int, layers: int,
                          numerics: str) -> None:
    """Up to ATTEMPTS fresh prompts: a defect fails all of them, a rare rounding flip (see disagreement) only one."""
    misses = []
    for attempt in range(ATTEMPTS):
        ids = np.random.default_rng([SEED, attempt]).integers(0, vocab, length).tolist()
        logits, trace = run_engine(ids)
        reference, dump = reference_run(directory, numerics, ids)
        miss = disagreement(logits, trace, reference, dump, layers, numerics)
        if miss is None:
            return
        misses.append(miss)
    pytest.fail(f"{numerics}: the engine disagrees with the reference on every prompt (seed {SEED}): {misses}")


@pytest.mark.parametrize("numerics", ["clean", "faithful"])
def test_random_checkpoint_equals_the_reference(faithful, fkt, numerics):
    _, config, ids, _, _, directory = faithful
    engine = fkt.load_cpu_engine(str(directory), numerics, 1)
    agrees_on_some_prompt(lambda prompt: engine.forward_traced(engine.new_state(), prompt, True), directory,
                          config["vocab_size"], len(ids), config["num_hidden_layers"], numerics)


def run(engine, chunks):
    state = engine.new_state()
    return np.concatenate([engine.forward(state, list(chunk), True) for chunk in chunks]), state


def test_faithful_chunked_equals_one_call(faithful):
    engine, _, ids, whole, *_ = faithful
    lengths = [5, 3, 1, 9, 2, 7, 13, 6, 11, 15]
    chunks = np.split(np.array(ids), np.cumsum(lengths)[:-1])
    logits, _ = run(engine, chunks)
    assert np.array_equal(logits, whole), f"chunked prefill differs (seed {SEED})"


def test_faithful_prefill_then_decode_equals_full(faithful):
    engine, _, ids, whole, *_ = faithful
    logits, _ = run(engine, [ids[:41]] + [[t] for t in ids[41:]])
    assert np.array_equal(logits, whole), f"prefill + decode differs (seed {SEED})"


def test_faithful_truncate_then_reappend(faithful):
    """Truncating to lengths inside a CSA window and an HCA window reopens them (and the CSA overlap window)."""
    engine, _, ids, whole, *_ = faithful
    for keep in (70, 61, 45, 33):
        state = engine.copy_state(faithful[4])
        engine.truncate(state, len(ids) - keep)
        assert engine.length(state) == keep
        again = engine.forward(state, ids[keep:], True)
        assert np.array_equal(again, whole[keep:]), f"truncate to {keep} then re-append differs (seed {SEED})"


def test_faithful_forward_batch_equals_single(faithful):
    engine, _, ids, whole, *_ = faithful
    starts = [40, 33, 57]
    states = [run(engine, [ids[:s]])[1] for s in starts]
    rows = engine.forward_batch(states, [ids[s] for s in starts])
    for row, start in zip(rows, starts):
        assert np.array_equal(row[0], whole[start]), f"forward_batch row at {start} differs (seed {SEED})"


def test_faithful_state_bytes_follow_the_v4_records(faithful):
    """Window rows and entries are FP8 non-RoPE channels (one UE8M0 per 64) + BF16 RoPE channels padded to 8 bytes,
    index keys MXFP4 (CSA layers only), plus the fp32 compressor histories and the token ids."""
    engine, config, ids, _, state, _ = faithful
    hd, rope, ihd = config["head_dim"], config["qk_rope_head_dim"], config["index_head_dim"]
    nope = hd - rope
    record = (nope + -(-nope // 64) + 7) // 8 * 8 + 2 * rope
    key = ihd // 2 + ihd // 32
    margin = 256
    ratios = config["compress_ratios"][: config["num_hidden_layers"]]
    expected = len(ids) * 4 + len(ratios) * (config["sliding_window"] + margin) * record
    for ratio in ratios:
        if ratio == 4:
            kept = margin + 2 * ratio
            expected += len(ids) // ratio * (record + key) + kept * 2 * (2 * hd + 2 * ihd) * 4
        elif ratio > 0:
            expected += len(ids) // ratio * record + (margin + ratio) * 2 * hd * 4
    assert engine.state_bytes(state) == expected


def test_generated_tiny_v4_checkpoint_equals_the_reference(fkt, tmp_path):
    """The tiny-v4 preset of tools/make-tiny-checkpoint stores the released formats (FP8 128x128 tiles, MXFP4 experts,
    I32 tid2eid): the engine's faithful prefill + decode equals the reference's full forward."""
    directory = make_tiny_checkpoint(tmp_path / "tiny-v4", "tiny-v4", SEED)
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    engine = fkt.load_cpu_engine(str(directory), "faithful", 2)

    def prefill_then_decode(ids):
        state, logits, traces = engine.new_state(), [], []
        for chunk in [ids[:61]] + [[t] for t in ids[61:]]:
            rows, trace = engine.forward_traced(state, chunk, True)
            logits.append(rows)
            traces.append(trace)

        def padded(arrays):  # HCA selections widen as windows close
            width = max(a.shape[1] for a in arrays)
            return np.concatenate([np.pad(a, ((0, 0), (0, width - a.shape[1])), constant_values=-1) for a in arrays])

        return np.concatenate(logits), {k: padded([t[k] for t in traces]) for k in traces[0] if k.endswith(".topk")}

    agrees_on_some_prompt(prefill_then_decode, directory, config["vocab_size"], 100, config["num_hidden_layers"],
                          "faithful")
