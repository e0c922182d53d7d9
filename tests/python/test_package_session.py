"""The installed flashkv package's Session in Python terms, on a tiny checkpoint generated per run from a fresh seed:

- logits(): a float32 copy by default that outlives later changes of the session; logits(copy=False) a read-only
  zero-copy view with the same contents that blocks every change of the session while any array over it lives;
  greedy sampling is the argmax of the row;
- the GIL is released while the model computes: another Python thread keeps running during a long append, and
  Ctrl-C (KeyboardInterrupt) stops a long append between chunks;
- one session used from several threads is serialised (never corrupted); inside a callback a session may be read
  but not changed;
- model.config, model.plan and model.memory() against config.json and the record sizes of spec/MODEL.md §2.2.
"""

from __future__ import annotations

import _thread
import json
import os
import signal
import threading
import time

import numpy as np
import pytest

from tiny_checkpoint_tool import make_tiny_checkpoint

SEED = int(os.environ.get("FLASHKV_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))


@pytest.fixture(autouse=True)
def show_seed():
    print(f"seed {SEED}")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return make_tiny_checkpoint(tmp_path_factory.mktemp("tiny-v41"), "tiny-v41", SEED, "--overwrite")


@pytest.fixture(scope="module")
def model(flashkv_package, checkpoint):
    return flashkv_package.Model(checkpoint, threads=1)


def random_ids(vocab: int, length: int, salt: int) -> list[int]:
    return [int(v) for v in np.random.default_rng([SEED, salt]).integers(0, vocab, size=length)]


def test_token_ids_in_every_integer_form(model):
    ids = random_ids(model.vocab_size, 9, 5)
    forms = [ids, tuple(ids), np.array(ids, dtype=np.int32), np.array(ids, dtype=np.uint16),
             np.array(ids, dtype=np.uint64), np.array(ids[::-1], dtype=np.int64)[::-1],  # negative strides
             np.repeat(np.array(ids, dtype=np.int32), 2)[::2]]  # a strided view
    expected = model.session()
    expected.append(ids)
    for form in forms:
        session = model.session()
        session.append(form)
        assert session.tokens == ids, type(form)
        assert np.array_equal(session.logits(), expected.logits())


def test_logits_copy_is_independent_of_later_changes(model):
    session = model.session()
    session.append(random_ids(model.vocab_size, 7, 1))
    row = session.logits()
    assert row.dtype == np.float32 and row.shape == (model.vocab_size,) and row.flags.writeable
    kept = row.copy()
    assert np.all(np.isfinite(row)) and np.ptp(row) > 0
    assert session.sample(temperature=0) == int(np.argmax(row))

    session.append([int(np.argmax(row))])
    assert np.array_equal(row, kept)  # the copy did not move with the session
    assert not np.array_equal(session.logits(), kept)
    row[:] = 0  # writing to a copy changes nothing in the session
    assert np.ptp(session.logits()) > 0


def test_logits_view_shares_memory_and_blocks_changes_while_alive(flashkv_package, model):
    session = model.session()
    prompt = random_ids(model.vocab_size, 7, 2)
    session.append(prompt)
    view = session.logits(copy=False)
    assert np.array_equal(view, session.logits())
    assert not view.flags.writeable and not view.flags.owndata
    assert np.shares_memory(view, session.logits(copy=False))
    assert not np.shares_memory(view, session.logits())
    with pytest.raises(ValueError):
        view[0] = 1.0

    part = view[3:10]  # a derived array keeps the block as well
    del view
    for change in (lambda: session.append([1]), lambda: session.rewind(1), lambda: session.restore(session.kv()),
                   lambda: flashkv_package.decode([session], [1]), lambda: next(session.generate([1]))):
        with pytest.raises(flashkv_package.InvalidArgumentError, match="logits view"):
            change()
    assert session.tokens == prompt  # every refused change left it as it was
    assert session.sample(temperature=0) >= 0 and len(session.kv().tokens) == len(prompt)  # reads are fine
    del part
    session.append([1])  # all views gone: changes work again
    assert len(session) == len(prompt) + 1


def test_gil_is_released_during_a_long_append(model):
    prompt = random_ids(model.vocab_size, 1200, 3)
    session = model.session(prefill_chunk=4096)  # one chunk: no callback runs in between
    window = {}

    def worker():
        window["start"] = time.perf_counter()
        session.append(prompt)
        window["end"] = time.perf_counter()

    thread = threading.Thread(target=worker)
    ticks = []
    thread.start()
    while thread.is_alive():
        ticks.append(time.perf_counter())
    thread.join()
    duration = window["end"] - window["start"]
    inside = np.array([t for t in ticks if window["start"] <= t <= window["end"]])
    assert duration > 0.2, f"append of {len(prompt)} tokens took only {duration:.3f} s: make it longer"
    # With the GIL held for the whole append this thread would stall for all of it: one gap of ~duration.
    largest_gap = float(np.max(np.diff(np.concatenate(([window["start"]], inside, [window["end"]])))))
    assert len(inside) > 1000 and largest_gap < duration / 2, (
        f"main thread ran {len(inside)} iterations during a {duration:.3f} s append, largest stall {largest_gap:.3f} s")


def test_ctrl_c_interrupts_a_long_append_between_chunks(model):
    prompt = random_ids(model.vocab_size, 1200, 6)
    # Fire after about three of the ~19 chunks, whatever this machine's speed (a fixed delay raced on an idle CI
    # machine that finished the whole append first).
    probe = model.session(prefill_chunk=64)
    probe.append(prompt[:64])  # warm-up: the first call pays one-time costs
    started = time.perf_counter()
    probe.append(prompt[64:128])
    chunk_seconds = time.perf_counter() - started
    session = model.session(prefill_chunk=64)
    # A process started in the background by a non-interactive shell inherits SIGINT ignored, and then
    # interrupt_main() does nothing: install Python's own handler for the duration of the test.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timer = threading.Timer(3 * chunk_seconds, _thread.interrupt_main)  # as if SIGINT arrived mid-compute
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            session.append(prompt)  # no Python callback: the chunk loop itself polls for signals
    finally:
        timer.cancel()
        signal.signal(signal.SIGINT, previous)
    assert 0 < len(session) < len(prompt) and len(session) % 64 == 0
    assert session.tokens == prompt[: len(session)]
    session.append(prompt[len(session):])  # the kept chunks continue normally
    assert len(session) == len(prompt)


def test_one_session_shared_by_threads_is_serialised(model):
    session = model.session()
    runs = {name: random_ids(model.vocab_size, 40, salt) for salt, name in enumerate("abcd", start=10)}
    errors = []

    def append_all(run):
        try:
            for start in range(0, len(run), 10):
                session.append(run[start:start + 10])
                assert len(session) % 10 == 0
        except Exception as error:  # noqa: BLE001 -- reported below
            errors.append(error)

    threads = [threading.Thread(target=append_all, args=(run,)) for run in runs.values()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    held = session.tokens
    assert len(held) == 160
    # Each piece of ten arrived whole, from one of the runs, in that run's order.
    pieces = [held[start:start + 10] for start in range(0, 160, 10)]
    for run in runs.values():
        assert [piece for piece in pieces if piece in [run[s:s + 10] for s in range(0, 40, 10)]] == \
            [run[s:s + 10] for s in range(0, 40, 10)]
    reference = model.session()
    reference.append(held)
    assert np.array_equal(session.logits(), reference.logits())


def test_callbacks_may_read_but_not_change_their_session(flashkv_package, model):
    session = model.session()
    prompt = random_ids(model.vocab_size, 8, 4)
    drawn = []

    def read_everything(token):
        assert session.sample(temperature=0) == token  # logits() is still the row the token was drawn from
        assert int(np.argmax(session.logits())) == token
        drawn.append((len(session), session.kv().tokens == session.tokens, session.kv_bytes > 0))

    result = session.generate(prompt, max_tokens=3, temperature=0, stop_at_eos=False, on_token=read_everything)
    assert drawn == [(len(prompt) + i, True, True) for i in range(3)]
    assert session.tokens == prompt + result.tokens

    for change in (lambda: session.append([1]), lambda: session.rewind(1), lambda: session.logits(copy=False),
                   lambda: session.generate([1], on_token=print)):
        length = len(session)
        with pytest.raises(flashkv_package.InvalidArgumentError, match="inside a callback"):
            session.generate(max_tokens=2, temperature=0, on_token=lambda token, change=change: change())
        assert len(session) == length  # the callback's exception cancelled before its token was appended
    with pytest.raises(flashkv_package.InvalidArgumentError, match="inside a callback"):
        session.append([1, 2, 3], on_progress=lambda done, total: session.append([4]))


def test_config_plan_and_memory_follow_config_json(model, checkpoint):
    text = json.loads((checkpoint / "config.json").read_text())["text_config"]
    config = model.config
    for field in ("vocab_size", "hidden_size", "num_hidden_layers", "head_dim", "sliding_window",
                  "max_position_embeddings", "compress_ratios", "kv_source_layer_ids", "index_head_dim"):
        assert getattr(config, field) == text[field], field
    assert config.model_type == "deepseek_v41" and config.rope_scaling.factor == text["rope_scaling"]["factor"]
    assert model.vocab_size == text["vocab_size"] and model.max_tokens == text["max_position_embeddings"]
    assert [role.ratio for role in model.plan.layers] == text["compress_ratios"]
    assert {role.index for role in model.plan.layers if role.is_kv_source} == set(text["kv_source_layer_ids"])

    # Record sizes of MODEL.md §2.2: NVFP4 entry = d/2 + d/16, MXFP4 key = d/2 + d/32, FP8 window row = d + d/32.
    head, index = text["head_dim"], text["index_head_dim"]
    entry, key, row = head // 2 + head // 16, index // 2 + index // 32, head + head // 32
    report = model.memory().report
    assert (report.kv_entry_bytes, report.index_key_bytes, report.window_row_bytes) == (entry, key, row)
    per_token = sum((entry + key) / text["compress_ratios"][layer] for layer in text["kv_source_layer_ids"])
    assert report.global_kv_bytes_per_token == pytest.approx(per_token, rel=1e-12)
    assert report.window_bytes_per_session == text["num_hidden_layers"] * text["sliding_window"] * row
    assert model.memory().resident_weight_bytes == 4 * report.parameters.total
    assert model.options.numerics == "faithful" and model.options.threads == 1
