"""Sampler (lib/runtime/sampling) against a numpy oracle written from docs/sampling.md.

The oracle applies penalties -> temperature -> top-k -> top-p -> min-p in float64 and is compared with the
C++ filtered distribution on fresh random logits; the draws are checked by a chi-square bound on 20k
samples and, exactly, by replaying the documented inverse-CDF draw on a pure-Python xoshiro256** stream.
"""
import os

import numpy as np
import pytest

MASK64 = (1 << 64) - 1


def fresh_seed() -> int:
    return int.from_bytes(os.urandom(8), "little")


def f32(x: float) -> float:
    """The value the C++ side sees for a float parameter."""
    return float(np.float32(x))


# ---------------------------------------------------------------------------------------------- oracle


def penalised(logits, history, rep=1.0, presence=0.0, frequency=0.0):
    z = logits.astype(np.float64)
    if len(history) == 0:
        return z
    counts = np.bincount(np.asarray(history, dtype=np.int64), minlength=z.size).astype(np.float64)
    seen = counts > 0
    z[seen] = np.where(z[seen] > 0, z[seen] / f32(rep), z[seen] * f32(rep))
    z -= counts * f32(frequency)
    z -= seen * f32(presence)
    return z


def rank_order(z):
    """Larger logit first, lower id first among equals."""
    return np.lexsort((np.arange(z.size), -z))


def oracle_weights(logits, history, p):
    """(z, unnormalised weights of the survivors, keep mask) per the documented order; None z for greedy."""
    z = penalised(logits, history, p["repetition_penalty"], p["presence_penalty"], p["frequency_penalty"])
    z = z / f32(p["temperature"])
    w = np.exp(z - z.max())
    keep = np.ones(z.size, dtype=bool)
    order = rank_order(z)
    if p["top_k"] > 0:
        keep[order[p["top_k"]:]] = False
    if f32(p["top_p"]) < 1.0:
        ranked = order[keep[order]]
        probs = w[ranked] / w[ranked].sum()
        mass_before = np.cumsum(probs) - probs
        keep_ranked = mass_before < f32(p["top_p"])
        keep_ranked[0] = True
        keep[ranked[~keep_ranked]] = False
    if f32(p["min_p"]) > 0.0:
        threshold = f32(p["min_p"]) * w[keep].max()
        keep &= w >= threshold
    return z, np.where(keep, w, 0.0), keep


def oracle_probabilities(logits, history, p):
    _, w, _ = oracle_weights(logits, history, p)
    return w / w.sum()


def near_a_threshold(logits, history, p) -> bool:
    """True when a top-p or min-p decision sits within rounding of its threshold (the oracle is float64 too,
    but its summation order differs from the C++ one)."""
    z = penalised(logits, history, p["repetition_penalty"], p["presence_penalty"], p["frequency_penalty"])
    z = z / f32(p["temperature"])
    w = np.exp(z - z.max())
    order = rank_order(z)
    if p["top_k"] > 0:
        order = order[: p["top_k"]]
    if f32(p["top_p"]) < 1.0:
        probs = w[order] / w[order].sum()
        if np.min(np.abs(np.cumsum(probs) - probs - f32(p["top_p"]))) < 1e-9:
            return True
    if f32(p["min_p"]) > 0.0:
        if np.min(np.abs(w[order] - f32(p["min_p"]) * w[order].max())) < 1e-12:
            return True
    return False


def params(**kw):
    base = dict(temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, repetition_penalty=1.0, presence_penalty=0.0,
                frequency_penalty=0.0, seed=0)
    base.update(kw)
    return base


def random_params(rng):
    """A random mix of filters, each on about half the time."""
    p = params(temperature=float(rng.uniform(0.3, 2.0)), seed=int(rng.integers(0, 2**63)))
    if rng.random() < 0.5:
        p["top_k"] = int(rng.integers(2, 60))
    if rng.random() < 0.5:
        p["top_p"] = float(rng.uniform(0.3, 0.99))
    if rng.random() < 0.5:
        p["min_p"] = float(rng.uniform(0.001, 0.3))
    if rng.random() < 0.5:
        p["repetition_penalty"] = float(rng.uniform(0.7, 2.0))
    if rng.random() < 0.5:
        p["presence_penalty"] = float(rng.uniform(-1.0, 1.5))
    if rng.random() < 0.5:
        p["frequency_penalty"] = float(rng.uniform(-0.5, 0.8))
    return p


