"""The tiny checkpoints' tokenizer (tools/make_tiny_tokenizer.py, make-tiny-checkpoint --tokenizer tiny):
sized to the config, BOS/EOS where the tiny configs put them, and encoded by flashkv exactly as by `tokenizers`."""
import json
import pathlib
import subprocess
import sys

import pytest
import tokenizers
from tokenizer_corpus import seeded_corpus

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))
import make_tiny_tokenizer  # noqa: E402


@pytest.fixture(scope="module", params=[512, 640])
def tiny_dir(request, tmp_path_factory):
    out = tmp_path_factory.mktemp(f"tiny_tok_{request.param}")
    make_tiny_tokenizer.write_tiny_tokenizer(out, request.param)
    return out, request.param


def test_tiny_tokenizer_fills_the_vocab_with_deepseek_ids_for_bos_eos(fkt, tiny_dir):
    out, vocab = tiny_dir
    ours = fkt.Tokenizer.load(out)
    hf = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    assert ours.vocab_size == hf.get_vocab_size() == vocab
    assert (ours.bos_id, ours.eos_id) == (0, 1)
    for content in ("<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜", "<｜System｜>"):
        assert ours.token_to_id(content) == hf.token_to_id(content) < vocab


def test_tiny_tokenizer_encodes_like_tokenizers(fkt, tiny_dir):
    out, _ = tiny_dir
    ours = fkt.Tokenizer.load(out)
    hf = tokenizers.Tokenizer.from_file(str(out / "tokenizer.json"))
    for text in seeded_corpus(512):
        ids = ours.encode(text, allow_special=True)
        assert ids == hf.encode(text).ids, repr(text[:200])
        assert ours.decode(ids) == text == hf.decode(ids, skip_special_tokens=False)


def test_make_tiny_checkpoint_writes_the_tokenizer(fkt, tmp_path):
    out = tmp_path / "ckpt"
    subprocess.run([sys.executable, str(ROOT / "tools" / "make-tiny-checkpoint"), "--config", "tiny-v41", "--seed", "3",
                    "--out", str(out), "--tokenizer", "tiny"], check=True, capture_output=True)
    config = json.loads((out / "config.json").read_text())
    tok = fkt.Tokenizer.load(out)
    assert tok.vocab_size == config["text_config"]["vocab_size"]
    assert (tok.bos_id, tok.eos_id) == (config["bos_token_id"], config["eos_token_id"])
    assert json.loads((out / "tiny_checkpoint.json").read_text())["tokenizer"] is True
