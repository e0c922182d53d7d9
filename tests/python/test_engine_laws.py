"""Consistency laws of the CPU engine (engine.hpp contract), engine against itself on generated tiny checkpoints of
both tiny configs, in both numerics modes, with a fresh seed per run:

- chunked prefill == one call (odd chunk lengths, so ratio-2 groups straddle chunks and leave pending state);
- prefill + token-by-token decode == one forward over all tokens;
- truncate then re-append == never truncated (also to odd lengths, reopening a ratio-2 group), and a truncate
  beyond the retained rows is refused with the state intact;
- copy_state continues identically and independently;
- forward_batch over several sessions == each session on its own;
- thread count does not change a bit;
- bad input (token out of range, empty run, overflow past max_position_embeddings, a reused state in a batch)
  raises invalid_argument and leaves the state usable.
The engine evaluates every row in double and rounds at the cast points, so these laws hold bit for bit.
State bytes follow the record layouts (NVFP4 entries, MXFP4 keys, FP8 window rows).
"""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pytest

from tiny_checkpoint_tool import make_tiny_checkpoint

SEED = int.from_bytes(os.urandom(4), "little")
NOTE = f"(seed {SEED})"
TOTAL = 128


@pytest.fixture(autouse=True)
def show_seed():
    print(f"seed {SEED}")


