"""Single mechanisms of the numpy reference against independent hand computations from MODEL.md.

Each test draws fresh random inputs (seed from os.urandom, printed on failure) and checks a law the spec states
(Sinkhorn doubly stochastic, RoPE an isometry, visibility counts, the pool's forced block, …) or recomputes one
element with plain Python loops written from the spec text -- never by calling the function under test twice.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pytest

from reference.attention import attention_with_sink, output_projection
from reference.compressor import Pending, compress
from reference.config import RopeScaling
from reference.indexer import candidate_pool, index_scores, visible_entries
from reference.mhc import collapse, expand, hc_mixer, sinkhorn
from reference.moe import expert_ffn, route
from reference.numerics import Numerics
from reference.presets import preset
from reference.rope import Rope, make_ropes, rope_frequencies, yarn_low_high
from reference.topk import top_k, topk_row_equivalent
from reference.window import WindowRing, window_mask

CLEAN = Numerics("clean")


@pytest.fixture
def rng():
    seed = int.from_bytes(os.urandom(4), "little")
    print(f"seed {seed}")  # shown by pytest when the test fails
    return np.random.default_rng(seed)


# --- mHC (§4) ---------------------------------------------------------------------------------------------------


def test_sinkhorn_is_doubly_stochastic(rng):
    # logits of the size the mixer produces (|z| ~ 0.5); 20 rounds end on a column step, so columns are exact
    m = sinkhorn(rng.normal(0, 0.5, (200, 4, 4)), 20, 1e-6)
    assert np.all(m > 0)
    assert np.allclose(m.sum(axis=-1), 1, atol=1e-3)
    assert np.allclose(m.sum(axis=-2), 1, atol=1e-5)


def test_sinkhorn_first_step_is_a_row_softmax_then_a_column_normalization(rng):
    logits = rng.normal(0, 1, (3, 3))
    one = sinkhorn(logits[None], 1, 1e-6)[0]
    by_hand = np.empty((3, 3))
    for i in range(3):
        row = [math.exp(v) for v in logits[i]]
        by_hand[i] = [r / sum(row) + 1e-6 for r in row]
    by_hand /= by_hand.sum(axis=0, keepdims=True) + 1e-6
    assert np.allclose(one, by_hand, rtol=1e-12)


def test_expand_routes_input_stream_i_to_output_stream_j_through_comb_i_j(rng):
    hc, d = 4, 8
    streams = rng.normal(0, 1, (1, hc, d))
    perm = rng.permutation(hc)  # comb[i][perm[i]] = 1: input i goes to output perm[i]
    comb = np.zeros((1, hc, hc))
    comb[0, np.arange(hc), perm] = 1.0
    out = expand(np.zeros((1, d)), streams, np.zeros((1, hc)), comb, CLEAN)
    for i in range(hc):
        assert np.array_equal(out[0, perm[i]], streams[0, i])
    y, post = rng.normal(0, 1, (1, d)), rng.uniform(0, 2, (1, hc))
    out = expand(y, streams, post, comb, CLEAN)
    assert np.allclose(out[0, perm[0]], post[0, perm[0]] * y[0] + streams[0, 0])


def test_hc_mixer_matches_a_per_token_loop_from_the_spec(rng):
    config = preset("tiny")
    hc, d = config.hc_mult, config.hidden_size
    streams = rng.normal(0, 1, (3, hc, d))
    fn, base, scale = rng.normal(0, 0.02, (24, hc * d)), rng.normal(0, 0.1, 24), rng.uniform(0.5, 1.5, 3)
    pre, post, comb = hc_mixer(streams, fn, base, scale, config, CLEAN)
    for t in range(3):
        f = streams[t].reshape(-1)
        rms = math.sqrt(sum(v * v for v in f) / f.size + config.rms_norm_eps)
        z = [base[r] + sum(fn[r, c] * f[c] for c in range(f.size)) / rms * scale[0 if r < 4 else 1 if r < 8 else 2]
             for r in range(24)]
        assert np.allclose(pre[t], [1 / (1 + math.exp(-v)) + 1e-6 for v in z[:4]], rtol=1e-12)
        assert np.allclose(post[t], [2 / (1 + math.exp(-v)) for v in z[4:8]], rtol=1e-12)
        assert np.allclose(comb[t], sinkhorn(np.array(z[8:]).reshape(1, 4, 4), 20, 1e-6)[0], rtol=1e-12)
    assert np.allclose(collapse(streams, pre, CLEAN)[1], sum(pre[1, i] * streams[1, i] for i in range(hc)))


# --- RoPE and YaRN (§2.3, §5.8) -------------------------------------------------------------------------------


def test_yarn_bounds_of_the_official_and_tiny_configs():
    assert yarn_low_high(64, 160000.0, RopeScaling(16, 65536, 32, 1)) == (15, 25)
    assert yarn_low_high(16, 160000.0, RopeScaling(4, 64, 32, 1)) == (0, 2)


def test_yarn_keeps_fast_frequencies_and_divides_slow_ones_by_the_factor():
    freqs = rope_frequencies(64, 160000.0, RopeScaling(16, 65536, 32, 1), CLEAN)
    base = np.array([160000.0 ** (-2 * i / 64) for i in range(32)])
    assert np.allclose(freqs[:16], base[:16], rtol=1e-15)  # i <= low = 15: ramp 0
    assert np.allclose(freqs[25:], base[25:] / 16, rtol=1e-15)  # i >= high = 25: ramp 1
    ramp = (20 - 15) / (25 - 15)
    assert freqs[20] == pytest.approx(base[20] * (1 - ramp) + base[20] / 16 * ramp, rel=1e-14)


def test_rope_rotates_the_last_channels_in_adjacent_pairs(rng):
    rope = make_ropes(preset("tiny"), CLEAN)["compress"]
    x = rng.normal(0, 1, (1, 64))
    s = int(rng.integers(0, 5000))
    out = rope.apply(x, np.array([s]))
    assert np.array_equal(out[0, :48], x[0, :48])  # only the last qk_rope_head_dim = 16 channels move
    for i in range(8):
        angle = s * rope.freqs[i]
        z = complex(x[0, 48 + 2 * i], x[0, 49 + 2 * i]) * complex(math.cos(angle), math.sin(angle))
        assert out[0, 48 + 2 * i] == pytest.approx(z.real, abs=1e-12)
        assert out[0, 49 + 2 * i] == pytest.approx(z.imag, abs=1e-12)


def test_rope_is_an_isometry_inverted_by_the_negative_angle_and_relative(rng):
    rope = Rope(16, rope_frequencies(16, 10000.0, None, CLEAN), CLEAN)
    x = rng.normal(0, 1, (5, 3, 32))
    positions = rng.integers(0, 100000, 5)
    rotated = rope.apply(x, positions)
    assert np.allclose(np.linalg.norm(rotated, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-12)
    assert np.allclose(rope.apply(rotated, positions, inverse=True), x, atol=1e-12)
    a, b, shift = x[:1, 0], x[1:2, 0], int(rng.integers(1, 1000))
    dot = lambda s, t: float(np.dot(rope.apply(a, np.array([s]))[0], rope.apply(b, np.array([t]))[0]))  # noqa: E731
    assert dot(7, 3) == pytest.approx(dot(7 + shift, 3 + shift), abs=1e-9)


# --- Top-k and tie-aware comparison (§5.5) --------------------------------------------------------------------


def test_top_k_with_engineered_ties_picks_the_lowest_indices(rng):
    scores = np.array([[1.0, 5.0, 3.0, 5.0, 3.0, 3.0, -np.inf, 3.0]])
    assert top_k(scores, 4).tolist() == [[1, 2, 3, 4]]  # 5, 5, then the two lowest-index 3s
    assert top_k(scores, 8).tolist() == [[0, 1, 2, 3, 4, 5, 7, -1]]  # −∞ becomes −1, after the valid ones
    assert top_k(np.full((1, 3), -np.inf), 2).tolist() == [[-1, -1]]
    values = rng.permutation(40).astype(float)[None]
    chosen = top_k(values, 10)[0]
    assert sorted(chosen) == list(chosen)
    assert set(chosen) == set(np.flatnonzero(values[0] >= 30))


def test_tie_aware_comparison_accepts_only_choices_among_the_kth_ties():
    scores = np.array([9.0, 3.0, 7.0, 3.0, 3.0, 1.0])
    assert topk_row_equivalent(scores, [0, 1, 2], [0, 2, 4], 3)  # differ among the tied 3s
    assert not topk_row_equivalent(scores, [0, 1, 2], [0, 1, 3], 3)  # drops 7, which beats the k-th score
    assert not topk_row_equivalent(scores, [0, 1, 2], [0, 2, 5], 3)  # 1 is below the k-th score
    assert not topk_row_equivalent(scores, [0, 1, 2], [0, 2], 3)


# --- Visibility, pool, indexer scores (§5.4, §5.5) -------------------------------------------------------------


def test_visibility_counts():
    assert visible_entries(np.arange(6), 2).tolist() == [0, 1, 1, 2, 2, 3]  # entry j needs token 2j+1
    assert visible_entries(np.arange(4), 1).tolist() == [1, 2, 3, 4]  # ratio 1: the query's own token


def test_index_scores_match_the_weighted_relu_sum(rng):
    q, w, keys = rng.normal(0, 1, (2, 3, 8)), rng.normal(0, 1, (2, 3)), rng.normal(0, 1, (5, 8))
    scores = index_scores(q, w, keys, np.array([5, 2]), CLEAN)
    by_hand = sum(w[0, h] * max(0.0, float(np.dot(q[0, h], keys[4]))) for h in range(3))
    assert scores[0, 4] == pytest.approx(by_hand, rel=1e-12)
    assert np.all(np.isneginf(scores[1, 2:])) and np.all(np.isfinite(scores[1, :2]))


def test_candidate_pool_forces_the_newest_block_and_keeps_the_best_blocks(rng):
    block, kept = 4, 2
    scores = rng.normal(0, 1, (1, 22))
    n_visible = np.array([18])
    scores[0, 18:] = -np.inf
    scores[0, 16:18] = -100.0  # the newest visible block (entries 16..19) scores lowest
    pool = candidate_pool(scores, n_visible, block, kept)[0]
    block_scores = [scores[0, b * 4 : b * 4 + 4].max() for b in range(4)]  # complete blocks 0..3
    best = int(np.argmax(block_scores))
    expected = np.zeros(22, dtype=bool)
    expected[16:18] = True  # forced, cut at visibility
    expected[best * 4 : best * 4 + 4] = True
    assert pool.tolist() == expected.tolist()
    assert not candidate_pool(np.full((1, 8), -np.inf), np.array([0]), 4, 2).any()  # nothing visible, no pool


# --- Window ring (§5.2) -----------------------------------------------------------------------------------------


def test_window_ring_serves_exactly_the_last_w_positions(rng):
    ring, size = WindowRing(4, 2), 4
    rows = rng.normal(0, 1, (11, 2))
    ring.append(rows[:7], np.arange(7))
    keys, key_positions = ring.keys_with(rows[7:], np.arange(7, 11))
    visible = window_mask(np.arange(7, 11), key_positions, size)
    for r, s in enumerate(range(7, 11)):
        assert sorted(key_positions[visible[r]].tolist()) == list(range(s - 3, s + 1))
        assert np.array_equal(keys[visible[r]][np.argsort(key_positions[visible[r]])], rows[s - 3 : s + 1])


# --- Compressor (§5.3) ------------------------------------------------------------------------------------------


def _compressor_weights(rng, config):
    d, hd = config.hidden_size, config.head_dim
    p = "layers.2."
    return {p + "attn.compressor.wkv.weight": rng.normal(0, 0.05, (hd, d)),
            p + "attn.compressor.wgate.weight": rng.normal(0, 0.5, (hd, d)),
            p + "attn.compressor.norm.weight": 1 + rng.normal(0, 0.1, hd),
            p + "attn.indexer.wk.weight": rng.normal(0, 0.1, (config.index_head_dim, hd)),
            p + "attn.indexer.k_norm.weight": 1 + rng.normal(0, 0.1, config.index_head_dim)}


def test_ratio_two_pools_each_channel_with_a_softmax_over_its_group(rng):
    config = preset("tiny")
    weights = _compressor_weights(rng, config)
    rope = make_ropes(config, CLEAN)["compress"]
    u = rng.normal(0, 1, (5, config.hidden_size))
    published, pending = compress(u, np.arange(5), None, 0, weights, "layers.2.", 2, config, rope, CLEAN)
    assert published.first == 0 and published.entries.shape[0] == 2 and pending.position == 4
    wkv, wg = weights["layers.2.attn.compressor.wkv.weight"], weights["layers.2.attn.compressor.wgate.weight"]
    c = 7
    v = [float(np.dot(wkv[c], u[t])) for t in (2, 3)]
    g = [float(np.dot(wg[c], u[t])) for t in (2, 3)]
    pooled_c = (math.exp(g[0]) * v[0] + math.exp(g[1]) * v[1]) / (math.exp(g[0]) + math.exp(g[1]))
    pooled = np.array([sum(math.exp(float(np.dot(wg[k], u[t]))) * float(np.dot(wkv[k], u[t])) for t in (2, 3))
                       / sum(math.exp(float(np.dot(wg[k], u[t]))) for t in (2, 3)) for k in range(config.head_dim)])
    assert pooled[c] == pytest.approx(pooled_c)
    norm = weights["layers.2.attn.compressor.norm.weight"]
    latent = norm * pooled / math.sqrt(float(np.mean(pooled**2)) + config.rms_norm_eps)
    assert np.allclose(published.latents[1], latent, rtol=1e-10)
    assert np.allclose(published.entries[1], rope.apply(latent[None], np.array([2]))[0], rtol=1e-10)


def test_odd_chunks_carry_the_pending_token_to_the_next_chunk(rng):
    config = preset("tiny")
    weights = _compressor_weights(rng, config)
    rope = make_ropes(config, CLEAN)["compress"]
    u = rng.normal(0, 1, (9, config.hidden_size))
    whole, _ = compress(u, np.arange(9), None, 0, weights, "layers.2.", 2, config, rope, CLEAN)
    first, pending = compress(u[:3], np.arange(3), None, 0, weights, "layers.2.", 2, config, rope, CLEAN)
    assert isinstance(pending, Pending) and pending.position == 2
    second, pending = compress(u[3:], np.arange(3, 9), pending, 1, weights, "layers.2.", 2, config, rope, CLEAN)
    assert second.first == 1 and pending.position == 8
    assert np.allclose(np.concatenate([first.entries, second.entries]), whole.entries, rtol=1e-12, atol=1e-15)
    assert np.allclose(np.concatenate([first.index_keys, second.index_keys]), whole.index_keys, rtol=1e-12,
                       atol=1e-15)
    with pytest.raises(ValueError, match="never seen"):
        compress(u[3:], np.arange(3, 9), None, 1, weights, "layers.2.", 2, config, rope, CLEAN)


# --- Attention core and output projection (§5.7, §5.8) --------------------------------------------------------


def test_attention_softmax_includes_the_sink_in_the_denominator_only(rng):
    q = rng.normal(0, 1, (1, 2, 4))
    keys = rng.normal(0, 1, (3, 4))
    entries = rng.normal(0, 1, (5, 4))
    sink = rng.normal(0, 1, 2)
    visible = np.array([[True, False, True]])
    selection = np.array([[4, -1, 1]])
    out = attention_with_sink(q, keys, visible, entries, selection, sink, CLEAN)
    for h in range(2):
        used = [keys[0], keys[2], entries[4], entries[1]]
        logits = [float(np.dot(q[0, h], k)) / 2.0 for k in used]
        denominator = sum(math.exp(v) for v in logits) + math.exp(sink[h])
        expected = sum(math.exp(v) / denominator * k for v, k in zip(logits, used))
        assert np.allclose(out[0, h], expected, rtol=1e-12)
    empty = attention_with_sink(q, keys, np.zeros((1, 3), bool), None, None, sink, CLEAN)
    assert np.array_equal(empty, np.zeros_like(empty))


def test_output_projection_groups_heads_by_consecutive_runs(rng):
    config = preset("tiny")  # 4 heads × 64, 2 groups, o_lora_rank 32
    wo_a, wo_b = rng.normal(0, 0.1, (64, 128)), rng.normal(0, 0.1, (256, 64))
    weights = {"layers.0.attn.wo_a.weight": wo_a, "layers.0.attn.wo_b.weight": wo_b}
    o = rng.normal(0, 1, (1, 4, 64))
    o[0, :, 48:] = 0.0  # zero RoPE channels: the inverse rotation leaves o unchanged
    y = output_projection(o, np.array([3]), weights, "layers.0.", config, make_ropes(config, CLEAN)["base"], CLEAN)
    a = [wo_a[g * 32 : (g + 1) * 32] @ np.concatenate([o[0, 2 * g], o[0, 2 * g + 1]]) for g in range(2)]
    assert np.allclose(y[0], wo_b @ np.concatenate(a), rtol=1e-12)


# --- MoE (§6) ----------------------------------------------------------------------------------------------------


def test_router_selects_on_biased_scores_but_weights_unbiased_ones(rng):
    config = preset("tiny")
    gate = rng.normal(0, 0.5, (8, config.hidden_size))
    v = rng.normal(0, 1, (1, config.hidden_size))
    sigma = np.sqrt(np.log1p(np.exp(gate @ v[0])))
    bias = np.zeros(8)
    bias[int(np.argmin(sigma))] = 100.0  # the weakest expert wins selection through its bias
    experts, routing = route(v, {"l.ffn.gate.weight": gate, "l.ffn.gate.bias": bias}, "l.", config, CLEAN)
    strongest = int(np.argmax(sigma))
    assert set(experts[0].tolist()) == {int(np.argmin(sigma)), strongest}
    assert routing[0].sum() == pytest.approx(1.5)
    weight_of = dict(zip(experts[0].tolist(), routing[0].tolist()))
    assert weight_of[strongest] == pytest.approx(1.5 * sigma[strongest] / (sigma[strongest] + sigma.min()))


def test_swiglu_clamps_gate_above_and_up_on_both_sides(rng):
    w1, w3, w2 = rng.normal(0, 1, (6, 4)), rng.normal(0, 1, (6, 4)), rng.normal(0, 1, (4, 6))
    v = rng.normal(0, 2, (1, 4))
    out = expert_ffn(v, w1, w3, w2, np.array([0.7]), 0.5, CLEAN)
    g, a = np.minimum(w1 @ v[0], 0.5), np.clip(w3 @ v[0], -0.5, 0.5)
    assert np.any(w1 @ v[0] > 0.5) or np.any(np.abs(w3 @ v[0]) > 0.5)  # the clamp fires on this draw
    assert np.allclose(out[0], w2 @ (0.7 * g / (1 + np.exp(-g)) * a), rtol=1e-12)
