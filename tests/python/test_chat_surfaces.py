"""The text surfaces on a tiny checkpoint with a tokenizer.json (tools/make-tiny-checkpoint --tokenizer tiny),
against independent oracles: HF `tokenizers` for token ids, deepseek-recipe for chat prompts, and the token-id
path of the same program for generation (a text or chat prompt must generate exactly what its ids generate).

- `flashkv tokenize -m DIR --text T [--json] [--special]` (DIR needs only tokenizer.json);
- `flashkv run --prompt TEXT` and `--chat FILE.json`;
- the C ABI fkv_tokenize / fkv_detokenize / fkv_chat_encode (ctypes on libflashkv.so), with the size query;
- the Python package: Model.tokenize / detokenize / encode_chat and Session.chat."""
from __future__ import annotations

import ctypes
import json
import os
import random
import shutil
import subprocess

import deepseek_recipe as dr
import pytest
import tokenizers

import chat_corpus as corpus
from tiny_checkpoint_tool import make_tiny_checkpoint

SEED = int(os.environ.get("FLASHKV_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
TEXTS = ["Hello world", "你好，世界 😀", "  spaces\tand\nnewlines\n\n", "def f(x):\n    return x * 2", "12345",
         "<｜User｜>typed", "é à ü ß"]


@pytest.fixture(autouse=True)
def show_seed():
    print(f"seed {SEED}")


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    directory = make_tiny_checkpoint(tmp_path_factory.mktemp("tiny-text"), "tiny-v41", SEED, "--overwrite",
                                     "--tokenizer", "tiny")
    assert (directory / "tokenizer.json").exists()
    return directory


@pytest.fixture(scope="module")
def hf(checkpoint):
    return tokenizers.Tokenizer.from_file(str(checkpoint / "tokenizer.json"))


def hf_plain_ids(hf, text):
    """HF ids of `text` (which spells no added token, so that HF's matching of added tokens plays no part)."""
    assert "<｜" not in text and "think>" not in text
    return hf.encode(text, add_special_tokens=False).ids


def recipe_ids(checkpoint, messages, options):
    oracle = dr.DeepseekV41Encoding().with_tokenizer(dr.Tokenizer.from_file(str(checkpoint / "tokenizer.json")))
    return oracle.encode(corpus.recipe_conversation(dr, messages, options))


CHAT = [{"role": "user", "content": "Hi there"}, {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Weather?"}]
CHAT_OPTIONS = {"thinking": False, "effort": None, "tools": [], "tool_choice": "auto", "response": None}


# ---- CLI ----

def cli_run(cli, *args):
    return subprocess.run([str(cli), *map(str, args)], capture_output=True, text=True, timeout=300)


def test_cli_tokenize_needs_only_tokenizer_json(cli, checkpoint, hf, tmp_path):
    shutil.copy(checkpoint / "tokenizer.json", tmp_path / "tokenizer.json")
    for text in TEXTS:
        if "<｜" in text:
            continue  # plain-text encoding of control spellings: checked with --special below
        result = cli_run(cli, "tokenize", "-m", tmp_path, "--text", text, "--json")
        assert result.returncode == 0, result.stderr
        out = json.loads(result.stdout)
        assert out["ids"] == hf_plain_ids(hf, text), text
        assert out["count"] == len(out["ids"])
        plain = cli_run(cli, "tokenize", "-m", tmp_path, "--text", text)
        assert plain.stdout.split() == [str(i) for i in out["ids"]]
    special = json.loads(cli_run(cli, "tokenize", "-m", tmp_path, "--text", "<｜User｜>typed", "--special",
                                 "--json").stdout)
    assert special["ids"] == hf.encode("<｜User｜>typed", add_special_tokens=False).ids
    plain = json.loads(cli_run(cli, "tokenize", "-m", tmp_path, "--text", "<｜User｜>typed", "--json").stdout)
    assert hf.token_to_id("<｜User｜>") in special["ids"] and hf.token_to_id("<｜User｜>") not in plain["ids"]


def test_cli_tokenize_errors(cli, tmp_path):
    missing = cli_run(cli, "tokenize", "-m", tmp_path, "--text", "x")
    assert missing.returncode == 1 and "tokenizer.json" in missing.stderr
    assert cli_run(cli, "tokenize", "--text", "x").returncode == 2
    assert cli_run(cli, "tokenize", "-m", tmp_path).returncode == 2


def test_cli_run_prompt_equals_its_ids(cli, checkpoint, hf):
    text = "The quick brown fox"
    ids = [hf.token_to_id("<｜begin▁of▁sentence｜>")] + hf_plain_ids(hf, text)
    by_text = json.loads(cli_run(cli, "run", "-m", checkpoint, "--prompt", text, "-n", 6, "--ignore-eos",
                                 "--json").stdout)
    by_ids = json.loads(cli_run(cli, "run", "-m", checkpoint, "--prompt-ids", ",".join(map(str, ids)), "-n", 6,
                                "--ignore-eos", "--json").stdout)
    assert by_text["prompt_tokens"] == len(ids)
    assert by_text["tokens"] == by_ids["tokens"]
    assert by_text["text"] == hf.decode(by_text["tokens"], skip_special_tokens=True)


def test_cli_run_chat_equals_the_oracle_prompt(cli, checkpoint, tmp_path):
    chat_file = tmp_path / "chat.json"
    chat_file.write_text(json.dumps({"messages": CHAT, "thinking": False}), encoding="utf-8")
    ids = recipe_ids(checkpoint, CHAT, CHAT_OPTIONS)
    thinking_file = tmp_path / "thinking.json"
    thinking_file.write_text(json.dumps({"messages": [{"role": "system", "content": "Be brief."}] + CHAT,
                                         "reasoning_effort": "max"}), encoding="utf-8")
    thinking = json.loads(cli_run(cli, "run", "-m", checkpoint, "--chat", thinking_file, "-n", 3, "--ignore-eos",
                                  "--json").stdout)
    thinking_ids = recipe_ids(checkpoint, [{"role": "system", "content": "Be brief."}] + CHAT,
                              dict(CHAT_OPTIONS, thinking=True, effort="max"))
    assert thinking["prompt_tokens"] == len(thinking_ids)
    if "</think>" not in thinking["text"]:  # the answer never left the reasoning
        assert thinking["reasoning"] == thinking["text"].lstrip("\n") and thinking["content"] == ""
    by_chat = json.loads(cli_run(cli, "run", "-m", checkpoint, "--chat", chat_file, "-n", 5, "--ignore-eos",
                                 "--json").stdout)
    by_ids = json.loads(cli_run(cli, "run", "-m", checkpoint, "--prompt-ids", ",".join(map(str, ids)), "-n", 5,
                                "--ignore-eos", "--json").stdout)
    assert by_chat["prompt_tokens"] == len(ids) and by_chat["tokens"] == by_ids["tokens"]
    assert by_chat["reasoning"] == "" and by_chat["content"] == by_chat["text"].replace("</think>", "").lstrip("\n")
    assert by_chat["tool_calls"] == []
    bad = tmp_path / "bad.json"
    bad.write_text('{"messages": [{"role": "wizard"}]}', encoding="utf-8")
    result = cli_run(cli, "run", "-m", checkpoint, "--chat", bad, "-n", 1)
    assert result.returncode == 1 and "messages[0].role" in result.stderr


# ---- C ABI ----

@pytest.fixture(scope="module")
def c_model(capi, checkpoint):
    handle = ctypes.c_void_p()
    status = capi.fkv_model_load(ctypes.c_uint32(capi.fkv_abi_version()), str(checkpoint).encode(), None,
                                 ctypes.byref(handle))
    assert status == 0, capi.fkv_last_error()
    yield handle
    capi.fkv_model_free(handle)


def sized_call(capi, function, element, *args):
    """Calls a (buffer, count) function twice: the size query, then with a buffer of exactly that size."""
    count = ctypes.c_uint64(0)
    assert function(*args, None, ctypes.byref(count)) == 0, capi.fkv_last_error()
    if count.value > 0:  # one element short is refused and reports the size needed
        short = ctypes.c_uint64(count.value - 1)
        buffer = (element * count.value)()
        assert function(*args, buffer, ctypes.byref(short)) == 1 and short.value == count.value
    buffer = (element * max(count.value, 1))()
    assert function(*args, buffer, ctypes.byref(count)) == 0, capi.fkv_last_error()
    return buffer[: count.value]


def test_c_abi_text_functions(capi, c_model, checkpoint, hf):
    assert capi.fkv_abi_version() == 0x00010001
    for text in TEXTS:
        raw = text.encode()
        ids = sized_call(capi, capi.fkv_tokenize, ctypes.c_int32, c_model, raw, ctypes.c_uint64(len(raw)),
                         ctypes.c_int32(1))
        assert ids == hf.encode(text, add_special_tokens=False).ids, text
        id_array = (ctypes.c_int32 * len(ids))(*ids)
        back = sized_call(capi, capi.fkv_detokenize, ctypes.c_char, c_model, id_array, ctypes.c_uint64(len(ids)),
                          ctypes.c_int32(0))
        assert back.decode() == hf.decode(ids, skip_special_tokens=False) == text  # c_char slices are bytes
    chat = json.dumps({"messages": CHAT, "thinking": False}).encode()
    ids = sized_call(capi, capi.fkv_chat_encode, ctypes.c_int32, c_model, chat, ctypes.c_uint64(len(chat)))
    assert ids == recipe_ids(checkpoint, CHAT, CHAT_OPTIONS)
    count = ctypes.c_uint64(0)
    assert capi.fkv_chat_encode(c_model, b"[{", ctypes.c_uint64(2), None, ctypes.byref(count)) == 1
    assert b"JSON" in capi.fkv_last_error()


# ---- Python package ----

@pytest.fixture(scope="module")
def model(flashkv_package, checkpoint):
    return flashkv_package.Model(checkpoint, numerics="clean")


def test_python_tokenize_detokenize_encode_chat(flashkv_package, model, checkpoint, hf):
    assert model.has_tokenizer
    for text in TEXTS:
        ids = model.tokenize(text, allow_special=True)
        assert ids == hf.encode(text, add_special_tokens=False).ids
        assert model.detokenize(ids) == text
    assert model.tokenize("<｜User｜>") != model.tokenize("<｜User｜>", allow_special=True)
    assert model.encode_chat(CHAT, thinking=False) == recipe_ids(checkpoint, CHAT, CHAT_OPTIONS)
    rng = random.Random(SEED)
    for _ in range(10):
        messages, options = corpus.random_conversation(rng)
        options.update(tools=[], response=None)
        messages = [{k: v for k, v in m.items() if k != "tools"} for m in messages]  # no JSON form
        messages = [m for m in messages if m["role"] != "system" or m["content"]]  # (an empty one is dropped)
        as_openai = [corpus.openai_message(m) for m in messages]
        got = model.encode_chat(as_openai, thinking=options["thinking"], effort=options["effort"])
        assert got == recipe_ids(checkpoint, messages, options)
    assert "<｜System｜>Reasoning Effort: 37 (" in model.detokenize(model.encode_chat(CHAT, effort=37))
    with pytest.raises(flashkv_package.InvalidArgumentError, match="reasoning_effort|effort"):
        model.encode_chat(CHAT, effort=101)


def test_python_session_chat_streams_the_parsed_answer(flashkv_package, model, hf):
    session = model.session()
    events = list(session.chat(CHAT, thinking=False, max_tokens=6, stop_at_eos=False, temperature=0.0))
    prompt = model.encode_chat(CHAT, thinking=False)
    generated = session.tokens[len(prompt):]
    assert session.tokens[: len(prompt)] == prompt and len(generated) == 6
    reference = model.session()
    assert list(reference.generate(prompt, max_tokens=6, stop_at_eos=False, temperature=0.0)) == generated
    text = hf.decode(generated, skip_special_tokens=True)
    parsed = flashkv_package.ChatParser(thinking=False, parse_tool_calls=False)
    parsed.feed(text)
    parsed.finish()
    assert "".join(e.text for e in events if e.kind == "content") == parsed.content
    assert all(e.kind == "content" for e in events)