def random_case(rng):
    vocab = int(rng.integers(8, 3000))
    logits = (rng.standard_normal(vocab) * rng.uniform(0.5, 6.0)).astype(np.float32)
    history = rng.integers(0, vocab, size=int(rng.integers(0, 40))).tolist()
    return logits, history


# ---------------------------------------------------------------------------------------------- tests


def test_filtered_distribution_matches_numpy_oracle(fkt):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    checked = 0
    for case in range(300):
        logits, history = random_case(rng)
        p = random_params(rng)
        if near_a_threshold(logits, history, p):
            continue
        got = fkt.Sampler(**p).probabilities(logits, history)
        want = oracle_probabilities(logits, history, p)
        assert np.array_equal(got > 0, want > 0), f"seed {seed} case {case} params {p}: survivors differ"
        assert np.allclose(got, want, rtol=1e-9, atol=1e-15), f"seed {seed} case {case} params {p}"
        assert abs(got.sum() - 1.0) < 1e-12
        checked += 1
    assert checked > 250, f"seed {seed}: too many cases skipped near thresholds ({checked})"


def test_each_filter_changes_the_distribution_as_documented(fkt):
    """Hand-sized facts from docs/sampling.md: top-k keeps exactly k even on ties, top-p keeps the token that
    crosses the mass, min-p is relative to the top probability."""
    logits = np.log(np.array([0.1, 0.4, 0.2, 0.2, 0.1], dtype=np.float64)).astype(np.float32)
    # top-k 2 on the tie at 0.2: ids 1 and 2 (the lower id of the tie).
    assert np.flatnonzero(fkt.Sampler(top_k=2).probabilities(logits)).tolist() == [1, 2]
    # top-p 0.5: 0.4 is ranked first (mass before 0 < 0.5), then id 2 (mass before 0.4 < 0.5), then stop.
    assert np.flatnonzero(fkt.Sampler(top_p=0.5).probabilities(logits)).tolist() == [1, 2]
    # min-p 0.45: keep p >= 0.18 -> ids 1, 2, 3 (0.5 itself would sit on the float32 rounding of the logs).
    assert np.flatnonzero(fkt.Sampler(min_p=0.45).probabilities(logits)).tolist() == [1, 2, 3]
    # temperature 0.5 squares the odds: 0.4^2 / (0.01 + 0.16 + 0.04 + 0.04 + 0.01).
    assert fkt.Sampler(temperature=0.5).probabilities(logits)[1] == pytest.approx(0.16 / 0.26, rel=1e-6)


def chi_square_bound(df: int) -> float:
    """Upper 1e-6 tail of chi-square(df) by Wilson-Hilferty (no scipy here)."""
    z = 4.753
    return df * (1.0 - 2.0 / (9.0 * df) + z * np.sqrt(2.0 / (9.0 * df))) ** 3


@pytest.mark.parametrize("filters", [
    dict(),
    dict(temperature=0.7, top_k=12),
    dict(temperature=1.3, top_p=0.8),
    dict(min_p=0.05, repetition_penalty=1.4, presence_penalty=0.3),
    dict(temperature=0.9, top_k=30, top_p=0.9, min_p=0.02, frequency_penalty=0.2),
])
def test_sample_frequencies_follow_the_distribution(fkt, filters):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    vocab = 40
    logits = (rng.standard_normal(vocab) * 1.5).astype(np.float32)
    history = rng.integers(0, vocab, size=10).tolist()
    p = params(**filters, seed=seed & (2**63 - 1))
    want = oracle_probabilities(logits, history, p)
    n = 20000
    tokens = np.asarray(fkt.Sampler(**p).sample_many(logits, history, n))
    counts = np.bincount(tokens, minlength=vocab)
    assert counts[want == 0].sum() == 0, f"seed {seed}: a filtered token was drawn"
    expected = want * n
    big = expected >= 5.0
    observed = np.append(counts[big], counts[~big].sum())
    expect = np.append(expected[big], expected[~big].sum())
    if expect[-1] < 5.0:  # fold the small remainder into the smallest kept bin
        observed, expect = observed[:-1], expect[:-1]
        observed[np.argmin(expect)] += counts[~big].sum()
        expect[np.argmin(expect)] += expected[~big].sum()
    stat = float(((observed - expect) ** 2 / expect).sum())
    df = max(len(expect) - 1, 1)
    assert stat < chi_square_bound(df), f"seed {seed} {filters}: chi2 {stat:.1f} for {df} dof"


