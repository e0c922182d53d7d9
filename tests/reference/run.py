"""Command line of the reference: greedy generation from a checkpoint, and golden data for engine comparisons.

  python -m tests.reference.run --model DIR --prompt-ids 1,2,3 -n N --json
        [--numerics clean|faithful] [--prefill exact|ced] [--index-key-quirk] [--golden FILE.npz] [--dump]

--model DIR reads config.json + safetensors shards (tools/make-tiny-checkpoint writes them); --preset NAME --seed S
uses in-memory random weights of a built-in config instead (official, tiny, tiny_alt, tiny_v4 -- the official one is
far too large). A config.json of model_type deepseek_v4 (V4-Flash) runs the V4 mode (model_v4.py); it has no CED
prefill and no index-key quirk. With --json one JSON object is printed: tokens (greedy), logits_last (first 16 logits from which the last
token was chosen; the prefill's when -n 0), prefill_logits_last (first 16 of the prompt's last-row logits).
An `engram_token_map.json` in DIR (a JSON list: vocab id -> compressed id) replaces the tiny-checkpoint rule
c = id mod engram_compressed_vocab_size; the official checkpoint needs it (built from its tokenizer, MODEL.md §7).
--golden FILE.npz writes the prompt, tokens, every prefill-row logits (last row only under CED), the decode
logits of each step, and with --dump the per-layer dumps of the whole run (tests/reference/dumps.py keys).
Exit status: 0 done, 2 bad input (the message names the file, field or tensor).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys

import numpy as np

from .config_v4 import ConfigV4
from .dumps import Dump, merge_dumps
from .model import Model, ModelError
from .model_v4 import ModelV4
from .presets import preset
from .weights import load_checkpoint, random_weights
from .weights_v4 import random_weights_v4

LOGITS_SHOWN = 16


def parse_ids(text: str) -> list[int]:
    try:
        ids = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise ModelError(f"--prompt-ids must be comma-separated integers, got {text!r}") from error
    if not ids:
        raise ModelError("--prompt-ids is empty")
    return ids


TOKEN_MAP_FILE = "engram_token_map.json"  # optional: the tokenizer-derived Engram map (§7 step 1), a list of ids


def build_model(args) -> Model | ModelV4:
    """The V4.1 Model, or ModelV4 for a deepseek_v4 config (which has no CED prefill and no index-key quirk)."""
    token_map = None
    if args.model:
        config, weights = load_checkpoint(args.model)
        map_file = pathlib.Path(args.model) / TOKEN_MAP_FILE
        if map_file.is_file():
            token_map = np.array(json.loads(map_file.read_text(encoding="utf-8")), dtype=np.int64)
    else:
        config = preset(args.preset)
        weights = random_weights_v4(config, args.seed) if isinstance(config, ConfigV4) else \
            random_weights(config, args.seed)
    if isinstance(config, ConfigV4):
        if args.prefill != "exact" or args.index_key_quirk:
            raise ModelError(f"{config.source}: deepseek_v4 has neither --prefill ced nor --index-key-quirk")
        return ModelV4(config, weights, args.numerics)
    return Model(config, weights, args.numerics, index_key_quirk=args.index_key_quirk, engram_token_map=token_map)


def run(model: Model | ModelV4, prompt: list[int], steps: int, prefill: str, want_dump: bool) -> dict:
    """Greedy generation with every logits row kept; the dumps of all calls merged when asked."""
    dumps = []
    first = Dump() if want_dump else None
    if prefill == "ced":
        state, prefill_logits = model.prefill_ced(prompt, dump=first)
    else:
        state = model.new_state()
        prefill_logits = model.forward(state, prompt, dump=first)
    if first is not None:
        dumps.append(first.arrays)
    logits, tokens, decode_logits = prefill_logits[-1], [], []
    for step in range(steps):
        tokens.append(int(np.argmax(logits)))
        if step + 1 < steps:
            dump = Dump() if want_dump else None
            logits = model.forward(state, [tokens[-1]], dump=dump)[-1]
            decode_logits.append(logits)
            if dump is not None:
                dumps.append(dump.arrays)
    return {"tokens": tokens, "logits_last": logits, "prefill_logits": prefill_logits,
            "decode_logits": np.array(decode_logits).reshape(-1, prefill_logits.shape[-1]),
            "dump": merge_dumps(dumps) if want_dump else {}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reference.run", description=__doc__.split("\n\n")[0])
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="checkpoint directory (config.json + safetensors)")
    source.add_argument("--preset", help="built-in config with random weights: official, tiny, tiny_alt, tiny_v4")
    parser.add_argument("--seed", type=int, default=0, help="random-weights seed for --preset")
    parser.add_argument("--prompt-ids", required=True, help="comma-separated token ids")
    parser.add_argument("-n", type=int, default=1, help="tokens to generate greedily")
    parser.add_argument("--numerics", choices=("clean", "faithful"), default="faithful")
    parser.add_argument("--prefill", choices=("exact", "ced"), default="exact")
    parser.add_argument("--index-key-quirk", action="store_true", help="MODEL.md §8.5 shared index-key slot")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--golden", help="write prompt, tokens and all logits to this .npz")
    parser.add_argument("--dump", action="store_true", help="with --golden: include the per-layer dumps")
    args = parser.parse_args(argv)
    try:
        if args.n < 0:
            raise ModelError("-n must be >= 0")
        prompt = parse_ids(args.prompt_ids)
        model = build_model(args)
        result = run(model, prompt, args.n, args.prefill, args.dump and bool(args.golden))
    except (ValueError, KeyError, OSError) as error:  # ConfigError, WeightError, EngramError, ModelError, bad JSON
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.golden:
        np.savez(args.golden, prompt=np.array(prompt), tokens=np.array(result["tokens"], dtype=np.int64),
                 prefill_logits=result["prefill_logits"], decode_logits=result["decode_logits"],
                 index_topk=np.array(model.config.index_topk), **result["dump"])
    summary = {"tokens": result["tokens"],
               "logits_last": [float(v) for v in result["logits_last"][:LOGITS_SHOWN]],
               "prefill_logits_last": [float(v) for v in result["prefill_logits"][-1][:LOGITS_SHOWN]],
               "numerics": args.numerics, "prefill": args.prefill, "prompt_tokens": len(prompt)}
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"tokens: {' '.join(map(str, summary['tokens']))}")
        print(f"logits_last: {summary['logits_last']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
