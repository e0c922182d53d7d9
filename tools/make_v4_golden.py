#!/usr/bin/env python3
"""Golden data for DeepSeek-V4-Flash (model_type deepseek_v4) from HF transformers, the oracle no one here wrote.

Run (needs torch + transformers >= 5.24 with models/deepseek_v4; CPU, fp32, ~1 min):
    /tmp/hfenv/bin/python tools/make_v4_golden.py --out tests/data/golden/v4

For each tiny config below it builds a random DeepseekV4ForCausalLM in fp32, re-randomises every parameter that
transformers initialises to 0 or 1 (sinks, mHC base/scale, hc_head, compressor ape, router bias, tid2eid, norm
weights) so those paths are exercised, and writes <out>/<name>/:
  config.json        the RELEASED checkpoint's config format (compress_ratios, num_hash_layers, qk_rope_head_dim,
                     rope_scaling), what flashkv reads
  hf_config.json     the transformers config the oracle actually ran (layer_types, compress_rates, ...)
  model.safetensors  weights under the RELEASED tensor names (embed.weight, layers.L.attn.wq_a.weight, ...);
                     values are bf16-representable, stored BF16 (F32 where the release keeps F32), tid2eid I32
  golden.safetensors input_ids [T] i32; logits_full [T,V]; logits_incremental [T,V] (prefill of prefill_len
                     tokens, then one token per call through the HF cache); logits_chunked [T,V] (prefill in the
                     chunks of meta.json); hidden_streams [L,T,hc,D] (the mHC streams after each layer, full
                     forward); final_hidden [T,D] (after hc_head and the final norm)
  meta.json          seeds, prefill_len, chunks, versions, self-check deviations, top-k margins, clamp statistics

Self-checks (the script fails if one does not hold): HF full == HF incremental == HF chunked within 1e-5
relative; HF reloading the released-name file through its own conversion mapping reproduces the logits exactly;
every CSA top-k and router top-k choice has a margin >= MIN_MARGIN (a fresh prompt is drawn otherwise) so that an
fp32 engine cannot flip it; routed experts hit the SwiGLU clamp while the shared expert never does (transformers
clamps the shared expert, the official V4 code does not: the golden data holds under both readings).
"""
import argparse
import dataclasses
import json
import pathlib
import shutil
import sys
import tempfile

import numpy as np
import torch
import transformers
from safetensors.numpy import save_file
from safetensors.torch import save_file as save_torch_file
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as hf_v4

MIN_MARGIN = 2e-4  # smallest accepted gap between the k-th and (k+1)-th score of any top-k choice
SELF_CHECK_RTOL = 1e-5  # HF full vs incremental vs chunked, relative to the largest |logit|
CSA_RATIO = 4  # the official rule: overlap + indexer iff ratio == 4


@dataclasses.dataclass(frozen=True)
class TinyConfig:
    name: str
    vocab: int
    hidden: int
    ratios: tuple  # per layer: 0 SWA, 4 CSA, hca_ratio HCA
    hca_ratio: int
    num_hash_layers: int
    heads: int
    head_dim: int
    rope_dim: int
    q_lora: int
    o_groups: int
    o_lora: int
    experts: int
    top_k: int
    inter: int
    window: int
    index_heads: int
    index_dim: int
    index_topk: int
    swiglu_limit: float
    routed_scale: float
    sinkhorn_iters: int
    yarn_factor: float
    yarn_original: int
    tokens: int  # prompt length T
    decode_steps: int  # prefill T - decode_steps, then this many single-token calls
    chunks: tuple  # chunked prefill sizes (sum = T)
    seed: int


