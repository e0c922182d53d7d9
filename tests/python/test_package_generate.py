"""The installed flashkv package generates what the numpy reference (tests/reference, written from the spec)
generates, and its generation surfaces obey the API's laws, on tiny checkpoints generated per run from a fresh seed:

- greedy tokens equal the reference's (both tiny configs, faithful and clean), and the logits rows reach Python
  unaltered (bit-equal to the rows `flashkv run` prints);
- generate as an iterator == generate with a callback == the sample/append loop (sampled, with stop tokens);
- cancellation by the token callback, the progress callback or a raising callback keeps the completed work, and
  the session continues as if never interrupted; leaving the iterator early keeps exactly the yielded tokens;
- fork/restore continue identically; a batched decode equals appending one by one.
"""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from tiny_checkpoint_tool import make_tiny_checkpoint

ROOT = pathlib.Path(__file__).resolve().parents[2]
SEED = int(os.environ.get("FLASHKV_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
CONFIGS = ["tiny-v41", "tiny-v41-alt"]


@pytest.fixture(autouse=True)
def show_seed():
    print(f"seed {SEED}")  # shown by pytest on failure


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return {name: make_tiny_checkpoint(tmp_path_factory.mktemp(name), name, SEED, "--overwrite") for name in CONFIGS}


@pytest.fixture(scope="module")
def model(flashkv_package, checkpoints):
    return flashkv_package.Model(checkpoints["tiny-v41"], threads=2)


def random_ids(vocab: int, length: int, salt: int) -> list[int]:
    return [int(v) for v in np.random.default_rng([SEED, salt]).integers(0, vocab, size=length)]


def reference(directory: pathlib.Path, prompt: list[int], n: int, numerics: str) -> dict:
    result = subprocess.run([sys.executable, "-m", "tests.reference.run", "--model", str(directory), "--prompt-ids",
                             ",".join(map(str, prompt)), "-n", str(n), "--numerics", numerics, "--json"],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("numerics", ["faithful", "clean"])
@pytest.mark.parametrize("name", CONFIGS)
def test_greedy_tokens_equal_the_reference(flashkv_package, cli, checkpoints, name, numerics):
    model = flashkv_package.Model(checkpoints[name], numerics=numerics, threads=2)
    prompt = random_ids(model.vocab_size, 23, 1)
    session = model.session()
    session.append(prompt)
    prefill_row = session.logits()
    drawn_from = []  # the row each token was drawn from: session.logits() inside the callback
    result = session.generate(max_tokens=9, temperature=0, stop_at_eos=False,
                              on_token=lambda token: drawn_from.append(session.logits()))
    assert result.tokens == reference(checkpoints[name], prompt, 9, numerics)["tokens"], f"seed {SEED}, {prompt}"
    assert result.reason == "max_tokens"
    assert session.tokens == prompt + result.tokens
    # The rows reach Python unaltered: the C++ engine's own rows, as `flashkv run` prints them (how close those are
    # to the reference's is the engine's law: test_engine_reference.py, test_cli_run.py).
    run = subprocess.run([str(cli), "run", "-m", str(checkpoints[name]), "--prompt-ids", ",".join(map(str, prompt)),
                          "-n", "9", "--numerics", numerics, "--ignore-eos", "--threads", "2", "--json"],
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    engine = json.loads(run.stdout)
    assert engine["tokens"] == result.tokens
    assert np.array_equal(np.float32(engine["prefill_logits_last"]), prefill_row[:16])
    assert np.array_equal(np.float32(engine["logits_last"]), drawn_from[-1][:16])


def test_iterator_equals_callback_equals_sample_append_loop(flashkv_package, model):
    prompt = random_ids(model.vocab_size, 11, 2)
    sampling = dict(temperature=0.9, top_p=0.95, top_k=50, repetition_penalty=1.1, seed=SEED)
    streamed_session, called_session, looped_session = model.session(), model.session(), model.session()

    stream = streamed_session.generate(prompt, max_tokens=12, stop_at_eos=False, **sampling)
    streamed = list(stream)
    seen = []
    result = called_session.generate(prompt, max_tokens=12, stop_at_eos=False, on_token=seen.append, **sampling)
    looped_session.append(prompt)
    looped = []
    for _ in range(12):
        looped.append(looped_session.sample(**sampling))
        looped_session.append(looped[-1:])

    assert streamed == seen == result.tokens == looped, f"seed {SEED}"
    assert len(streamed) == 12 and stream.tokens == streamed
    assert stream.reason == result.reason == "max_tokens"
    for other in (called_session, looped_session):
        assert other.tokens == streamed_session.tokens
        assert np.array_equal(other.logits(), streamed_session.logits())

    # A stop token ends both forms at its first occurrence, the stop token included.
    stop = streamed[5]
    first = streamed.index(stop)
    stream = model.session().generate(prompt, max_tokens=12, stop_at_eos=False, stop_tokens=[stop], **sampling)
    assert list(stream) == streamed[: first + 1] and stream.reason == "stop_token"
    result = model.session().generate(prompt, max_tokens=12, stop_at_eos=False, stop_tokens=np.array([stop]),
                                      on_token=lambda token: None, **sampling)
    assert result.tokens == streamed[: first + 1] and result.reason == "stop_token"


def test_stream_is_lazy_and_max_tokens_zero_only_prefills(flashkv_package, model):
    prompt = random_ids(model.vocab_size, 6, 3)
    session = model.session()
    stream = session.generate(prompt, max_tokens=0)
    assert len(session) == 0  # nothing runs before next()
    assert list(stream) == [] and stream.reason == "max_tokens"
    assert session.tokens == prompt
    assert list(stream) == []  # an ended stream stays ended


def test_cancellation_keeps_completed_work_and_the_session_continues(flashkv_package, model):
    prompt = random_ids(model.vocab_size, 9, 4)
    sampling = dict(temperature=1.0, seed=SEED, stop_at_eos=False)
    uninterrupted = model.session().generate(prompt, max_tokens=8, on_token=lambda token: True, **sampling).tokens

    session = model.session()
    seen = []
    with pytest.raises(flashkv_package.CancelledError, match="token callback"):
        session.generate(prompt, max_tokens=8, on_token=lambda token: seen.append(token) or len(seen) < 3, **sampling)
    assert seen == uninterrupted[:3]
    assert session.tokens == prompt + uninterrupted[:2]  # the refused token is not appended
    rest = session.generate(max_tokens=6, on_token=lambda token: True, **sampling).tokens
    assert uninterrupted[:2] + rest == uninterrupted, f"seed {SEED}"

    # A callback that raises: its own exception, not CancelledError, and the same kept work.
    class Stop(Exception):
        pass

    def raise_at_second(token):
        if len(session.tokens) == len(prompt) + 1:
            raise Stop(token)

    session = model.session()
    with pytest.raises(Stop):
        session.generate(prompt, max_tokens=8, on_token=raise_at_second, **sampling)
    assert session.tokens == prompt + uninterrupted[:1]

    # Leaving the iterator early keeps exactly the tokens yielded.
    session = model.session()
    for count, token in enumerate(session.generate(prompt, max_tokens=8, **sampling), start=1):
        if count == 4:
            break
    assert session.tokens == prompt + uninterrupted[:4]


def test_progress_callback_reports_and_cancels_between_chunks(flashkv_package, model):
    prompt = random_ids(model.vocab_size, 20, 5)
    session = model.session(prefill_chunk=6)
    reports = []
    session.append(prompt, on_progress=lambda done, total: reports.append((done, total)))
    assert reports == [(6, 20), (12, 20), (18, 20), (20, 20)]

    session = model.session(prefill_chunk=6)
    with pytest.raises(flashkv_package.CancelledError, match="progress"):
        list(session.generate(prompt, max_tokens=4, on_progress=lambda done, total: done < 12))
    assert session.tokens == prompt[:12]
    whole = model.session()
    whole.append(prompt)
    session.append(prompt[12:])  # continues from the completed chunks
    assert np.array_equal(session.logits(), whole.logits())


def test_fork_and_restore_continue_identically(flashkv_package, model):
    prompt = random_ids(model.vocab_size, 13, 6)
    sampling = dict(temperature=0.8, min_p=0.05, seed=SEED, stop_at_eos=False)
    session = model.session()
    head = list(session.generate(prompt, max_tokens=3, **sampling))
    snapshot = session.kv()
    fork = snapshot.fork()
    assert snapshot.tokens == fork.tokens == prompt + head
    assert snapshot.bytes == fork.bytes == session.kv_bytes > 0
    assert snapshot.model == model

    original = list(session.generate(max_tokens=7, **sampling))
    for handle in (fork, snapshot):
        other = model.session()
        other.restore(handle)
        assert np.array_equal(other.logits(), model_logits_after(model, prompt + head))
        assert list(other.generate(max_tokens=7, **sampling)) == original, f"seed {SEED}"
        assert np.array_equal(other.logits(), session.logits())
    session.restore(snapshot)  # back in time on the same session
    assert session.tokens == prompt + head


def model_logits_after(model, tokens):
    fresh = model.session()
    fresh.append(tokens)
    return fresh.logits()


def test_batched_decode_equals_appending_one_by_one(flashkv_package, model):
    prompts = [random_ids(model.vocab_size, length, 7 + length) for length in (5, 12, 17)]
    batched = [model.session() for _ in prompts]
    single = [model.session() for _ in prompts]
    for session, other, prompt in zip(batched, single, prompts):
        session.append(prompt)
        other.append(prompt)
    for step in range(3):
        tokens = [session.sample(temperature=1.0, seed=SEED + step) for session in batched]
        flashkv_package.decode(batched, np.array(tokens, dtype=np.int64))
        for session, token in zip(single, tokens):
            session.append([token])
    for session, other in zip(batched, single):
        assert session.tokens == other.tokens
        assert np.array_equal(session.logits(), other.logits()), f"seed {SEED}"
