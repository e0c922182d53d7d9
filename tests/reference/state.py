"""Per-sequence state of the reference between calls (MODEL.md §8.2): window rings, compressed entries and index
keys of the KV owners, the ratio≥2 compressors' pending (v, g), the Engram history, and -- for the §8.5 quirk only --
which owner's index keys the shared "published" slot points at.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from .compressor import Pending
from .window import WindowRing


@dataclass
class SequenceState:
    """Everything a later call needs; `length` tokens have been processed (positions 0…length−1)."""

    length: int
    tokens: list[int]
    windows: dict[int, WindowRing]
    entries: dict[int, np.ndarray]  # KV owner → [entries, head_dim] (after RoPE, quantized in faithful mode)
    index_keys: dict[int, np.ndarray]  # KV owner → [entries, index_head_dim]
    pending: dict[int, Pending | None]  # ratio ≥ 2 owner → open group
    engram_history: np.ndarray  # compressed ids of the max_ngram−1 positions before `length` (pad before 0)
    owner_ratio: dict[int, int]  # KV owner → compress ratio
    published_index_keys: int = -1  # §8.5 quirk: the owner whose keys the shared slot holds; −1 before any

    def copy(self) -> SequenceState:
        return copy.deepcopy(self)

    def global_only(self, tokens: int) -> SequenceState:
        """What a persistent prefix cache of the first `tokens` tokens holds (§8.4): the owners' entries and index
        keys published by then, nothing else (rings empty, no pending state)."""
        state = self.copy()
        state.length = 0
        state.tokens = []
        for ring in state.windows.values():
            ring.positions[:] = -1
            ring.rows[:] = 0.0
        for owner, ratio in self.owner_ratio.items():
            state.entries[owner] = self.entries[owner][: tokens // ratio].copy()
            state.index_keys[owner] = self.index_keys[owner][: tokens // ratio].copy()
            if owner in state.pending:
                state.pending[owner] = None
        return state
