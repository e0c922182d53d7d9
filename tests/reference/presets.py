"""Built-in configurations: the official V4.1-Flash text config (MODEL.md §1.1), the tiny test config of §12, a
second tiny config with other shapes (so nothing in the reference can be tuned to one shape), and a tiny
DeepSeek-V4-Flash (deepseek_v4) config.

These are config.json objects (flat, HF field names); `config_from_dict` turns them into a Config.
"""

from __future__ import annotations

from .config import Config, config_from_dict
from .config_v4 import ConfigV4, config_v4_from_dict, is_v4_document

OFFICIAL = {
    "model_type": "deepseek_v41",
    "vocab_size": 129280,
    "hidden_size": 5120,
    "num_hidden_layers": 40,
    "num_attention_heads": 64,
    "num_key_value_heads": 1,
    "head_dim": 512,
    "qk_rope_head_dim": 64,
    "q_lora_rank": 1280,
    "o_groups": 8,
    "o_lora_rank": 1024,
    "rope_theta": 10000.0,
    "compress_rope_theta": 160000.0,
    "rope_scaling": {"type": "yarn", "factor": 16, "original_max_position_embeddings": 65536, "beta_fast": 32,
                     "beta_slow": 1},
    "max_position_embeddings": 1048576,
    "sliding_window": 128,
    "compress_ratios": [0, 0] + [2] * 18 + [1] * 20 + [0] * 3,
    "kv_source_layer_ids": [2, 8, 14, 20],
    "index_source_layer_ids": [2, 8, 14, 20, 24, 28, 32, 36],
    "candidate_source_layer_id": 20,
    "candidate_topk_blocks": 2048,
    "candidate_block_size": 8,
    "index_n_heads": 32,
    "index_head_dim": 128,
    "index_topk": 512,
    "n_routed_experts": 384,
    "n_shared_experts": 1,
    "num_experts_per_tok": 6,
    "moe_intermediate_size": 2304,
    "scoring_func": "sqrtsoftplus",
    "routed_scaling_factor": 1.5,
    "swiglu_limit": 10.0,
    "rms_norm_eps": 1e-20,
    "hc_mult": 4,
    "hc_sinkhorn_iters": 20,
    "hc_eps": 1e-6,
    "engram_layer_ids": [1, 14],
    "engram_max_ngram_size": 4,
    "engram_n_heads": 8,
    "engram_head_dim": 256,
    "engram_vocab_size": 16000000,
    "engram_num_embeddings": [384006168, 384016682],
    "engram_compressed_vocab_size": 99092,
    "engram_pad_token_id": 2,
    "num_nextn_predict_layers": 3,
}

# MODEL.md §12: every mechanism active at CPU-test size.
TINY = {
    "model_type": "deepseek_v41",
    "vocab_size": 512,
    "hidden_size": 256,
    "num_hidden_layers": 8,
    "num_attention_heads": 4,
    "head_dim": 64,
    "qk_rope_head_dim": 16,
    "q_lora_rank": 64,
    "o_groups": 2,
    "o_lora_rank": 32,
    "sliding_window": 16,
    "rope_theta": 10000.0,
    "compress_rope_theta": 160000.0,
    "rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 64, "beta_fast": 32,
                     "beta_slow": 1},
    "compress_ratios": [0, 0, 2, 2, 1, 1, 1, 1],
    "kv_source_layer_ids": [2, 4],
    "index_source_layer_ids": [2, 4, 6],
    "candidate_source_layer_id": 4,
    "candidate_block_size": 4,
    "candidate_topk_blocks": 8,
    "index_n_heads": 2,
    "index_head_dim": 32,
    "index_topk": 16,
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 64,
    "scoring_func": "sqrtsoftplus",
    "routed_scaling_factor": 1.5,
    "swiglu_limit": 0.5,
    "hc_mult": 4,
    "hc_sinkhorn_iters": 20,
    "hc_eps": 1e-6,
    "rms_norm_eps": 1e-20,
    "engram_layer_ids": [1, 2],
    "engram_max_ngram_size": 4,
    "engram_n_heads": 2,
    "engram_head_dim": 32,
    "engram_vocab_size": 1000,
    "engram_num_embeddings": [6126, 6332],
    "engram_compressed_vocab_size": 400,
    "engram_pad_token_id": 2,
}