CONFIGS = (
    TinyConfig(name="v4-a", vocab=128, hidden=64, ratios=(0, 4, 8, 4), hca_ratio=8, num_hash_layers=2,
               heads=4, head_dim=32, rope_dim=8, q_lora=32, o_groups=2, o_lora=16, experts=4, top_k=2,
               inter=16, window=8, index_heads=32, index_dim=16, index_topk=4, swiglu_limit=2.0,
               routed_scale=1.5, sinkhorn_iters=20, yarn_factor=4.0, yarn_original=32, tokens=72,
               decode_steps=9, chunks=(21, 26, 25), seed=101),
    TinyConfig(name="v4-b", vocab=160, hidden=80, ratios=(4, 16, 0, 4, 16), hca_ratio=16, num_hash_layers=3,
               heads=8, head_dim=16, rope_dim=8, q_lora=32, o_groups=4, o_lora=8, experts=6, top_k=3,
               inter=12, window=12, index_heads=16, index_dim=16, index_topk=6, swiglu_limit=1.5,
               routed_scale=2.5, sinkhorn_iters=10, yarn_factor=4.0, yarn_original=48, tokens=96,
               decode_steps=11, chunks=(37, 18, 41), seed=202),
    TinyConfig(name="v4-c", vocab=192, hidden=128, ratios=(4, 8, 4), hca_ratio=8, num_hash_layers=1,
               heads=2, head_dim=48, rope_dim=16, q_lora=32, o_groups=2, o_lora=16, experts=4, top_k=2,
               inter=16, window=16, index_heads=16, index_dim=32, index_topk=5, swiglu_limit=3.0,
               routed_scale=1.5, sinkhorn_iters=20, yarn_factor=4.0, yarn_original=64, tokens=88,
               decode_steps=7, chunks=(30, 29, 29), seed=303),
)


# ---------------------------------------------------------------------------------------------- configs


def layer_type(cfg, ratio):
    if ratio == 0:
        return "sliding_attention"
    return "compressed_sparse_attention" if ratio == CSA_RATIO else "heavily_compressed_attention"


def hf_config(cfg):
    """The transformers config: layer_types + compress_rates express a small HCA ratio (compress_ratios can't)."""
    return DeepseekV4Config(
        vocab_size=cfg.vocab, hidden_size=cfg.hidden, moe_intermediate_size=cfg.inter,
        num_hidden_layers=len(cfg.ratios), num_attention_heads=cfg.heads, num_key_value_heads=1,
        head_dim=cfg.head_dim, q_lora_rank=cfg.q_lora, num_experts_per_tok=cfg.top_k,
        n_routed_experts=cfg.experts, n_shared_experts=1, routed_scaling_factor=cfg.routed_scale,
        layer_types=[layer_type(cfg, r) for r in cfg.ratios],
        compress_rates={"compressed_sparse_attention": CSA_RATIO, "heavily_compressed_attention": cfg.hca_ratio},
        mlp_layer_types=["hash_moe" if i < cfg.num_hash_layers else "moe" for i in range(len(cfg.ratios))],
        partial_rotary_factor=cfg.rope_dim / cfg.head_dim, sliding_window=cfg.window, o_groups=cfg.o_groups,
        o_lora_rank=cfg.o_lora, index_n_heads=cfg.index_heads, index_head_dim=cfg.index_dim,
        index_topk=cfg.index_topk, swiglu_limit=cfg.swiglu_limit, hc_sinkhorn_iters=cfg.sinkhorn_iters,
        max_position_embeddings=int(cfg.yarn_factor * cfg.yarn_original), num_nextn_predict_layers=0,
        rope_parameters={"rope_type": "yarn", "factor": cfg.yarn_factor,
                         "original_max_position_embeddings": cfg.yarn_original, "beta_fast": 32, "beta_slow": 1},
        attn_implementation="eager", dtype="float32")


