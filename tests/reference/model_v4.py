"""The DeepSeek-V4-Flash forward of the reference (model_type deepseek_v4), with the same ways to run as model.py:
`forward(state, ids)` runs every layer on new rows and appends them to `state`; one call over all tokens is the
full-sequence forward, a prompt then one token per call is prefill + decode, any split is chunked prefill.

Block (per-sublayer mHC): X ← site_attn(X): u = RMSNorm_attn(Σ pre_i X_i), y = Attn(u), X_j = post_j·y + Σ_i
comb[i][j]·X_i; then the FFN site likewise with the MoE. Head: logits = head · RMSNorm(hc_head(X)).
Attention: window rows (every layer) ∪ compressed entries -- the top-k of the lightning indexer on CSA layers,
every visible entry on HCA layers -- with the per-head sink; inverse RoPE; grouped output projection.
"""

from __future__ import annotations

import numpy as np

from .attention import attention_with_sink, output_projection
from .attention_v4 import (all_visible, index_queries_v4, index_scores_v4, index_weights_v4, query_path_v4,
                           window_row_v4)
from .compressor_v4 import CompressorStateV4, CompressorWeights, compress_v4
from .config_v4 import ConfigV4, LayerRoleV4, layer_plan_v4
from .dumps import Dump
from .indexer import visible_entries
from .mhc_v4 import hc_head, hc_site
from .model import CallContext, Generation, ModelError, checked_ids, greedy_decode
from .moe_v4 import moe_v4
from .numerics_v4 import NumericsV4, hadamard
from .ops import linear, rms_norm
from .rope import make_ropes
from .state_v4 import SequenceStateV4
from .topk import top_k
from .weights_v4 import check_weights_v4
from .window import WindowRing, window_mask

MXFP4_BLOCK = 32


