"""The sliding-window KV ring of one layer (MODEL.md §5.2, §8.2).

W rows, row of position s in slot s mod W. A query at position s reads the window rows max(0, s−W+1)…s (its own
row included). Rows never written (CED decoder layers before P−W, bounded replay before C−W) are simply absent, which
is how both deployment approximations floor their SWA reads (§8.4).
"""

from __future__ import annotations

import numpy as np


class WindowRing:
    """Fixed-size ring of window KV rows with the absolute position held in each slot (−1: empty)."""

    def __init__(self, size: int, head_dim: int) -> None:
        self.size = size
        self.rows = np.zeros((size, head_dim))
        self.positions = np.full(size, -1, dtype=np.int64)

    def copy(self) -> WindowRing:
        other = WindowRing(self.size, self.rows.shape[1])
        other.rows, other.positions = self.rows.copy(), self.positions.copy()
        return other

    def keys_with(self, new_rows: np.ndarray, new_positions: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Keys a chunk can see: the ring's rows (older positions) followed by the chunk's own rows, with their
        positions; `window_mask` decides which of them each query reads."""
        held = np.flatnonzero(self.positions >= 0)
        held = held[np.argsort(self.positions[held])]
        if held.size and self.positions[held[-1]] >= new_positions[0]:
            raise ValueError(f"window ring holds position {self.positions[held[-1]]}, not before the chunk "
                             f"starting at {new_positions[0]}")
        keys = np.concatenate([self.rows[held], new_rows])
        return keys, np.concatenate([self.positions[held], new_positions])

    def append(self, new_rows: np.ndarray, new_positions: np.ndarray) -> None:
        """Writes the chunk's rows; only the last W survive."""
        tail = slice(max(0, new_rows.shape[0] - self.size), None)
        slots = new_positions[tail] % self.size
        self.rows[slots] = new_rows[tail]
        self.positions[slots] = new_positions[tail]


def window_mask(query_positions: np.ndarray, key_positions: np.ndarray, size: int) -> np.ndarray:
    """[n, m]: key position within (s−W, s] of query position s."""
    q = query_positions[:, None]
    k = key_positions[None, :]
    return (k <= q) & (k > q - size)