def released_config(cfg, hf):
    """config.json as the official DeepSeek-V4-Flash release spells it (flat, compress_ratios, rope_scaling)."""
    return {
        "architectures": ["DeepseekV4ForCausalLM"], "model_type": "deepseek_v4",
        "vocab_size": cfg.vocab, "hidden_size": cfg.hidden, "moe_intermediate_size": cfg.inter,
        "num_hidden_layers": len(cfg.ratios), "num_attention_heads": cfg.heads, "num_key_value_heads": 1,
        "head_dim": cfg.head_dim, "qk_rope_head_dim": cfg.rope_dim, "q_lora_rank": cfg.q_lora,
        "o_groups": cfg.o_groups, "o_lora_rank": cfg.o_lora,
        "n_routed_experts": cfg.experts, "n_shared_experts": 1, "num_experts_per_tok": cfg.top_k,
        "routed_scaling_factor": cfg.routed_scale, "norm_topk_prob": True, "scoring_func": "sqrtsoftplus",
        "topk_method": "noaux_tc", "hidden_act": "silu", "swiglu_limit": cfg.swiglu_limit,
        "num_hash_layers": cfg.num_hash_layers, "compress_ratios": list(cfg.ratios),
        "sliding_window": cfg.window, "rope_theta": hf.rope_theta, "compress_rope_theta": hf.compress_rope_theta,
        "rope_scaling": {"type": "yarn", "factor": cfg.yarn_factor,
                         "original_max_position_embeddings": cfg.yarn_original, "beta_fast": 32, "beta_slow": 1},
        "max_position_embeddings": hf.max_position_embeddings,
        "index_n_heads": cfg.index_heads, "index_head_dim": cfg.index_dim, "index_topk": cfg.index_topk,
        "hc_mult": hf.hc_mult, "hc_sinkhorn_iters": cfg.sinkhorn_iters, "hc_eps": hf.hc_eps,
        "rms_norm_eps": hf.rms_norm_eps, "num_nextn_predict_layers": 0,
        "attention_bias": False, "attention_dropout": 0.0, "tie_word_embeddings": False,
        "bos_token_id": 0, "eos_token_id": 1, "torch_dtype": "bfloat16",
    }


# ---------------------------------------------------------------------------------------------- weights