class ModelV4:
    """A deepseek_v4 config, its weights and a numerics mode ('clean' | 'faithful'). Immutable."""

    def __init__(self, config: ConfigV4, weights: dict[str, np.ndarray], numerics: str = "clean") -> None:
        check_weights_v4(config, weights)
        self.config = config
        self.plan: list[LayerRoleV4] = layer_plan_v4(config)
        self.numerics = NumericsV4(numerics, config.qk_rope_head_dim)
        if self.numerics.faithful:
            _check_quantizer_widths(config)
        self.weights = {name: np.asarray(value, dtype=np.float64) for name, value in weights.items()}
        self.ropes = make_ropes(config, self.numerics)
        self.compressor_weights = {}
        for role in self.plan:
            if role.kind != "swa":
                self.compressor_weights[role.index, "kv"] = CompressorWeights.at(
                    self.weights, f"layers.{role.index}.attn.compressor.")
            if role.kind == "csa":
                self.compressor_weights[role.index, "index"] = CompressorWeights.at(
                    self.weights, f"layers.{role.index}.attn.indexer.compressor.")

    # -----------------------------------------------------------------------------------------------------
    # Ways to run

    def new_state(self) -> SequenceStateV4:
        c = self.config
        widths = {"kv": c.head_dim, "index": c.index_head_dim}
        compressors = {}
        for (layer, name) in self.compressor_weights:
            coff = 2 if self.plan[layer].overlapping else 1
            compressors[layer, name] = CompressorStateV4.empty(coff * widths[name])
        compressed = [r.index for r in self.plan if r.kind != "swa"]
        return SequenceStateV4(
            length=0,
            tokens=[],
            windows={r.index: WindowRing(c.sliding_window, c.head_dim) for r in self.plan},
            entries={layer: np.zeros((0, c.head_dim)) for layer in compressed},
            index_keys={r.index: np.zeros((0, c.index_head_dim)) for r in self.plan if r.kind == "csa"},
            compressors=compressors,
        )

    def forward(self, state: SequenceStateV4, token_ids, dump: Dump | None = None) -> np.ndarray:
        """Runs all layers on the new rows `token_ids` and appends them to `state`; logits of every row [n, V]."""
        ids = checked_ids(token_ids, self.config.vocab_size)
        ctx = CallContext(state.length + np.arange(ids.shape[0]), dump=dump)
        x0 = self.numerics.bf16(self.weights["embed.weight"][ids])
        streams = np.repeat(x0[:, None, :], self.config.hc_mult, axis=1)
        if dump is not None:
            dump.put("positions", ctx.positions)
            dump.put("embed", x0)
        for role in self.plan:
            streams = self._block(role, streams, ids, state, ctx)
        logits = self._head(streams, ctx)
        state.length += ids.shape[0]
        state.tokens += [int(t) for t in ids]
        return logits

    def generate(self, prompt, max_new_tokens: int, prefill: str = "exact") -> Generation:
        """Greedy decoding (argmax, lowest token id among equals) after a full prefill."""
        if prefill != "exact":
            raise ModelError(f"{self.config.source}: prefill mode {prefill!r}: deepseek_v4 has only 'exact'")
        state = self.new_state()
        return greedy_decode(self.forward, state, self.forward(state, prompt)[-1], max_new_tokens)

    # -----------------------------------------------------------------------------------------------------
    # Block and head

    def _block(self, role: LayerRoleV4, streams, ids, state: SequenceStateV4, ctx: CallContext):
        layer, p = role.index, f"layers.{role.index}."
        w, num, c = self.weights, self.numerics, self.config

        def attention(collapsed):
            u = num.bf16(rms_norm(collapsed, w[p + "attn_norm.weight"], c.rms_norm_eps))
            ctx.record(layer, "attn_input", u)
            return self._attention(role, u, state, ctx), None

        def ffn(collapsed):
            v = num.bf16(rms_norm(collapsed, w[p + "ffn_norm.weight"], c.rms_norm_eps))
            return moe_v4(v, ids, role, w, c, num)

        streams, _ = hc_site(streams, w[p + "hc_attn_fn"], w[p + "hc_attn_base"], w[p + "hc_attn_scale"],
                             attention, c, num)
        streams, routing = hc_site(streams, w[p + "hc_ffn_fn"], w[p + "hc_ffn_base"], w[p + "hc_ffn_scale"], ffn,
                                   c, num)
        ctx.record(layer, "experts", routing["experts"])
        ctx.record(layer, "routing", routing["routing"])
        ctx.record(layer, "streams", streams)
        return streams

    def _head(self, streams, ctx: CallContext):
        w, num = self.weights, self.numerics
        collapsed = hc_head(streams, w["hc_head_fn"], w["hc_head_base"], w["hc_head_scale"], self.config, num)
        hidden = num.bf16(rms_norm(collapsed, w["norm.weight"], self.config.rms_norm_eps))
        logits = num.fp32(linear(hidden, w["head.weight"]))
        if ctx.dump is not None:
            ctx.dump.put("final_hidden", hidden)
            ctx.dump.put("logits", logits)
        return logits

    # -----------------------------------------------------------------------------------------------------
    # Attention sublayer

    def _attention(self, role: LayerRoleV4, u, state: SequenceStateV4, ctx: CallContext):
        """Own q and window row; compressed layers publish their new entries, then CSA selects the indexer's
        top-k and HCA takes every visible entry; attention with sink; output projection."""
        layer, p = role.index, f"layers.{role.index}."
        c, num, rope = self.config, self.numerics, self.ropes[role.rope]
        cq, q = query_path_v4(u, ctx.positions, self.weights, p, c, rope, num)
        row = window_row_v4(u, ctx.positions, self.weights, p, c, rope, num)
        keys, key_positions = state.windows[layer].keys_with(row, ctx.positions)
        visible = window_mask(ctx.positions, key_positions, c.sliding_window)
        entries = selection = None
        if role.kind != "swa":
            latents = self._compress(role, "kv", u, state, ctx)
            state.entries[layer] = np.concatenate([state.entries[layer], num.kv_row(latents)])
            entries = state.entries[layer]
            n_visible = visible_entries(ctx.positions, role.ratio)
            if role.kind == "csa":
                selection = self._select(role, u, cq, state, ctx, n_visible)
                ctx.record(layer, "topk", selection)
            else:  # not "topk": compare.py would judge it against the nearest layer's index scores
                selection = all_visible(n_visible, entries.shape[0])
                ctx.record(layer, "selection", selection)
            ctx.record(layer, "entries", entries)
        o = attention_with_sink(q, keys, visible, entries, selection, self.weights[p + "attn.attn_sink"], num)
        y = output_projection(o, ctx.positions, self.weights, p, c, rope, num)
        state.windows[layer].append(row, ctx.positions)
        ctx.record(layer, "window_row", row)
        ctx.record(layer, "attn_output", y)
        return y

    def _compress(self, role: LayerRoleV4, name: str, u, state: SequenceStateV4, ctx: CallContext):
        """Runs compressor `name` ('kv' or 'index') of the layer over the call's rows; returns its new latents."""
        key = (role.index, name)
        latents, _, state.compressors[key] = compress_v4(
            u, ctx.positions, state.compressors[key], self.compressor_weights[key], role.ratio,
            role.overlapping or name == "index", self.config.rms_norm_eps, self.ropes[role.rope], self.numerics)
        return latents

    def _select(self, role: LayerRoleV4, u, cq, state: SequenceStateV4, ctx: CallContext, n_visible):
        """The lightning indexer: its compressor's new keys join the layer's index keys; scores over the visible
        ones; top index_topk (lowest index among equals), ascending, −1 padded."""
        layer, p = role.index, f"layers.{role.index}."
        c, num = self.config, self.numerics
        keys = num.index_vector(self._compress(role, "index", u, state, ctx))
        state.index_keys[layer] = np.concatenate([state.index_keys[layer], keys])
        queries = index_queries_v4(cq, ctx.positions, self.weights, p, c, self.ropes[role.rope], num)
        scores = index_scores_v4(queries, index_weights_v4(u, self.weights, p, c, num), state.index_keys[layer],
                                 n_visible, num)
        ctx.record(layer, "index_scores", scores)
        ctx.record(layer, "index_keys", state.index_keys[layer])
        return top_k(scores, c.index_topk)

def _check_quantizer_widths(config: ConfigV4) -> None:
    """Faithful mode's index keys and queries need a power-of-two index head (Hadamard) in blocks of 32. The V4 KV
    storage takes any non-RoPE width: a partial last FP8 group has its own scale, as in the engine's record."""
    if config.index_head_dim % MXFP4_BLOCK:
        raise ModelError(f"{config.source}: faithful numerics: index_head_dim {config.index_head_dim} is not a "
                         f"multiple of the MXFP4 block {MXFP4_BLOCK}")
    try:
        hadamard(config.index_head_dim)
    except ValueError as error:
        raise ModelError(f"{config.source}: faithful numerics: index_head_dim: {error}") from error