class XoshiroOracle:
    """xoshiro256** seeded by splitmix64, from the authors' published definitions, in Python integers."""

    def __init__(self, seed: int):
        self.x = seed & MASK64
        self.s = [self._splitmix() for _ in range(4)]

    def _splitmix(self) -> int:
        self.x = (self.x + 0x9E3779B97F4A7C15) & MASK64
        z = self.x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    @staticmethod
    def _rotl(x: int, k: int) -> int:
        return ((x << k) | (x >> (64 - k))) & MASK64

    def next_u64(self) -> int:
        s = self.s
        result = (self._rotl((s[1] * 5) & MASK64, 7) * 9) & MASK64
        t = (s[1] << 17) & MASK64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = self._rotl(s[3], 45)
        return result

    def next_unit(self) -> float:
        return (self.next_u64() >> 11) * 2.0**-53


def test_generator_matches_python_xoshiro(fkt):
    seed = fresh_seed()
    cpp = fkt.SampleRng(seed)
    py = XoshiroOracle(seed)
    for i in range(2000):
        assert cpp.next_u64() == py.next_u64(), f"seed {seed} draw {i}"
    assert cpp.next_unit() == py.next_unit()


def test_draws_replay_exactly_from_the_documented_procedure(fkt):
    """Same seed -> same tokens anywhere: the draw is u * total against the running sum of the survivors'
    weights in ascending token id, with u from xoshiro256**. Replayed here token for token."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for case in range(20):
        logits, history = random_case(rng)
        p = random_params(rng)
        if p["top_k"] == 1 or near_a_threshold(logits, history, p):
            continue
        _, w, keep = oracle_weights(logits, history, p)
        ids = np.flatnonzero(keep & (w > 0))
        weights = w[ids]
        total = 0.0
        for x in weights:  # sequential, as the C++ sums
            total += x
        cumulative = np.cumsum(weights)  # sequential left-to-right as well
        stream = XoshiroOracle(p["seed"])
        want = [int(ids[min(np.searchsorted(cumulative, stream.next_unit() * total, side="right"), len(ids) - 1)])
                for _ in range(200)]
        got = fkt.Sampler(**p).sample_many(logits, history, 200)
        assert got == want, f"seed {seed} case {case} params {p}"


def replay_draw(logits, history, p, stream) -> int:
    _, w, keep = oracle_weights(logits, history, p)
    ids = np.flatnonzero(keep & (w > 0))
    total = 0.0
    for x in w[ids]:
        total += x
    cumulative = np.cumsum(w[ids])
    return int(ids[min(np.searchsorted(cumulative, stream.next_unit() * total, side="right"), len(ids) - 1)])


def test_one_sampler_across_changing_rows_and_histories(fkt):
    """A session keeps one Sampler: its reused buffers must not leak one step's history or vocab into the next."""
    seed = fresh_seed() & (2**63 - 1)
    rng = np.random.default_rng(seed)
    p = params(temperature=0.8, top_p=0.9, min_p=0.01, repetition_penalty=1.3, presence_penalty=0.5,
               frequency_penalty=0.2, seed=seed)
    sampler = fkt.Sampler(**p)
    stream = XoshiroOracle(seed)
    for step in range(40):
        logits, history = random_case(rng)
        if near_a_threshold(logits, history, p):
            stream.next_unit()  # keep the streams aligned; the C++ draw is not checked on this row
            sampler.sample(logits, history)
            continue
        assert sampler.sample(logits, history) == replay_draw(logits, history, p, stream), f"seed {seed} step {step}"


