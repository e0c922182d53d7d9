"""Command line of tools/make-tiny-checkpoint (see docs/tiny-checkpoints.md)."""

from __future__ import annotations

import argparse
import pathlib
import sys
import time

from . import storage
from .errors import TinyCheckpointError
from .generator import DEFAULT_SIZE_LIMIT, REPO_ROOT, GenerateOptions, generate

CONFIG_DIR = REPO_ROOT / "tests" / "data" / "configs"


def builtin_configs() -> dict[str, pathlib.Path]:
    """Built-in names: every tests/data/configs/NAME/config.json (tiny-v41, tiny-v41-alt, deepseek-v4.1-flash)."""
    return {path.parent.name: path for path in sorted(CONFIG_DIR.glob("*/config.json"))}


def resolve_config(name_or_path: str) -> pathlib.Path:
    """A built-in config name, a config.json path, or a directory holding a config.json."""
    builtins = builtin_configs()
    if name_or_path in builtins:
        return builtins[name_or_path]
    path = pathlib.Path(name_or_path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise TinyCheckpointError(
            f"--config {name_or_path!r} is neither a built-in config ({', '.join(builtins)}) nor an existing "
            f"config.json file or directory"
        )
    return path


def parse_args(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="make-tiny-checkpoint",
        description="Write a DeepSeek-V4.1 or V4-Flash checkpoint (config.json + sharded safetensors + index) "
        "with weights drawn from a seed, in the released tensor names and storage formats.",
    )
    parser.add_argument("--config", required=True, metavar="NAME_OR_PATH",
                        help=f"built-in name ({', '.join(builtin_configs())}) or path of a V4.1 / V4 config.json")
    parser.add_argument("--seed", required=True, type=int, help="non-negative integer; same seed, same bytes")
    parser.add_argument("--out", required=True, type=pathlib.Path, metavar="DIR", help="output directory")
    parser.add_argument("--shards", type=int, default=2, help="number of safetensors files (default 2)")
    parser.add_argument("--tokenizer", type=pathlib.Path, metavar="PATH",
                        help="tokenizer.json to copy into the checkpoint, or `tiny`: a DeepSeek-V4 sub-vocabulary "
                        "of the config's vocab_size (tools/make_tiny_tokenizer.py)")
    parser.add_argument("--scale-dtype", choices=sorted(storage.SCALE_DTYPES), default="e8m0",
                        help="dtype label of E8M0 scales: e8m0 = F8_E8M0 (released checkpoint), u8 = raw bytes")
    parser.add_argument("--packed-dtype", choices=sorted(storage.PACKED_DTYPES), default="i8",
                        help="dtype label of packed FP4 experts: i8 (released checkpoint) or u8")
    parser.add_argument("--allow-large", action="store_true",
                        help="generate even when the checkpoint would exceed 2 GB (e.g. the released config)")
    parser.add_argument("--overwrite", action="store_true", help="replace a checkpoint already in DIR")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    started = time.monotonic()
    try:
        options = GenerateOptions(
            seed=args.seed,
            shards=args.shards,
            storage=storage.StorageOptions(scale_dtype=args.scale_dtype, packed_dtype=args.packed_dtype),
            tokenizer=args.tokenizer,
            size_limit=None if args.allow_large else DEFAULT_SIZE_LIMIT,
            overwrite=args.overwrite,
        )
        index = generate(resolve_config(args.config), args.out, options)
    except TinyCheckpointError as error:
        print(f"make-tiny-checkpoint: error: {error}", file=sys.stderr)
        return 2
    print(
        f"make-tiny-checkpoint: wrote {len(index['weight_map'])} tensors, {index['metadata']['total_size']} bytes, "
        f"{args.shards} shard(s) to {args.out} in {time.monotonic() - started:.2f} s"
    )
    return 0