def bf16_round(a):
    """Round to bf16-representable fp32 values (RNE) so the BF16 file holds exactly what HF ran."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return rounded.astype(np.uint32).view(np.float32)


def draw_parameter(name, shape, rng, cfg):
    """A fresh value for HF parameter `name`: O(1) activations, and no 0/1 defaults left anywhere."""
    fan_in = shape[-1] if len(shape) > 1 else 1
    if name.endswith("sinks"):
        return rng.normal(0.0, 1.0, shape)
    if name.endswith("position_bias"):
        return rng.normal(0.0, 0.5, shape)
    if name.endswith(("_hc.fn", "hc_head.hc_fn")):
        return rng.normal(0.0, 0.05, shape)
    if name.endswith(("_hc.base", "hc_head.hc_base")):
        return rng.normal(0.0, 0.5, shape)
    if name.endswith(("_hc.scale", "hc_head.hc_scale")):  # clearly away from HF's 1
        return 1.0 + rng.choice([-1.0, 1.0], shape) * rng.uniform(0.15, 0.5, shape)
    if name.endswith("e_score_correction_bias"):
        return rng.normal(0.0, 0.2, shape)
    if len(shape) == 1:  # every RMSNorm weight
        return 1.0 + rng.normal(0.0, 0.1, shape)
    if name.endswith("embed_tokens.weight"):
        return rng.normal(0.0, 1.0, shape)
    if name.endswith("experts.gate_up_proj"):  # routed w1|w3: big enough that the SwiGLU clamp fires
        return rng.normal(0.0, 1.2 * cfg.swiglu_limit / np.sqrt(fan_in), shape)
    if ".shared_experts." in name and not name.endswith("down_proj.weight"):  # keep shared below the clamp
        return rng.normal(0.0, 0.12 * cfg.swiglu_limit / np.sqrt(fan_in), shape)
    return rng.normal(0.0, 1.0 / np.sqrt(fan_in), shape)


def draw_tid2eid(shape, rng, experts):
    """Distinct experts per token row, as a hash table would give."""
    rows = [rng.permutation(experts)[: shape[1]] for _ in range(shape[0])]
    return np.stack(rows).astype(np.int64)


def randomise(model, cfg):
    rng = np.random.default_rng(cfg.seed)
    state = model.state_dict()
    with torch.no_grad():
        for name in sorted(state):
            tensor = state[name]
            if "rotary_emb" in name:
                continue
            if name.endswith("tid2eid"):
                value = draw_tid2eid(tuple(tensor.shape), rng, cfg.experts)
            else:
                value = bf16_round(draw_parameter(name, tuple(tensor.shape), rng, cfg))
            tensor.copy_(torch.from_numpy(value))


# released name <- HF name (conversion_mapping.py "deepseek_v4", applied forwards; HF's own reverse is wrong for
# attn.kv_norm and keeps the "model." prefix, so the table is explicit here)
GLOBAL_NAMES = {
    "model.embed_tokens.weight": "embed.weight", "lm_head.weight": "head.weight",
    "model.norm.weight": "norm.weight", "model.hc_head.hc_fn": "hc_head_fn",
    "model.hc_head.hc_base": "hc_head_base", "model.hc_head.hc_scale": "hc_head_scale",
}
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight", "post_attention_layernorm.weight": "ffn_norm.weight",
    "attn_hc.fn": "hc_attn_fn", "attn_hc.base": "hc_attn_base", "attn_hc.scale": "hc_attn_scale",
    "ffn_hc.fn": "hc_ffn_fn", "ffn_hc.base": "hc_ffn_base", "ffn_hc.scale": "hc_ffn_scale",
    "self_attn.q_a_proj.weight": "attn.wq_a.weight", "self_attn.q_a_norm.weight": "attn.q_norm.weight",
    "self_attn.q_b_proj.weight": "attn.wq_b.weight", "self_attn.kv_proj.weight": "attn.wkv.weight",
    "self_attn.kv_norm.weight": "attn.kv_norm.weight", "self_attn.o_a_proj.weight": "attn.wo_a.weight",
    "self_attn.o_b_proj.weight": "attn.wo_b.weight", "self_attn.sinks": "attn.attn_sink",
    "self_attn.compressor.kv_proj.weight": "attn.compressor.wkv.weight",
    "self_attn.compressor.gate_proj.weight": "attn.compressor.wgate.weight",
    "self_attn.compressor.position_bias": "attn.compressor.ape",
    "self_attn.compressor.kv_norm.weight": "attn.compressor.norm.weight",
    "self_attn.compressor.indexer.q_b_proj.weight": "attn.indexer.wq_b.weight",
    "self_attn.compressor.indexer.scorer.weights_proj.weight": "attn.indexer.weights_proj.weight",
    "self_attn.compressor.indexer.kv_proj.weight": "attn.indexer.compressor.wkv.weight",
    "self_attn.compressor.indexer.gate_proj.weight": "attn.indexer.compressor.wgate.weight",
    "self_attn.compressor.indexer.position_bias": "attn.indexer.compressor.ape",
    "self_attn.compressor.indexer.kv_norm.weight": "attn.indexer.compressor.norm.weight",
    "mlp.gate.weight": "ffn.gate.weight", "mlp.gate.e_score_correction_bias": "ffn.gate.bias",
    "mlp.gate.tid2eid": "ffn.gate.tid2eid",
    "mlp.shared_experts.gate_proj.weight": "ffn.shared_experts.w1.weight",
    "mlp.shared_experts.down_proj.weight": "ffn.shared_experts.w2.weight",
    "mlp.shared_experts.up_proj.weight": "ffn.shared_experts.w3.weight",
}
F32_IN_RELEASE = ("_base", "_scale", "attn_sink", ".ape", "ffn.gate.bias")  # small F32 tensors of the release;
# the rest is stored BF16 (the release: FP8/FP4 projections, F32 hc fn; BF16 keeps the files small)


def released_tensors(model):
    """HF state dict -> {released name: numpy array}; experts split back into w1/w3 and w2 per expert."""
    out = {}
    for name, tensor in model.state_dict().items():
        if "rotary_emb" in name:
            continue
        value = tensor.detach().cpu().numpy()
        if name in GLOBAL_NAMES:
            out[GLOBAL_NAMES[name]] = value
            continue
        layer, leaf = name.removeprefix("model.layers.").split(".", 1)
        prefix = f"layers.{layer}."
        if leaf == "mlp.experts.gate_up_proj":
            inter = value.shape[1] // 2
            for e in range(value.shape[0]):
                out[f"{prefix}ffn.experts.{e}.w1.weight"] = value[e, :inter]
                out[f"{prefix}ffn.experts.{e}.w3.weight"] = value[e, inter:]
        elif leaf == "mlp.experts.down_proj":
            for e in range(value.shape[0]):
                out[f"{prefix}ffn.experts.{e}.w2.weight"] = value[e]
        else:
            out[prefix + LAYER_NAMES[leaf]] = value
    return out


def storage_tensor(name, value):
    """The file's tensor: tid2eid I32, F32 where the release keeps F32, BF16 (exact: values are bf16-rounded)."""
    if name.endswith("tid2eid"):
        return torch.from_numpy(value.astype(np.int32))
    tensor = torch.from_numpy(np.ascontiguousarray(value, dtype=np.float32))
    return tensor if any(tag in name for tag in F32_IN_RELEASE) else tensor.to(torch.bfloat16)


