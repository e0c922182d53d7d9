"""Every error of the installed flashkv package is a flashkv.Error subclass chosen by the C++ error code, with a
message naming what is at fault, raised for its case on a tiny checkpoint generated per run (bad paths, broken
config.json and shards, bad token ids, bad option values, misuse of handles); the session is unchanged after a
refused call. Codes that cannot be provoked on demand (device, out_of_memory, internal) go through the same
translator by flashkv._flashkv._raise."""

from __future__ import annotations

import json
import os
import shutil

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
    return flashkv_package.Model(checkpoint, threads=2)


@pytest.fixture
def broken(checkpoint, tmp_path):
    """A copy of the checkpoint to break."""
    copy = tmp_path / "broken"
    shutil.copytree(checkpoint, copy)
    return copy


def test_every_error_code_has_its_class(flashkv_package):
    ext = flashkv_package._flashkv
    classes = {cls.code: cls for cls in flashkv_package.errors.ERROR_CLASSES}
    codes = ext._error_codes()
    assert sorted(classes) == sorted(name for _, name in codes)
    for value, name in codes:
        message = f"message {value} {SEED}"
        with pytest.raises(flashkv_package.Error) as caught:
            ext._raise(value, message)
        assert type(caught.value) is classes[name] and caught.value.code == name and str(caught.value) == message
        assert getattr(flashkv_package, classes[name].__name__) is classes[name]
    assert issubclass(flashkv_package.InvalidArgumentError, ValueError)
    assert issubclass(flashkv_package.NotFoundError, FileNotFoundError)
    assert issubclass(flashkv_package.IoError, OSError)
    assert issubclass(flashkv_package.OutOfMemoryError, MemoryError)


def test_bad_paths_and_files(flashkv_package, checkpoint, broken, tmp_path):
    with pytest.raises(flashkv_package.NotFoundError, match="no-such-dir"):
        flashkv_package.Model(tmp_path / "no-such-dir")
    with pytest.raises(FileNotFoundError):
        flashkv_package.Model(str(tmp_path / "no-such-dir"))

    document = json.loads((checkpoint / "config.json").read_text())
    document["text_config"]["sliding_window"] = -int(np.random.default_rng(SEED).integers(1, 100))
    (broken / "config.json").write_text(json.dumps(document))
    with pytest.raises(flashkv_package.InvalidConfigError, match="sliding_window"):
        flashkv_package.Model(broken)

    document["text_config"]["sliding_window"] = json.loads((checkpoint / "config.json").read_text())[
        "text_config"]["sliding_window"]
    document["text_config"]["moe_intermediate_size"] *= 2  # the expert tensors no longer fit the config
    (broken / "config.json").write_text(json.dumps(document))
    with pytest.raises(flashkv_package.InvalidCheckpointError, match="experts"):
        flashkv_package.Model(broken)

    shutil.copy(checkpoint / "config.json", broken / "config.json")
    shard = sorted(broken.glob("*.safetensors"))[0]
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    with pytest.raises(flashkv_package.InvalidCheckpointError, match=shard.name):
        flashkv_package.Model(broken)

    shard.unlink()
    shard.mkdir()  # a directory where a shard should be: the OS refuses to map it
    with pytest.raises(flashkv_package.IoError, match=shard.name):
        flashkv_package.Model(broken)


def test_bad_load_options(flashkv_package, checkpoint):
    for options, field in [({"numerics": "fast"}, "numerics"), ({"prefill": "lazy"}, "prefill"),
                           ({"device": "tpu"}, "device"), ({"threads": -1}, "threads"),
                           ({"prefill_chunk": 0}, "prefill_chunk")]:
        with pytest.raises(flashkv_package.InvalidArgumentError, match=field):
            flashkv_package.Model(checkpoint, **options)
    with pytest.raises(flashkv_package.UnsupportedError, match="cuda"):
        flashkv_package.Model(checkpoint, device="cuda")
    with pytest.raises(TypeError):
        flashkv_package.Model(checkpoint, threads="two")  # a wrong type is Python's TypeError
    with pytest.raises(TypeError):
        flashkv_package.Model(checkpoint, fast=True)


