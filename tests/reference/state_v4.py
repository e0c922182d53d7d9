"""Per-sequence state of the V4 mode between calls: every layer's window ring, each compressed layer's entries
(and a CSA layer's index keys), and the open-window state of every compressor (MODEL.md §8.2's V4 counterpart)."""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from .compressor_v4 import CompressorStateV4
from .window import WindowRing


@dataclass
class SequenceStateV4:
    """`length` tokens processed (positions 0…length−1)."""

    length: int
    tokens: list[int]
    windows: dict[int, WindowRing]
    entries: dict[int, np.ndarray]  # compressed layer → [entries, head_dim] (RoPE'd; V4 KV storage when faithful)
    index_keys: dict[int, np.ndarray]  # CSA layer → [entries, index_head_dim]
    compressors: dict[tuple[int, str], CompressorStateV4]  # (layer, 'kv' | 'index') → open window

    def copy(self) -> SequenceStateV4:
        return copy.deepcopy(self)
