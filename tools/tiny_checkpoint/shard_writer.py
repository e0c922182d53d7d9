"""Writing tensors as sharded safetensors files plus the `model.safetensors.index.json` that maps them.

Shards are written one at a time, so memory holds one shard, not the checkpoint. File names and the index
follow the Hugging Face convention every loader of the released checkpoint reads.
"""

from __future__ import annotations

import bisect
import itertools
import json
import pathlib
from collections.abc import Callable, Iterable, Sequence

import numpy as np
from safetensors.numpy import save_file

INDEX_FILE = "model.safetensors.index.json"


def shard_file_name(shard: int, shard_count: int) -> str:
    """`model-00001-of-00003.safetensors` for shard 0 of 3."""
    return f"model-{shard + 1:05d}-of-{shard_count:05d}.safetensors"


def partition_by_bytes(sizes: Sequence[int], shard_count: int) -> list[range]:
    """Split items 0..len-1 into `shard_count` contiguous, non-empty runs of roughly equal total size."""
    if not 1 <= shard_count <= len(sizes):
        raise ValueError(f"cannot split {len(sizes)} tensors into {shard_count} shards")
    bytes_before = list(itertools.accumulate(sizes, initial=0))
    total = bytes_before[-1]
    starts = [0]
    for shard in range(1, shard_count):
        # first item that begins at or past this shard's share of the bytes ...
        start = bisect.bisect_left([before * shard_count for before in bytes_before[:-1]], shard * total)
        # ... but every shard gets at least one item, and enough items remain for the shards after it
        start = min(max(start, starts[-1] + 1), len(sizes) - (shard_count - shard))
        starts.append(start)
    ends = starts[1:] + [len(sizes)]
    return [range(start, end) for start, end in zip(starts, ends)]


def write_sharded(
    out_dir: pathlib.Path,
    groups: Sequence[Callable[[], Iterable[tuple[str, np.ndarray]]]],
    sizes: Sequence[int],
    shard_count: int,
) -> dict:
    """Write `groups` (each a callable yielding named arrays, kept together in one shard) into `shard_count`
    files of `out_dir` and the index; returns the index object."""
    weight_map: dict[str, str] = {}
    total_size = 0
    for shard, members in enumerate(partition_by_bytes(sizes, shard_count)):
        file_name = shard_file_name(shard, shard_count)
        tensors: dict[str, np.ndarray] = {}
        for member in members:
            for name, array in groups[member]():
                if name in tensors or name in weight_map:
                    raise ValueError(f"tensor {name} generated twice")
                tensors[name] = array
                weight_map[name] = file_name
                total_size += array.nbytes
        save_file(tensors, str(out_dir / file_name), metadata={"format": "pt"})
    index = {"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
    (out_dir / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n", encoding="utf-8")
    return index