def test_bad_tokens_leave_the_session_unchanged(flashkv_package, model):
    vocab = model.vocab_size
    session = model.session()
    with pytest.raises(flashkv_package.InvalidArgumentError, match="empty"):
        session.logits()
    prompt = [int(v) for v in np.random.default_rng(SEED).integers(0, vocab, 5)]
    session.append(prompt)
    before = session.logits()
    bad = int(np.random.default_rng(SEED + 1).integers(vocab, 2**31 - 1))
    cases = [
        ([3, bad], f"token id {bad} at position 1"),
        ([-1], "token id -1 at position 0"),
        ([2**40], "does not fit in int32"),
        (np.array([2**63], dtype=np.uint64), "does not fit in int32"),
        ([1.5], "must be integers"),
        (np.array([True]), "must be integers"),
        ("12", "sequence of token ids"),
        (np.zeros((2, 2), dtype=np.int32), "1-D"),
        ([], "empty"),
    ]
    for ids, message in cases:
        with pytest.raises(flashkv_package.InvalidArgumentError, match=message):
            session.append(ids)
    with pytest.raises(flashkv_package.InvalidArgumentError, match=f"token id {bad}"):
        session.generate([bad])  # checked when the stream is made, not at next()
    with pytest.raises(flashkv_package.InvalidArgumentError, match="stop_tokens"):
        session.generate(stop_tokens=[bad], on_token=print)
    with pytest.raises(flashkv_package.InvalidArgumentError, match="context limit"):
        session.append(np.zeros(model.max_tokens, dtype=np.int32))
    assert session.tokens == prompt and np.array_equal(session.logits(), before)


def test_bad_sampling_and_generate_options(flashkv_package, model):
    session = model.session()
    session.append([1, 2, 3])
    for options, field in [({"temperature": -1.0}, "temperature"), ({"top_p": 0.0}, "top_p"),
                           ({"min_p": 2.0}, "min_p"), ({"top_k": -3}, "top_k"),
                           ({"repetition_penalty": 0.0}, "repetition_penalty"),
                           ({"temperature": float("nan")}, "temperature")]:
        with pytest.raises(flashkv_package.InvalidArgumentError, match=field):
            session.sample(**options)
        with pytest.raises(flashkv_package.InvalidArgumentError, match=field):
            session.generate(**options)
    with pytest.raises(flashkv_package.InvalidArgumentError, match="max_tokens"):
        session.generate(max_tokens=-1)
    with pytest.raises(flashkv_package.InvalidArgumentError, match="empty prompt on an empty session"):
        model.session().generate(on_token=print)
    with pytest.raises(flashkv_package.InvalidArgumentError, match="prefill"):
        model.session(prefill="lazy")
    with pytest.raises(flashkv_package.InvalidArgumentError, match="prefill_chunk"):
        flashkv_package.Session(model, prefill_chunk=-1)
    assert session.tokens == [1, 2, 3]


def test_misused_handles(flashkv_package, model, checkpoint):
    session = model.session()
    session.append([4, 5, 6])
    with pytest.raises(flashkv_package.InvalidArgumentError, match="rewind"):
        session.rewind(4)
    other_load = flashkv_package.Model(checkpoint, threads=1)
    with pytest.raises(flashkv_package.InvalidArgumentError, match="another Model"):
        other_load.session().restore(session.kv())
    second = model.session()
    second.append([7])
    with pytest.raises(flashkv_package.InvalidArgumentError, match="appears twice"):
        flashkv_package.decode([session, second, session], [1, 2, 3])
    with pytest.raises(flashkv_package.InvalidArgumentError, match="2 sessions but 1 tokens"):
        flashkv_package.decode([session, second], [1])
    with pytest.raises(flashkv_package.InvalidArgumentError, match="another Model"):
        flashkv_package.decode([session, other_load.session()], [1, 2])
    with pytest.raises(flashkv_package.InvalidArgumentError, match="session 1 is null"):
        flashkv_package.decode([session, None], [1, 2])
    assert session.tokens == [4, 5, 6] and second.tokens == [7]  # a refused batch changes no session
    with pytest.raises(TypeError):
        flashkv_package.KVHandle()
