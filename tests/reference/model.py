"""The DeepSeek-V4.1 forward of the reference (MODEL.md §3, §5.6, §8).

`Model.forward(state, ids)` runs every layer on new rows and appends them to `state` (§8.3 exact semantics): one
call over all tokens is the full-sequence forward; a prompt then one token per call is prefill + decode; any split
into chunks is chunked prefill. `prefill_ced` and `replay_prefix` are the two deployment approximations of §8.4.
With `index_key_quirk=True` index scoring follows the official code's shared index-key slot (§8.5).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .attention import attention_with_sink, output_projection, query_path, window_row
from .compressor import compress
from .config import Config, LayerRole, layer_plan
from .dumps import Dump
from .engram import engram_layouts, engram_update, hash_rows, ngram_ids, token_map
from .indexer import candidate_pool, index_queries, index_scores, index_weights, restrict_to_pool, visible_entries
from .mhc import collapse, expand, hc_mixer
from .moe import moe
from .numerics import Numerics
from .ops import linear, rms_norm
from .rope import make_ropes
from .state import SequenceState
from .topk import top_k
from .weights import check_weights
from .window import WindowRing, window_mask


class ModelError(ValueError):
    """A request the reference cannot serve (a token outside the vocabulary, CED on a config without a split …)."""


def checked_ids(token_ids, vocab_size: int) -> np.ndarray:
    """token_ids as int64 [n]; ModelError for an empty sequence or an id outside [0, vocab_size)."""
    ids = np.asarray(list(token_ids), dtype=np.int64)
    if ids.ndim != 1 or ids.shape[0] == 0:
        raise ModelError("token ids must be a non-empty sequence")
    bad = ids[(ids < 0) | (ids >= vocab_size)]
    if bad.size:
        raise ModelError(f"token id {int(bad[0])} is outside the vocabulary [0, {vocab_size})")
    return ids


@dataclass
class CallContext:
    """Transient per-call values shared between layers: row positions, top-k selections of the index sources
    (Reuse layers read them), the candidate pool of this call's rows, the dump."""

    positions: np.ndarray
    selections: dict[int, np.ndarray] = field(default_factory=dict)
    pool: np.ndarray | None = None
    dump: Dump | None = None

    def record(self, layer: int, name: str, array: np.ndarray) -> None:
        if self.dump is not None:
            self.dump.layer(layer, name, array)


@dataclass
class Generation:
    """Greedy generation: the tokens, the logits the last token was chosen from, and the prefill's last logits."""

    tokens: list[int]
    logits_last: np.ndarray
    prefill_logits_last: np.ndarray
    state: SequenceState


def greedy_decode(forward, state, prefill_logits: np.ndarray, max_new_tokens: int) -> Generation:
    """Greedy steps after a prefill whose last logits are `prefill_logits`: argmax (lowest id among equals), then
    `forward(state, [token])` for every token but the last."""
    logits = prefill_logits
    tokens: list[int] = []
    for step in range(max_new_tokens):
        tokens.append(int(np.argmax(logits)))
        if step + 1 < max_new_tokens:
            logits = forward(state, [tokens[-1]])[-1]
    return Generation(tokens, logits, prefill_logits, state)