def test_top_p_deep_cut_on_a_flat_row(fkt):
    """Flat rows push the top-p cut past the first sorted blocks (256, 2048, ...)."""
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for vocab, top_p in ((5000, 0.97), (20000, 0.5), (3000, 0.2)):
        logits = (rng.standard_normal(vocab) * 0.2).astype(np.float32)
        p = params(top_p=top_p)
        if near_a_threshold(logits, [], p):
            continue
        got = fkt.Sampler(**p).probabilities(logits)
        want = oracle_probabilities(logits, [], p)
        assert np.count_nonzero(want) > 256
        assert np.array_equal(got > 0, want > 0), f"seed {seed} vocab {vocab}"
        assert np.allclose(got, want, rtol=1e-9, atol=1e-15), f"seed {seed} vocab {vocab}"


def test_same_seed_same_sequence_and_seeds_differ(fkt):
    seed = fresh_seed() & (2**63 - 1)
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal(500).astype(np.float32)
    a = fkt.Sampler(seed=seed, top_p=0.95).sample_many(logits, [], 300)
    b = fkt.Sampler(seed=seed, top_p=0.95).sample_many(logits, [], 300)
    c = fkt.Sampler(seed=seed + 1, top_p=0.95).sample_many(logits, [], 300)
    assert a == b
    assert a != c, f"seed {seed}"


@pytest.mark.parametrize("greedy", [dict(temperature=0.0), dict(top_k=1, temperature=1.7)])
def test_greedy_is_argmax_with_lowest_index_ties(fkt, greedy):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for _ in range(100):
        logits = rng.standard_normal(int(rng.integers(2, 400))).astype(np.float32)
        if rng.random() < 0.5:  # plant a tie at the top
            i, j = rng.integers(0, logits.size, size=2)
            logits[i] = logits[j] = logits.max() + 1.0
        sampler = fkt.Sampler(**greedy, seed=int(rng.integers(0, 2**63)))
        want = int(np.argmax(logits))  # numpy returns the first maximum
        assert sampler.sample(logits) == want, f"seed {seed}"
        assert sampler.probabilities(logits)[want] == 1.0


def test_greedy_sees_the_penalties(fkt):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    for _ in range(100):
        logits = rng.standard_normal(64).astype(np.float32)
        history = rng.integers(0, 64, size=12).tolist()
        z = penalised(logits, history, 1.8, 0.4, 0.1)
        sampler = fkt.Sampler(temperature=0.0, repetition_penalty=1.8, presence_penalty=0.4, frequency_penalty=0.1)
        assert sampler.sample(logits, history) == int(np.argmax(z)), f"seed {seed}"


@pytest.mark.parametrize("field, value", [
    ("temperature", -1.0), ("temperature", float("nan")), ("temperature", float("inf")),
    ("top_k", -3), ("top_p", 0.0), ("top_p", 1.01), ("min_p", -0.01), ("min_p", 1.5),
    ("repetition_penalty", 0.0), ("repetition_penalty", -1.0), ("presence_penalty", float("nan")),
    ("frequency_penalty", float("-inf")),
])
def test_invalid_params_are_refused_naming_the_field(fkt, field, value):
    with pytest.raises(fkt.SamplingError, match=rf"^invalid_argument: sampling parameter {field} = "):
        fkt.Sampler(**{field: value})


def test_bad_logits_are_refused(fkt):
    logits = np.ones(10, dtype=np.float32)
    logits[3] = np.nan
    with pytest.raises(fkt.SamplingError, match=r"logits\[3\] is NaN"):
        fkt.Sampler().sample(logits)
    with pytest.raises(fkt.SamplingError, match=r"every one of 10 logits is -inf"):
        fkt.Sampler().sample(np.full(10, -np.inf, dtype=np.float32))
    with pytest.raises(fkt.SamplingError, match=r"history\[1\] = 10 is outside the vocabulary \[0, 10\)"):
        fkt.Sampler(presence_penalty=0.5).sample(np.ones(10, dtype=np.float32), [2, 10])