# ---------------------------------------------------------------------------------------------- runs


def logits_of(output):
    return output.logits[0].detach().numpy().astype(np.float32)


def run_full(model, ids):
    streams = []  # each layer returns the [B, S, hc, D] streams
    hooks = [layer.register_forward_hook(lambda _m, _i, out: streams.append(out[0].detach().clone()))
             for layer in model.model.layers]
    try:
        with torch.no_grad():
            out = model(ids, use_cache=False)
            final = model.model(ids, use_cache=False).last_hidden_state[0].numpy()
    finally:
        for hook in hooks:
            hook.remove()
    hidden = torch.stack(streams[: len(model.model.layers)]).numpy()
    return logits_of(out), hidden, final


def run_chunks(model, ids, sizes):
    """Prefill in chunks of `sizes` through one HF cache; returns logits of every position."""
    cache, rows, start = None, [], 0
    with torch.no_grad():
        for size in sizes:
            out = model(ids[:, start : start + size], cache=cache, use_cache=True)
            cache = out.cache
            rows.append(logits_of(out))
            start += size
    return np.concatenate(rows)


def relative_deviation(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


# ---------------------------------------------------------------------------------------------- margins


class MarginProbe:
    """Records the smallest top-k margin of every indexer and router choice during a forward."""

    def __init__(self, model, cfg):
        self.cfg, self.indexer, self.router, self.hooks = cfg, [], [], []
        self.shared_peak, self.routed_peak = 0.0, 0.0
        for module in model.modules():
            if isinstance(module, hf_v4.DeepseekV4IndexerScorer):
                self.hooks.append(module.register_forward_hook(self._on_scores))
            elif isinstance(module, hf_v4.DeepseekV4TopKRouter):
                self.hooks.append(module.register_forward_hook(self._on_router(module)))
            elif isinstance(module, hf_v4.DeepseekV4MLP):
                self.hooks.append(module.register_forward_hook(self._on_shared))
            elif isinstance(module, hf_v4.DeepseekV4Experts):
                self.hooks.append(module.register_forward_hook(self._on_routed(module)))

    def _on_scores(self, _module, _inputs, scores):
        scores = scores[0].detach().numpy()  # [S, T]: full forward, positions 0..S-1
        for s in range(scores.shape[0]):
            visible = (s + 1) // CSA_RATIO
            if visible > self.cfg.index_topk:
                top = np.sort(scores[s, :visible])[::-1]
                self.indexer.append(top[self.cfg.index_topk - 1] - top[self.cfg.index_topk])

    def _on_router(self, module):
        def hook(_m, _inputs, outputs):
            scores = module.score_fn(outputs[0]) + module.e_score_correction_bias
            top = torch.sort(scores, dim=-1, descending=True).values.detach().numpy()
            self.router.extend(top[:, module.top_k - 1] - top[:, module.top_k])

        return hook

    def _on_shared(self, module, inputs, _out):
        x = inputs[0]
        peak = torch.maximum(module.gate_proj(x).max(), module.up_proj(x).abs().max())
        self.shared_peak = max(self.shared_peak, float(peak))

    def _on_routed(self, module):
        def hook(_m, inputs, _out):
            hidden, chosen = inputs[0], inputs[1]  # [N, D], [N, k]: only the selected experts count
            gate_up = torch.einsum("td,tkid->tki", hidden, module.gate_up_proj[chosen])
            gate, up = gate_up.chunk(2, dim=-1)
            self.routed_peak = max(self.routed_peak, float(torch.maximum(gate.max(), up.abs().max())))

        return hook

    def close(self):
        for hook in self.hooks:
            hook.remove()

    def summary(self):
        return {"indexer_min_margin": float(min(self.indexer)), "indexer_choices": len(self.indexer),
                "router_min_margin": float(min(self.router)), "router_choices": len(self.router),
                "shared_expert_peak_preactivation": self.shared_peak,
                "routed_expert_peak_preactivation": self.routed_peak}


def choose_prompt(model, cfg):
    """First prompt (seeded) whose top-k choices all have a margin >= MIN_MARGIN."""
    for attempt in range(64):
        rng = np.random.default_rng([cfg.seed, attempt])
        ids = torch.from_numpy(rng.integers(2, cfg.vocab, cfg.tokens)).unsqueeze(0)
        probe = MarginProbe(model, cfg)
        try:
            with torch.no_grad():
                model(ids, use_cache=False)
        finally:
            probe.close()
        stats = probe.summary()
        if min(stats["indexer_min_margin"], stats["router_min_margin"]) >= MIN_MARGIN:
            return ids, attempt, stats
    raise SystemExit(f"{cfg.name}: no prompt with top-k margins >= {MIN_MARGIN} in 64 attempts")


# ---------------------------------------------------------------------------------------------- checks


def check_clamps(cfg, stats):
    if stats["shared_expert_peak_preactivation"] >= cfg.swiglu_limit:
        raise SystemExit(f"{cfg.name}: the shared expert reaches the SwiGLU clamp (HF and official V4 disagree)")
    if stats["routed_expert_peak_preactivation"] <= cfg.swiglu_limit:
        raise SystemExit(f"{cfg.name}: the routed experts never reach the SwiGLU clamp")


def check_reload(hf, tensors, ids, expected):
    """HF's own loader, given the released names, must rebuild the same model (validates the name table)."""
    with tempfile.TemporaryDirectory() as tmp:
        hf.save_pretrained(tmp)
        save_torch_file(tensors, f"{tmp}/model.safetensors")
        reloaded = DeepseekV4ForCausalLM.from_pretrained(tmp, dtype=torch.float32).eval()
    with torch.no_grad():
        got = logits_of(reloaded(ids, use_cache=False))
    if not np.array_equal(got, expected):
        raise SystemExit(f"released-name reload differs from the original model by {np.abs(got - expected).max()}")


# ---------------------------------------------------------------------------------------------- driver


def make_golden(cfg, out_dir):
    torch.manual_seed(cfg.seed)
    hf = hf_config(cfg)
    model = DeepseekV4ForCausalLM(hf).eval()
    randomise(model, cfg)
    ids, attempt, stats = choose_prompt(model, cfg)
    check_clamps(cfg, stats)

    full, hidden, final = run_full(model, ids)
    prefill = cfg.tokens - cfg.decode_steps
    incremental = run_chunks(model, ids, (prefill,) + (1,) * cfg.decode_steps)  # rows of the decode calls
    chunked = run_chunks(model, ids, cfg.chunks)
    deviations = {"incremental_vs_full": relative_deviation(incremental, full),
                  "chunked_vs_full": relative_deviation(chunked, full)}
    if max(deviations.values()) > SELF_CHECK_RTOL:
        raise SystemExit(f"{cfg.name}: HF disagrees with itself: {deviations}")

    tensors = {name: storage_tensor(name, value) for name, value in released_tensors(model).items()}
    check_reload(hf, tensors, ids, full)

    target = out_dir / cfg.name
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    save_torch_file(tensors, str(target / "model.safetensors"))
    save_file({"input_ids": ids[0].numpy().astype(np.int32), "logits_full": full,
               "logits_decode": incremental[prefill:], "hidden_streams": hidden.astype(np.float16),
               "final_hidden": final},
              str(target / "golden.safetensors"))
    (target / "config.json").write_text(json.dumps(released_config(cfg, hf), indent=2) + "\n")
    (target / "hf_config.json").write_text(hf.to_json_string())
    meta = {"generator": "tools/make_v4_golden.py", "transformers": transformers.__version__,
            "torch": torch.__version__, "seed": cfg.seed, "prompt_attempt": attempt,
            "prefill_len": prefill, "decode_steps": cfg.decode_steps, "chunks": list(cfg.chunks),
            "self_check_relative_deviation": deviations, "min_margin_required": MIN_MARGIN, **stats}
    (target / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(f"{cfg.name}: T={cfg.tokens} prompt attempt {attempt}, {deviations}, margins "
          f"indexer {stats['indexer_min_margin']:.2e} router {stats['router_min_margin']:.2e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path("tests/data/golden/v4"))
    parser.add_argument("--only", nargs="*", help="config names (default: all)")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # one summation order: the files are reproducible bit for bit
    for cfg in CONFIGS:
        if not args.only or cfg.name in args.only:
            make_golden(cfg, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
