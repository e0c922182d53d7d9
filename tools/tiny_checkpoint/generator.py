"""Generating a whole checkpoint directory from a config and a seed.

Output: config.json (copied byte for byte), model-0000K-of-0000N.safetensors, model.safetensors.index.json,
tiny_checkpoint.json (how it was made), and tokenizer.json when one is given (`--tokenizer tiny`: a sub-vocabulary
of DeepSeek-V4's sized to the config, with tokenizer_config.json, from tools/make_tiny_tokenizer.py).
"""

from __future__ import annotations

import json
import pathlib
import shutil
from dataclasses import dataclass

import numpy as np

from . import initializers, storage
from .errors import TinyCheckpointError
from .inventory import TensorSpec, checkpoint_inventory
from .model_config import Config, load_config
from .shard_writer import INDEX_FILE, write_sharded

# A tiny checkpoint is megabytes; the released config would be ~510 GB. Anything past this needs --allow-large.
DEFAULT_SIZE_LIMIT = 2_000_000_000
PROVENANCE_FILE = "tiny_checkpoint.json"
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
_OWNED_PATTERNS = ("model-*-of-*.safetensors", INDEX_FILE, "config.json", "tokenizer.json", "tokenizer_config.json",
                   PROVENANCE_FILE)
TINY_TOKENIZER = pathlib.Path("tiny")  # --tokenizer tiny: generate one rather than copy a file


@dataclass(frozen=True)
class GenerateOptions:
    seed: int
    shards: int = 2
    storage: storage.StorageOptions = storage.StorageOptions()
    tokenizer: pathlib.Path | None = None
    size_limit: int | None = DEFAULT_SIZE_LIMIT
    overwrite: bool = False


def checkpoint_bytes(specs: list[TensorSpec]) -> int:
    return sum(storage.stored_bytes(spec) for spec in specs)


def draw_weights(config: Config, seed: int) -> dict[str, np.ndarray]:
    """The float32 master value of every tensor (logical shapes, before storage rounding), by tensor name."""
    return {spec.name: initializers.draw(spec, seed) for spec in checkpoint_inventory(config)}


def generate(config_path: pathlib.Path, out_dir: pathlib.Path, options: GenerateOptions) -> dict:
    """Write the checkpoint of `config_path` for `options.seed` into `out_dir`; returns the index object."""
    if options.seed < 0:
        raise TinyCheckpointError(f"seed must be a non-negative integer, got {options.seed}")
    config = load_config(config_path)
    specs = checkpoint_inventory(config)
    size = checkpoint_bytes(specs)
    if options.size_limit is not None and size > options.size_limit:
        raise TinyCheckpointError(
            f"{config_path}: this config makes a {size / 1e9:.1f} GB checkpoint "
            f"({sum(storage.stored_tensor_count(spec) for spec in specs)} tensors), more than the "
            f"{options.size_limit / 1e9:.1f} GB limit for generated test checkpoints; pass --allow-large to generate "
            f"it anyway (memory holds one shard at a time: choose --shards accordingly)"
        )
    if not 1 <= options.shards <= len(specs):
        raise TinyCheckpointError(f"--shards must be between 1 and {len(specs)} for this config, got {options.shards}")
    if options.tokenizer not in (None, TINY_TOKENIZER):
        _check_tokenizer(options.tokenizer)
    _prepare_out_dir(out_dir, options.overwrite)

    def encoded(spec: TensorSpec):
        return lambda: storage.stored_arrays(spec, initializers.draw(spec, options.seed), options.storage)

    index = write_sharded(out_dir, [encoded(spec) for spec in specs],
                          [storage.stored_bytes(spec) for spec in specs], options.shards)
    shutil.copyfile(config_path, out_dir / "config.json")
    if options.tokenizer == TINY_TOKENIZER:
        from make_tiny_tokenizer import write_tiny_tokenizer  # noqa: PLC0415 -- tools/ is on sys.path

        write_tiny_tokenizer(out_dir, config.vocab_size)
    elif options.tokenizer is not None:
        shutil.copyfile(options.tokenizer, out_dir / "tokenizer.json")
    _write_provenance(out_dir, config_path, options, index)
    return index


def _check_tokenizer(path: pathlib.Path) -> None:
    """A tokenizer.json must at least be a JSON object; its contents are the tokenizer milestone's business."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise TinyCheckpointError(f"tokenizer file {path} is not readable JSON: {error}") from error
    if not isinstance(document, dict):
        raise TinyCheckpointError(f"tokenizer file {path}: top level must be a JSON object")


def _prepare_out_dir(out_dir: pathlib.Path, overwrite: bool) -> None:
    """Create `out_dir`; an existing checkpoint there is replaced only with --overwrite (stale shards of a run
    with another shard count would otherwise sit next to the new index)."""
    if out_dir.exists() and not out_dir.is_dir():
        raise TinyCheckpointError(f"output path {out_dir} exists and is not a directory")
    out_dir.mkdir(parents=True, exist_ok=True)
    ours = sorted({path for pattern in _OWNED_PATTERNS for path in out_dir.glob(pattern)})
    if ours and not overwrite:
        raise TinyCheckpointError(
            f"output directory {out_dir} already holds a checkpoint ({ours[0].name}, ...); pass --overwrite to "
            f"replace it"
        )
    for path in ours:
        path.unlink()


def _describe_path(path: pathlib.Path) -> str:
    """Repository-relative for the built-in configs, so the record is the same on every machine."""
    resolved = path.resolve()
    return str(resolved.relative_to(REPO_ROOT)) if resolved.is_relative_to(REPO_ROOT) else str(resolved)


def _write_provenance(out_dir: pathlib.Path, config_path: pathlib.Path, options: GenerateOptions, index: dict) -> None:
    record = {
        "generator": "flashkv tools/make-tiny-checkpoint",
        "config": _describe_path(config_path),
        "seed": options.seed,
        "shards": options.shards,
        "scale_dtype": "F8_E8M0" if options.storage.scale_dtype == "e8m0" else "U8",
        "packed_fp4_dtype": options.storage.packed_dtype.upper(),
        "tensors": len(index["weight_map"]),
        "total_size": index["metadata"]["total_size"],
        "tokenizer": options.tokenizer is not None,
    }
    (out_dir / PROVENANCE_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
