"""Per-layer dumps: what each layer computed for the rows of one call, so a mismatch in an engine can be located to
a layer and a mechanism.

Keys (n = rows of the call, E = entries of an owner's cache):
  positions [n]; embed [n, D]; logits [n, V] (rows whose logits were computed: all in exact mode, last in CED);
  final_hidden [n, D] (normalized input of the head);
  layer{L}.engram_streams [n, hc, D] (after Engram);    layer{L}.attn_input [n, D] (u);
  layer{L}.window_row [n, head_dim];                    layer{L}.index_scores [n, E] (−∞ invisible / outside pool);
  layer{L}.pool [n, E] (candidate source);              layer{L}.topk [n, index_topk] (selection used, −1 padded);
  layer{L}.attn_output [n, D] (y);                      layer{L}.experts / layer{L}.routing [n, k];
  layer{L}.ffn_output [n, D] (z);                       layer{L}.streams [n, hc, D] (after the block);
  layer{L}.entries [E, head_dim], layer{L}.index_keys [E, index_head_dim] (the owner's whole cache after the call);
  layer{L}.selection [n, E] (V4 HCA layers: every visible entry, −1 padded).
"""

from __future__ import annotations

import numpy as np

CACHE_SUFFIXES = (".entries", ".index_keys")


class Dump:
    """Collects the arrays of one call."""

    def __init__(self) -> None:
        self.arrays: dict[str, np.ndarray] = {}

    def put(self, name: str, array: np.ndarray) -> None:
        self.arrays[name] = np.array(array, copy=True)

    def layer(self, layer: int, name: str, array: np.ndarray) -> None:
        self.put(f"layer{layer}.{name}", array)


def is_cache(name: str) -> bool:
    return name.endswith(CACHE_SUFFIXES)


def merge_dumps(dumps: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Joins the dumps of consecutive calls (prefill, then decode steps): per-row arrays are concatenated along the
    row axis (ragged widths -- scores and pools grow with the cache -- padded with −∞ / False / −1), cache arrays are
    taken from the last call that has them."""
    merged: dict[str, np.ndarray] = {}
    names = []
    for dump in dumps:
        names += [n for n in dump if n not in names]
    for name in names:
        parts = [d[name] for d in dumps if name in d]
        if is_cache(name):
            merged[name] = parts[-1]
        else:
            merged[name] = _concatenate_ragged(parts)
    return merged


def _concatenate_ragged(parts: list[np.ndarray]) -> np.ndarray:
    if parts[0].ndim < 2 or all(p.shape[1:] == parts[0].shape[1:] for p in parts):
        return np.concatenate(parts, axis=0)
    width = max(p.shape[1] for p in parts)
    fill = False if parts[0].dtype == bool else -1 if np.issubdtype(parts[0].dtype, np.integer) else -np.inf
    padded = []
    for p in parts:
        out = np.full((p.shape[0], width) + p.shape[2:], fill, dtype=p.dtype)
        out[:, : p.shape[1]] = p
        padded.append(out)
    return np.concatenate(padded, axis=0)
