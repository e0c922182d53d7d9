"""Drawing a tensor's float values from the seed.

Each tensor has its own random stream, keyed by (seed, tensor name), so a tensor's values do not depend on
which other tensors exist or in what order they are drawn: adding a layer to a config leaves the others alone.
"""

from __future__ import annotations

import hashlib

import numpy as np

from .inventory import TensorSpec


def tensor_rng(seed: int, name: str) -> np.random.Generator:
    """PCG64 stream for one tensor: SeedSequence over the seed and four 32-bit words of sha256(name)."""
    digest = hashlib.sha256(name.encode("utf-8")).digest()
    name_words = [int.from_bytes(digest[i : i + 4], "little") for i in range(0, 16, 4)]
    return np.random.default_rng(np.random.SeedSequence([seed, *name_words]))


def _expert_ids(rng: np.random.Generator, shape: tuple[int, ...], experts: int) -> np.ndarray:
    """Rows of distinct expert ids in [0, experts), uniformly at random (a hash-routing table, V4 tid2eid)."""
    rows, k = shape
    if k > experts:
        raise ValueError(f"cannot draw {k} distinct experts of {experts}")
    return np.argsort(rng.random((rows, experts)), axis=1)[:, :k].astype(np.int32)


def draw(spec: TensorSpec, seed: int) -> np.ndarray:
    """The float32 master values of `spec` for `seed` (before any storage rounding); int32 ids for an expert-id
    table."""
    rng = tensor_rng(seed, spec.name)
    init = spec.init
    if init.kind == "normal":
        values = rng.standard_normal(spec.shape, dtype=np.float32) * np.float32(init.spread)
    elif init.kind == "uniform":
        values = rng.uniform(-init.spread, init.spread, spec.shape).astype(np.float32)
    elif init.kind == "expert_ids":
        return _expert_ids(rng, spec.shape, int(init.mean))
    else:
        raise ValueError(f"unknown initializer kind {init.kind!r} for {spec.name}")
    return values + np.float32(init.mean)