# Other shapes: 3 streams, odd head counts, head_dim 96 (3 FP8 blocks, 6 NVFP4 blocks), trigram Engram on an
# encoder SWA layer and a decoder Reuse layer, two ratio-2 owners, a pool of blocks of 2, window 8.
TINY_ALT = {
    "model_type": "deepseek_v41",
    "vocab_size": 300,
    "hidden_size": 192,
    "num_hidden_layers": 11,
    "num_attention_heads": 3,
    "head_dim": 96,
    "qk_rope_head_dim": 32,
    "q_lora_rank": 48,
    "o_groups": 3,
    "o_lora_rank": 24,
    "sliding_window": 8,
    "rope_theta": 10000.0,
    "compress_rope_theta": 40000.0,
    "rope_scaling": {"type": "yarn", "factor": 8, "original_max_position_embeddings": 32, "beta_fast": 16,
                     "beta_slow": 2},
    "compress_ratios": [0, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0],
    "kv_source_layer_ids": [1, 3, 5],
    "index_source_layer_ids": [1, 3, 5, 7, 9],
    "candidate_source_layer_id": 5,
    "candidate_block_size": 2,
    "candidate_topk_blocks": 6,
    "index_n_heads": 3,
    "index_head_dim": 64,
    "index_topk": 8,
    "n_routed_experts": 6,
    "n_shared_experts": 1,
    "num_experts_per_tok": 3,
    "moe_intermediate_size": 32,
    "scoring_func": "sqrtsoftplus",
    "routed_scaling_factor": 2.0,
    "swiglu_limit": 0.4,
    "hc_mult": 3,
    "hc_sinkhorn_iters": 12,
    "hc_eps": 1e-6,
    "rms_norm_eps": 1e-20,
    "engram_layer_ids": [0, 6],
    "engram_max_ngram_size": 3,
    "engram_n_heads": 2,
    "engram_head_dim": 32,
    "engram_vocab_size": 500,
    "engram_num_embeddings": [2056, 2208],
    "engram_compressed_vocab_size": 200,
    "engram_pad_token_id": 2,
}

# DeepSeek-V4-Flash mode (model_type deepseek_v4) at CPU-test size: SWA, CSA (ratio 4, indexer with 16 heads) and a
# small-ratio HCA layer, two hash-routed layers; widths that faithful numerics' V4 KV storage accepts (80 − 16 = 64
# non-RoPE channels = one FP8 block; index heads of 32 = one MXFP4 block, a power of two for the Hadamard rotation).
TINY_V4 = {
    "model_type": "deepseek_v4",
    "vocab_size": 256,
    "hidden_size": 128,
    "num_hidden_layers": 5,
    "num_attention_heads": 4,
    "head_dim": 80,
    "qk_rope_head_dim": 16,
    "q_lora_rank": 48,
    "o_groups": 2,
    "o_lora_rank": 32,
    "sliding_window": 8,
    "rope_theta": 10000.0,
    "compress_rope_theta": 160000.0,
    "rope_scaling": {"type": "yarn", "factor": 4, "original_max_position_embeddings": 32, "beta_fast": 32,
                     "beta_slow": 1},
    "compress_ratios": [0, 4, 8, 4, 0, 0],
    "num_hash_layers": 2,
    "index_n_heads": 16,
    "index_head_dim": 32,
    "index_topk": 4,
    "n_routed_experts": 8,
    "n_shared_experts": 1,
    "num_experts_per_tok": 2,
    "moe_intermediate_size": 32,
    "scoring_func": "sqrtsoftplus",
    "routed_scaling_factor": 1.5,
    "swiglu_limit": 1.0,
    "rms_norm_eps": 1e-6,
    "hc_mult": 4,
    "hc_sinkhorn_iters": 20,
    "hc_eps": 1e-6,
}

PRESETS = {"official": OFFICIAL, "tiny": TINY, "tiny_alt": TINY_ALT, "tiny_v4": TINY_V4}


def preset(name: str) -> Config | ConfigV4:
    """The built-in config `name` ('official', 'tiny', 'tiny_alt'; 'tiny_v4' is a deepseek_v4 ConfigV4)."""
    if name not in PRESETS:
        raise KeyError(f"unknown preset {name!r}; known: {sorted(PRESETS)}")
    if is_v4_document(PRESETS[name]):
        return config_v4_from_dict(PRESETS[name], f"<preset {name}>")
    return config_from_dict(PRESETS[name], f"<preset {name}>")