class Model:
    """A config, its weights and a numerics mode. Immutable; the per-sequence state lives in SequenceState."""

    def __init__(self, config: Config, weights: dict[str, np.ndarray], numerics: str = "clean",
                 index_key_quirk: bool = False, engram_token_map: np.ndarray | None = None) -> None:
        check_weights(config, weights)
        self.config = config
        self.plan: list[LayerRole] = layer_plan(config)
        self.numerics = Numerics(numerics)
        self.weights = {name: np.asarray(value, dtype=np.float64) for name, value in weights.items()}
        self.ropes = make_ropes(config, self.numerics)
        self.engram = engram_layouts(config)
        self.token_map = token_map(config, engram_token_map) if self.engram else None
        self.index_key_quirk = index_key_quirk
        self.owner_ratio = {role.index: role.ratio for role in self.plan if role.is_kv_source}
        self.engram_weights = {layer: {name.removeprefix(f"layers.{layer}."): value
                                       for name, value in self.weights.items()
                                       if name.startswith(f"layers.{layer}.engram.")} for layer in self.engram}

    # -----------------------------------------------------------------------------------------------------
    # Ways to run

    def new_state(self) -> SequenceState:
        c = self.config
        history = np.zeros(max(c.engram_max_ngram_size - 1, 0), dtype=np.int64)
        if self.engram:
            history[:] = self.token_map[c.engram_pad_token_id]
        return SequenceState(
            length=0,
            tokens=[],
            windows={r.index: WindowRing(c.sliding_window, c.head_dim) for r in self.plan},
            entries={o: np.zeros((0, c.head_dim)) for o in self.owner_ratio},
            index_keys={o: np.zeros((0, c.index_head_dim)) for o in self.owner_ratio},
            pending={o: None for o, r in self.owner_ratio.items() if r > 1},
            engram_history=history,
            owner_ratio=dict(self.owner_ratio),
        )

    def forward(self, state: SequenceState, token_ids, dump: Dump | None = None) -> np.ndarray:
        """Runs all layers on the new rows `token_ids` (exact semantics, §8.3) and appends them to `state`.
        Returns the logits of every new row [n, vocab]."""
        ids = self._checked_ids(token_ids)
        positions = state.length + np.arange(ids.shape[0])
        ctx = CallContext(positions, dump=dump)
        streams, pre = self._embed(ids, ctx)
        ngrams = self._ngrams(state, ids)
        streams, pre = self._run_blocks(range(self.config.num_hidden_layers), streams, pre, state, ctx, ngrams)
        logits = self._head(streams, pre, ctx)
        self._advance(state, ids)
        return logits

    def prefill_ced(self, token_ids, dump: Dump | None = None) -> tuple[SequenceState, np.ndarray]:
        """§8.4 CED prefill of a prompt into a fresh state: the encoder (layers before the candidate source) on all
        rows; the candidate source's collapse + norm + compressor on all rows (publishing the decoder's global KV);
        the decoder layers only on the last W rows, whose SWA reads are thereby floored at P−W. Returns the state
        and the logits of the last row [1, vocab]."""
        c = self.config
        boundary = c.candidate_source_layer_id
        if boundary < 0:
            raise ModelError(f"{c.source}: CED prefill needs a candidate source layer (the encoder/decoder split)")
        late_owners = [o for o in self.owner_ratio if o > boundary]
        if late_owners:
            raise ModelError(f"{c.source}: CED prefill: KV sources {late_owners} lie inside the decoder")
        ids = self._checked_ids(token_ids)
        state = self.new_state()
        positions = np.arange(ids.shape[0])
        ctx = CallContext(positions, dump=dump)
        streams, pre = self._embed(ids, ctx)
        ngrams = self._ngrams(state, ids)
        streams, pre = self._run_blocks(range(boundary), streams, pre, state, ctx, ngrams)
        role = self.plan[boundary]
        source_streams = self._engram(role, streams, ngrams, CallContext(positions))
        self._publish(role, self._attention_input(role, source_streams, pre), state, CallContext(positions))
        tail = slice(max(0, ids.shape[0] - c.sliding_window), None)
        decoder_ctx = CallContext(positions[tail], dump=dump)
        if dump is not None:
            dump.put("decoder_positions", positions[tail])
        streams, pre = self._run_blocks(range(boundary, c.num_hidden_layers), streams[tail], pre[tail], state,
                                        decoder_ctx, ngrams[tail] if ngrams is not None else None)
        logits = self._head(streams[-1:], pre[-1:], decoder_ctx)
        self._advance(state, ids)
        return state, logits

    def replay_prefix(self, cached: SequenceState, token_ids, dump: Dump | None = None) -> SequenceState:
        """§8.4 SWA bounded replay after a prefix-cache hit on the C tokens `token_ids`: start from the global KV of
        `cached` (entries and index keys published by C; no rings, no pending state), recompute the tokens
        [max(0, C−W), C) through every layer with SWA reads restricted to that segment (the rings start empty),
        rebuilding the rings and -- for an odd C -- the ratio-2 pending state. Returned state continues at C."""
        ids = self._checked_ids(token_ids)
        count = ids.shape[0]
        for owner, ratio in self.owner_ratio.items():
            if cached.entries[owner].shape[0] < count // ratio:
                raise ModelError(f"prefix cache holds {cached.entries[owner].shape[0]} entries of layer {owner}, "
                                 f"fewer than the {count // ratio} a {count}-token prefix publishes")
        state = cached.global_only(count)
        state.engram_history = self.new_state().engram_history
        start = max(0, count - self.config.sliding_window)
        self._advance(state, ids[:start])  # the Engram history: the ids before the replay start
        self.forward(state, ids[start:], dump=dump)
        return state

    def generate(self, prompt, max_new_tokens: int, prefill: str = "exact") -> Generation:
        """Greedy decoding (argmax, lowest token id among equals) after an exact or CED prefill."""
        if prefill == "exact":
            state = self.new_state()
            logits = self.forward(state, prompt)[-1]
        elif prefill == "ced":
            state, logits = self.prefill_ced(prompt)
            logits = logits[-1]
        else:
            raise ModelError(f"prefill mode {prefill!r} is not 'exact' or 'ced'")
        return greedy_decode(self.forward, state, logits, max_new_tokens)

    # -----------------------------------------------------------------------------------------------------
    # The block (§3)

    def _run_blocks(self, layers, streams, pre, state, ctx, ngrams):
        for layer in layers:
            streams, pre = self._block(self.plan[layer], streams, pre, state, ctx, ngrams)
        return streams, pre

    def _block(self, role: LayerRole, streams, pre, state, ctx, ngrams):
        """§3 step 2: Engram; attention site; FFN site. The attention input collapses with the carried `pre`
        (the previous block's FFN-site pre); the FFN input with this block's attention-site pre."""
        layer, p = role.index, f"layers.{role.index}."
        w, num, c = self.weights, self.numerics, self.config
        streams = self._engram(role, streams, ngrams, ctx)
        a_pre, a_post, a_comb = hc_mixer(streams, w[p + "hc_attn_fn"], w[p + "hc_attn_base"], w[p + "hc_attn_scale"],
                                         c, num)
        u = self._attention_input(role, streams, pre)
        y = self._attention(role, u, state, ctx)
        streams = expand(y, streams, a_post, a_comb, num)
        f_pre, f_post, f_comb = hc_mixer(streams, w[p + "hc_ffn_fn"], w[p + "hc_ffn_base"], w[p + "hc_ffn_scale"],
                                         c, num)
        v = num.bf16(rms_norm(collapse(streams, a_pre, num), w[p + "ffn_norm.weight"], c.rms_norm_eps))
        z, routing = moe(v, w, p, c, num)
        streams = expand(z, streams, f_post, f_comb, num)
        ctx.record(layer, "attn_input", u)
        ctx.record(layer, "attn_output", y)
        ctx.record(layer, "experts", routing["experts"])
        ctx.record(layer, "routing", routing["routing"])
        ctx.record(layer, "ffn_output", z)
        ctx.record(layer, "streams", streams)
        return streams, f_pre

    def _attention_input(self, role: LayerRole, streams, pre):
        """u = RMSNorm_attn(Σ_i p_i X_i)."""
        w = self.weights[f"layers.{role.index}.attn_norm.weight"]
        return self.numerics.bf16(rms_norm(collapse(streams, pre, self.numerics), w, self.config.rms_norm_eps))

    def _engram(self, role: LayerRole, streams, ngrams, ctx):
        if role.engram_slot < 0:
            return streams
        rows = hash_rows(ngrams, self.engram[role.index], self.config.engram_n_heads)
        streams = engram_update(streams, rows, self.engram_weights[role.index], self.config, self.numerics)
        ctx.record(role.index, "engram_rows", rows)
        ctx.record(role.index, "engram_streams", streams)
        return streams

    # -----------------------------------------------------------------------------------------------------
    # Attention sublayer (§5)

    def _attention(self, role: LayerRole, u, state: SequenceState, ctx: CallContext):
        """§5.6: own q, window row, (publish), (score + select), attention over window ∪ selected, output."""
        layer, p = role.index, f"layers.{role.index}."
        c, num, rope = self.config, self.numerics, self.ropes[role.rope]
        cq, q = query_path(u, ctx.positions, self.weights, p, c, rope, num)
        row = window_row(u, ctx.positions, self.weights, p, c, rope, num)
        keys, key_positions = state.windows[layer].keys_with(row, ctx.positions)
        visible = window_mask(ctx.positions, key_positions, c.sliding_window)
        entries = selection = None
        if role.ratio:
            if role.is_kv_source:
                self._publish(role, u, state, ctx)
            if role.is_index_source:
                ctx.selections[layer] = self._select(role, u, cq, state, ctx)
            selection = ctx.selections[role.topk_source]
            entries = state.entries[role.kv_owner]
            ctx.record(layer, "topk", selection)
        o = attention_with_sink(q, keys, visible, entries, selection, self.weights[p + "attn.attn_sink"], num)
        y = output_projection(o, ctx.positions, self.weights, p, c, rope, num)
        state.windows[layer].append(row, ctx.positions)
        ctx.record(layer, "window_row", row)
        return y

    def _publish(self, role: LayerRole, u, state: SequenceState, ctx: CallContext) -> None:
        """§5.3: the owner's compressor over the call's rows; new entries and index keys join its caches."""
        layer = role.index
        published, pending = compress(u, ctx.positions, state.pending.get(layer), state.entries[layer].shape[0],
                                      self.weights, f"layers.{layer}.", role.ratio, self.config,
                                      self.ropes[role.rope], self.numerics)
        state.entries[layer] = np.concatenate([state.entries[layer], published.entries])
        state.index_keys[layer] = np.concatenate([state.index_keys[layer], published.index_keys])
        if role.ratio > 1:
            state.pending[layer] = pending
        if published.entries.shape[0]:
            state.published_index_keys = layer
        ctx.record(layer, "entries", state.entries[layer])
        ctx.record(layer, "index_keys", state.index_keys[layer])

    def _select(self, role: LayerRole, u, cq, state: SequenceState, ctx: CallContext) -> np.ndarray:
        """§5.5: scores over visible entries of the owner's keys; the candidate source builds the pool from them;
        index sources after it restrict to the pool; top-k (lowest index among equals), ascending, −1 padded."""
        layer, p = role.index, f"layers.{role.index}."
        c, num = self.config, self.numerics
        n_visible = visible_entries(ctx.positions, role.ratio)
        keys = self._scoring_keys(role, state, n_visible)
        queries = index_queries(cq, ctx.positions, self.weights, p, c, self.ropes[role.rope], num)
        scores = index_scores(queries, index_weights(u, self.weights, p, c, num), keys, n_visible, num)
        if role.is_candidate_source:
            ctx.pool = candidate_pool(scores, n_visible, c.candidate_block_size, c.candidate_topk_blocks)
            ctx.record(layer, "pool", ctx.pool)
        if role.pool_source >= 0:
            scores = restrict_to_pool(scores, ctx.pool)
        ctx.record(layer, "index_scores", scores)
        return top_k(scores, c.index_topk)

    def _scoring_keys(self, role: LayerRole, state: SequenceState, n_visible) -> np.ndarray:
        """The owner's index keys -- or, with the §8.5 quirk, those of whichever owner published last (the
        official shared slot), cut or padded to the owner's entry count (rows past n_visible score −∞)."""
        width = state.entries[role.kv_owner].shape[0]
        source = role.kv_owner
        if self.index_key_quirk and state.published_index_keys >= 0:
            source = state.published_index_keys
        keys = state.index_keys[source]
        needed = int(np.max(n_visible)) if len(n_visible) else 0
        if keys.shape[0] < needed:
            raise ModelError(f"layer {role.index}: index keys of layer {source} hold {keys.shape[0]} rows, "
                             f"{needed} visible")
        out = np.zeros((width, keys.shape[1]))
        take = min(width, keys.shape[0])
        out[:take] = keys[:take]
        return out

    # -----------------------------------------------------------------------------------------------------
    # Embedding, head, bookkeeping

    def _checked_ids(self, token_ids) -> np.ndarray:
        return checked_ids(token_ids, self.config.vocab_size)

    def _embed(self, ids, ctx):
        """§3 step 1: x0 = embed[token]; X_i = x0 for every stream; carried pre = (1, 0, …, 0)."""
        x0 = self.numerics.bf16(self.weights["embed.weight"][ids])
        streams = np.repeat(x0[:, None, :], self.config.hc_mult, axis=1)
        pre = np.zeros((ids.shape[0], self.config.hc_mult))
        pre[:, 0] = 1.0
        if ctx.dump is not None:
            ctx.dump.put("positions", ctx.positions)
            ctx.dump.put("embed", x0)
        return streams, pre

    def _head(self, streams, pre, ctx):
        """§3 step 3: logits = head · RMSNorm_final(Σ_i p_i X_i) in fp32 (p = the last block's FFN-site pre)."""
        num = self.numerics
        hidden = num.bf16(rms_norm(collapse(streams, pre, num), self.weights["norm.weight"], self.config.rms_norm_eps))
        logits = num.fp32(linear(hidden, self.weights["head.weight"]))
        if ctx.dump is not None:
            ctx.dump.put("final_hidden", hidden)
            ctx.dump.put("logits", logits)
        return logits

    def _ngrams(self, state: SequenceState, ids):
        if not self.engram:
            return None
        return ngram_ids(state.engram_history, self.token_map[ids], self.config.engram_max_ngram_size)

    def _advance(self, state: SequenceState, ids) -> None:
        """Appends `ids` to the state's timeline (length, tokens, Engram history)."""
        state.length += ids.shape[0]
        state.tokens += [int(t) for t in ids]
        if self.engram and ids.shape[0]:
            lead = self.config.engram_max_ngram_size - 1
            joined = np.concatenate([state.engram_history, self.token_map[ids]])
            state.engram_history = joined[joined.shape[0] - lead :]
