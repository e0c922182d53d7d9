"""Engram conditional memory: token map, hash multipliers, prime-sized tables, n-gram hashing, gate (MODEL.md §7).

Hashing is integer (int64) and host-side: for position t the compressed ids c_{t−k}, k = 0..max_ngram−1 (pad id for
positions before the sequence start), P_k = c_{t−k}·m[L][k], h_n = P_0 ⊕ … ⊕ P_{n−1}, and for n-gram size n and head
e the table row of column col = (n−2)·heads + e is (h_n mod prime[L][col]) + offset[L][col].
"""

from __future__ import annotations

import json
import pathlib
from dataclasses import dataclass

import numpy as np

from .config import Config
from .numerics import Numerics
from .ops import sigmoid

MULTIPLIER_SEED = 10007
MULTIPLIER_FIXTURE = pathlib.Path(__file__).with_name("engram_multipliers.json")
GATE_FLOOR = 1e-6  # |dot| floor under the signed square root (§7)


class EngramError(ValueError):
    """An Engram config or table that breaks a rule of §7; the message names the field or tensor."""


# ---------------------------------------------------------------------------------------------------------
# Prime-sized tables (§7 step 5)


def is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin with the first 13 prime bases: exact for every n < 3.3e24."""
    if n < 2:
        return False
    bases = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    for p in bases:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in bases:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def engram_primes(config: Config) -> list[list[int]]:
    """Per Engram layer (engram_layer_ids order) the primes of its columns: consecutive primes greater than
    engram_vocab_size−1, handed out in order -- first layer's columns 0.., then the next layer's."""
    needed = config.engram_columns * len(config.engram_layer_ids)
    primes, candidate = [], config.engram_vocab_size
    while len(primes) < needed:
        if is_prime(candidate):
            primes.append(candidate)
        candidate += 1
    cols = config.engram_columns
    return [primes[i * cols : (i + 1) * cols] for i in range(len(config.engram_layer_ids))]


def engram_offsets(primes: list[int]) -> list[int]:
    """Exclusive prefix sums: column col owns table rows [offset, offset + prime)."""
    return [int(v) for v in np.cumsum([0] + primes[:-1])]


def check_table_rows(config: Config) -> None:
    """engram_num_embeddings must equal the prime sums (§7); EngramError naming the field otherwise."""
    rows = [sum(p) for p in engram_primes(config)]
    if list(config.engram_num_embeddings) != rows:
        raise EngramError(f"{config.source}: engram_num_embeddings {list(config.engram_num_embeddings)} disagree "
                          f"with the prime rule (consecutive primes > {config.engram_vocab_size - 1}), which gives "
                          f"{rows}")


# ---------------------------------------------------------------------------------------------------------
# Hash multipliers (§7 step 3, §11 item 6)


def multiplier_bound(compressed_vocab_size: int) -> int:
    """(int64_max // compressed_vocab) // 2, so that c·(2x+1) cannot overflow int64."""
    return max(1, (np.iinfo(np.int64).max // compressed_vocab_size) // 2)


def derive_multipliers(compressed_vocab_size: int, layer_id: int, max_ngram_size: int) -> list[int]:
    """numpy PCG64 default_rng(10007·layer_id).integers(0, bound, max_ngram_size), then 2x+1 (exact int64)."""
    rng = np.random.default_rng(MULTIPLIER_SEED * layer_id)
    draws = rng.integers(0, multiplier_bound(compressed_vocab_size), size=max_ngram_size, dtype=np.int64)
    return [int(v) * 2 + 1 for v in draws]


def pinned_multipliers() -> dict[tuple[int, int, int], list[int]]:
    """The fixture: {(compressed_vocab_size, max_ngram_size, layer_id): multipliers}, exact ints from strings."""
    document = json.loads(MULTIPLIER_FIXTURE.read_text(encoding="utf-8"))
    return {
        (e["compressed_vocab_size"], e["max_ngram_size"], e["layer_id"]): [int(v) for v in e["multipliers"]]
        for e in document["entries"]
    }


def hash_multipliers(config: Config, layer_id: int) -> list[int]:
    """Pinned values when the fixture has this (vocab, n-gram size, layer) -- numpy does not promise stream
    stability across releases -- else derived now."""
    vocab, size = config.engram_compressed_vocab_size, config.engram_max_ngram_size
    pinned = pinned_multipliers().get((vocab, size, layer_id))
    return pinned if pinned is not None else derive_multipliers(vocab, layer_id, size)


# ---------------------------------------------------------------------------------------------------------
# Token map (§7 step 1; §12)


def token_map(config: Config, explicit: np.ndarray | None = None) -> np.ndarray:
    """vocab id → compressed id. The official map comes from the tokenizer (pass it as `explicit`); without one,
    tiny checkpoints use c = id mod engram_compressed_vocab_size (§12), the identity when the sizes are equal."""
    if explicit is not None:
        lookup = np.asarray(explicit, dtype=np.int64)
        if lookup.shape != (config.vocab_size,):
            raise EngramError(f"engram token map has shape {lookup.shape}, expected ({config.vocab_size},)")
        if lookup.min() < 0 or lookup.max() >= config.engram_compressed_vocab_size:
            raise EngramError("engram token map ids must lie in [0, engram_compressed_vocab_size)")
        return lookup
    return np.arange(config.vocab_size, dtype=np.int64) % config.engram_compressed_vocab_size


@dataclass(frozen=True)
class EngramLayout:
    """Hash parameters of one Engram layer."""

    layer_id: int
    multipliers: np.ndarray  # int64 [max_ngram_size]
    primes: np.ndarray  # int64 [columns]
    offsets: np.ndarray  # int64 [columns]


def engram_layouts(config: Config) -> dict[int, EngramLayout]:
    """{layer id: layout} for every Engram layer; checks the table sizes against the prime rule."""
    if not config.engram_layer_ids:
        return {}
    check_table_rows(config)
    layouts = {}
    for layer_id, primes in zip(config.engram_layer_ids, engram_primes(config)):
        layouts[layer_id] = EngramLayout(
            layer_id,
            np.array(hash_multipliers(config, layer_id), dtype=np.int64),
            np.array(primes, dtype=np.int64),
            np.array(engram_offsets(primes), dtype=np.int64),
        )
    return layouts


def ngram_ids(history: np.ndarray, compressed: np.ndarray, max_ngram_size: int) -> np.ndarray:
    """[n, max_ngram] with column k = c_{t−k} for the n new positions; `history` holds the max_ngram−1 compressed
    ids before them (pad id where the position is before the sequence start)."""
    extended = np.concatenate([history, compressed])
    lead = max_ngram_size - 1
    n = compressed.shape[0]
    return np.stack([extended[lead - k : lead - k + n] for k in range(max_ngram_size)], axis=1)


def hash_rows(tokens: np.ndarray, layout: EngramLayout, n_heads: int) -> np.ndarray:
    """§7 steps 4-5: table rows [n, columns] from the n-gram ids [n, max_ngram] (int64, XOR of products)."""
    products = tokens.astype(np.int64) * layout.multipliers[None, :]
    rolling = products[:, 0]
    rows = []
    for size in range(2, tokens.shape[1] + 1):
        rolling = np.bitwise_xor(rolling, products[:, size - 1])
        cols = slice((size - 2) * n_heads, (size - 1) * n_heads)
        rows.append(rolling[:, None] % layout.primes[None, cols] + layout.offsets[None, cols])
    return np.concatenate(rows, axis=1)


def engram_update(streams: np.ndarray, rows: np.ndarray, weights: dict, config: Config,
                  numerics: Numerics) -> np.ndarray:
    """§7 memory update: E = rows of the table → kv = engram.wkv·E split keys first (hc keys, then the value);
    gate_i = sigmoid(±sqrt(max(|dot_i|, 1e-6))) with dot_i the normalized, ω-weighted stream·key product;
    X_i ← X_i + gate_i·value."""
    hc, dim = config.hc_mult, config.hidden_size
    table = weights["engram.embed.weight"]
    memory = table[rows].reshape(rows.shape[0], -1)
    kv = numerics.bf16(memory @ weights["engram.wkv.weight"].T)
    key = kv[:, : hc * dim].reshape(-1, hc, dim)
    value = kv[:, hc * dim :]
    omega = numerics.fp32(weights["engram.q_weight"] * weights["engram.k_weight"])
    eps = config.rms_norm_eps
    rstd = 1.0 / np.sqrt(np.mean(np.square(streams), axis=-1) + eps) / np.sqrt(np.mean(np.square(key), axis=-1) + eps)
    dot = numerics.fp32(np.sum(streams * omega[None] * key, axis=-1) * rstd / np.sqrt(dim))
    # copysign: a dot of exactly 0 takes the + branch (sigmoid(1e-3)), as the ports' kernels do
    gate = numerics.fp32(sigmoid(np.copysign(np.sqrt(np.maximum(np.abs(dot), GATE_FLOOR)), dot)))
    return numerics.bf16(streams + gate[:, :, None] * value[:, None, :])