@pytest.fixture(scope="module", params=["tiny-v41", "tiny-v41-alt"])
def checkpoint(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(request.param) / "ckpt"
    make_tiny_checkpoint(out, request.param, SEED)
    return out, json.loads((out / "config.json").read_text())["text_config"]


@pytest.fixture(scope="module", params=["clean", "faithful"])
def engine(request, fkt, checkpoint):
    directory, config = checkpoint
    return fkt.load_cpu_engine(str(directory), request.param, 2), config, request.param


@pytest.fixture(scope="module")
def ids(engine):
    _, config, _ = engine
    return np.random.default_rng(SEED).integers(0, config["vocab_size"], TOTAL).tolist()


@pytest.fixture(scope="module")
def whole(engine, ids):
    """Logits of every row of one forward over all TOTAL ids (the run every law is measured against)."""
    return run_chunks(engine[0], [ids])[0]


def run_chunks(engine, chunks):
    state = engine.new_state()
    return np.concatenate([engine.forward(state, chunk, True) for chunk in chunks]), state


def test_chunked_prefill_equals_one_call(engine, ids, whole):
    eng, _, _ = engine
    rng = np.random.default_rng(SEED)
    lengths, at = [], 0
    while at < TOTAL:
        lengths.append(min(int(rng.choice([1, 3, 5, 7, 9, 13, 2, 4])), TOTAL - at))
        at += lengths[-1]
    chunks = np.split(np.array(ids), np.cumsum(lengths)[:-1])
    chunked, _ = run_chunks(eng, [c.tolist() for c in chunks])
    assert np.array_equal(whole, chunked), (lengths, NOTE)


def test_prefill_then_decode_equals_one_forward(engine, ids, whole):
    eng, _, _ = engine
    stepped, _ = run_chunks(eng, [ids[:96]] + [[t] for t in ids[96:]])
    assert np.array_equal(whole, stepped), NOTE


@pytest.mark.parametrize("drop", [1, 2, 17])  # to an even length, an odd one (reopened ratio-2 group), far back
def test_truncate_then_reappend_equals_never_truncated(engine, ids, whole, drop):
    eng, _, _ = engine
    state = eng.new_state()
    eng.forward(state, ids[:101])
    eng.truncate(state, drop)
    assert eng.length(state) == 101 - drop and eng.tokens(state) == ids[: 101 - drop]
    again = eng.forward(state, ids[101 - drop :], True)
    assert np.array_equal(again, whole[101 - drop :]), (drop, NOTE)


def test_truncate_past_the_retained_rows_is_refused_and_harmless(fkt, checkpoint, ids):
    directory, config = checkpoint
    margin = 3
    eng = fkt.load_cpu_engine(str(directory), "faithful", 1, margin)
    state = eng.new_state()
    eng.forward(state, ids[:100])
    with pytest.raises(fkt.EngineError, match="invalid_argument: truncate: .*rewind_margin 3"):
        eng.truncate(state, margin + 2)
    with pytest.raises(fkt.EngineError, match="invalid_argument: truncate: cannot drop 101"):
        eng.truncate(state, 101)
    assert eng.length(state) == 100
    eng.truncate(state, margin + 1)  # the limit: rows of sliding_window + rewind_margin positions are kept
    after = eng.forward(state, ids[100 - margin - 1 : 110], True)
    reference, _ = run_chunks(eng, [ids[:110]])
    assert np.array_equal(after, reference[100 - margin - 1 :]), NOTE


def test_copy_state_continues_identically_and_independently(engine, ids, whole):
    eng, _, _ = engine
    state = eng.new_state()
    eng.forward(state, ids[:77])
    fork = eng.copy_state(state)
    other = np.random.default_rng(SEED + 1).integers(0, eng.vocab_size, 9).tolist()
    diverted = eng.forward(fork, other, True)  # the fork goes elsewhere first ...
    continued = eng.forward(state, ids[77:], True)  # ... which must not touch the original
    assert np.array_equal(continued, whole[77:]), NOTE
    fresh = eng.new_state()
    eng.forward(fresh, ids[:77])
    assert np.array_equal(diverted, eng.forward(fresh, other, True)), NOTE
    second = eng.copy_state(state)
    assert np.array_equal(eng.forward(second, [5, 6]), eng.forward(state, [5, 6])), NOTE


def test_forward_batch_equals_one_sequence_at_a_time(engine, ids):
    eng, config, _ = engine
    rng = np.random.default_rng(SEED + 2)
    prompts = [ids[:61], ids[5:40], rng.integers(0, config["vocab_size"], 18).tolist()]
    batch_states, solo_states = [], []
    for prompt in prompts:
        batch_states.append(eng.new_state())
        solo_states.append(eng.new_state())
        eng.forward(batch_states[-1], prompt)
        eng.forward(solo_states[-1], prompt)
    for _ in range(5):
        step = rng.integers(0, config["vocab_size"], len(prompts)).tolist()
        batched = eng.forward_batch(batch_states, step)
        for i, state in enumerate(solo_states):
            assert np.array_equal(batched[i], eng.forward(state, [step[i]])), (i, NOTE)


def test_the_thread_count_changes_nothing(fkt, checkpoint, engine, ids, whole):
    directory, _ = checkpoint
    _, _, numerics = engine
    one = fkt.load_cpu_engine(str(directory), numerics, 1)
    three = fkt.load_cpu_engine(str(directory), numerics, 3)
    assert one.threads == 1 and three.threads == 3 and engine[0].threads == 2
    assert np.array_equal(run_chunks(one, [ids])[0], whole), NOTE
    assert np.array_equal(run_chunks(three, [ids])[0], whole), NOTE



def test_bad_input_is_refused_and_the_state_stays_usable(engine, ids, whole):
    eng, config, _ = engine
    state = eng.new_state()
    first = eng.forward(state, ids[:20], True)
    for bad, what in (([3, config["vocab_size"]], "outside the vocabulary"), ([-1], "outside the vocabulary"),
                      ([], "empty")):
        with pytest.raises(eng_error(), match=f"invalid_argument: .*{what}"):
            eng.forward(state, bad)
        assert eng.length(state) == 20 and eng.tokens(state) == ids[:20]
    with pytest.raises(eng_error(), match="invalid_argument: forward_batch: state 1 is null or appears twice"):
        eng.forward_batch([state, state], [1, 2])
    with pytest.raises(eng_error(), match="invalid_argument: prefill_ced: the state already holds 20 tokens"):
        eng.prefill_ced(state, [1, 2, 3])
    assert eng.length(state) == 20
    rest = eng.forward(state, ids[20:40], True)
    assert np.array_equal(np.concatenate([first, rest]), whole[:40]), NOTE


def eng_error():
    import flashkv_testing  # noqa: PLC0415

    return flashkv_testing.EngineError


def test_context_overflow_is_refused(fkt, checkpoint, tmp_path, ids):
    directory, _ = checkpoint
    short = tmp_path / "short"
    shutil.copytree(directory, short)
    document = json.loads((short / "config.json").read_text())
    document["text_config"]["max_position_embeddings"] = 40
    (short / "config.json").write_text(json.dumps(document))
    eng = fkt.load_cpu_engine(str(short), "clean", 1)
    state = eng.new_state()
    eng.forward(state, ids[:39])
    with pytest.raises(fkt.EngineError, match=r"invalid_argument: .*max_position_embeddings \(40\)"):
        eng.forward(state, ids[39:41])
    assert eng.length(state) == 39
    eng.forward(state, ids[39:40])  # exactly at the limit
    with pytest.raises(fkt.EngineError, match="invalid_argument"):
        eng.forward(state, [1])


def test_state_bytes_follow_the_record_layouts(fkt, checkpoint, ids):
    directory, config = checkpoint
    eng = fkt.load_cpu_engine(str(directory), "faithful", 1)
    state = eng.new_state()
    eng.forward(state, ids[:64])
    before = eng.state_bytes(state)
    eng.forward(state, ids[64:96])
    grown = eng.state_bytes(state) - before
    entry = config["head_dim"] // 2 + config["head_dim"] // 16  # NVFP4: E2M1 pairs + E4M3 scale per 16
    key = config["index_head_dim"] // 2 + config["index_head_dim"] // 32  # MXFP4: E2M1 pairs + E8M0 per 32
    ratios = config["compress_ratios"]
    global_kv = sum(32 // ratios[layer] * (entry + key) for layer in config["kv_source_layer_ids"])
    assert grown == global_kv + 32 * 4, (grown, global_kv)  # the rings are preallocated; 4 bytes per token id


def test_ced_prefill_is_exact_when_the_prompt_fits_the_window(engine, ids, whole):
    eng, config, _ = engine
    count = config["sliding_window"] - 3
    state = eng.new_state()
    last = eng.prefill_ced(state, ids[:count])
    assert np.array_equal(last[0], whole[count - 1]), NOTE  # §8.4: the decoder then sees every prompt row
    assert np.array_equal(eng.forward(state, ids[count : count + 6], True), whole[count : count + 6]), NOTE


def test_concurrent_forwards_on_different_states_equal_sequential_ones(engine, ids, whole):
    import threading  # noqa: PLC0415

    eng, _, _ = engine
    results = {}

    def run(name, chunk_size):
        state = eng.new_state()
        results[name] = np.concatenate([eng.forward(state, ids[i : i + chunk_size], True)
                                        for i in range(0, TOTAL, chunk_size)])

    threads = [threading.Thread(target=run, args=(n, size)) for n, size in (("a", 7), ("b", 32), ("c", 1))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for name in "abc":
        assert np.array_equal(results[name], whole), (name, NOTE)
