//! Hand-written declarations of capi/flashkv.h (ABI 1.1; its text functions, fkv_tokenize / fkv_detokenize /
//! fkv_chat_encode, are not declared here yet). Every type and function mirrors the header one to one;
//! the header is the contract and documents ownership, threading and errors of each function. Kept by hand (no
//! bindgen) so the crate builds offline with no dependencies; tests/abi.rs checks the struct sizes against what
//! the library's *_init functions write into struct_size, and the defaults they fill.
#![allow(non_camel_case_types)]

use std::os::raw::{c_char, c_void};

pub const FKV_ABI_VERSION_MAJOR: u32 = 1;
pub const FKV_ABI_VERSION_MINOR: u32 = 1;
pub const FKV_ABI_VERSION: u32 = (FKV_ABI_VERSION_MAJOR << 16) | FKV_ABI_VERSION_MINOR;

pub type fkv_status = i32;
pub const FKV_OK: fkv_status = 0;
pub const FKV_ERR_INVALID_ARGUMENT: fkv_status = 1;
pub const FKV_ERR_INVALID_CONFIG: fkv_status = 2;
pub const FKV_ERR_INVALID_CHECKPOINT: fkv_status = 3;
pub const FKV_ERR_NOT_FOUND: fkv_status = 4;
pub const FKV_ERR_IO: fkv_status = 5;
pub const FKV_ERR_UNSUPPORTED: fkv_status = 6;
pub const FKV_ERR_DEVICE: fkv_status = 7;
pub const FKV_ERR_OUT_OF_MEMORY: fkv_status = 8;
pub const FKV_ERR_CANCELLED: fkv_status = 9;
pub const FKV_ERR_INTERNAL: fkv_status = 10;

pub const FKV_DEVICE_CPU: i32 = 0;
pub const FKV_DEVICE_CUDA: i32 = 1;
pub const FKV_NUMERICS_CLEAN: i32 = 0;
pub const FKV_NUMERICS_FAITHFUL: i32 = 1;
pub const FKV_PREFILL_MODEL: i32 = -1;
pub const FKV_PREFILL_EXACT: i32 = 0;
pub const FKV_PREFILL_CED: i32 = 1;
pub const FKV_STOP_MAX_TOKENS: i32 = 0;
pub const FKV_STOP_TOKEN: i32 = 1;
pub const FKV_STOP_CONTEXT_FULL: i32 = 2;
pub const FKV_LOG_DEBUG: i32 = 0;
pub const FKV_LOG_INFO: i32 = 1;
pub const FKV_LOG_WARNING: i32 = 2;
pub const FKV_LOG_ERROR: i32 = 3;

// Callbacks: non-zero return cancels. Option<fn> is the nullable C function pointer (same ABI as the raw pointer).
pub type fkv_token_fn = Option<unsafe extern "C" fn(user_data: *mut c_void, token: i32) -> i32>;
pub type fkv_progress_fn = Option<unsafe extern "C" fn(user_data: *mut c_void, done: i64, total: i64) -> i32>;
pub type fkv_log_fn = Option<unsafe extern "C" fn(user_data: *mut c_void, level: i32, message: *const c_char) -> i32>;

// Opaque handles: never constructed or dereferenced on the Rust side.
#[repr(C)]
pub struct fkv_model {
    _private: [u8; 0],
}
#[repr(C)]
pub struct fkv_session {
    _private: [u8; 0],
}
#[repr(C)]
pub struct fkv_kv {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fkv_load_options {
    pub struct_size: u32,
    pub device: i32,
    pub threads: i32,
    pub numerics: i32,
    pub prefill: i32,
    pub reserved0: u32,
    pub prefill_chunk: i64,
    pub log: fkv_log_fn,
    pub log_user_data: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fkv_session_options {
    pub struct_size: u32,
    pub prefill: i32,
    pub prefill_chunk: i64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fkv_sampling_params {
    pub struct_size: u32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub seed: u64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fkv_generate_options {
    pub struct_size: u32,
    pub stop_at_eos: i32,
    pub max_tokens: i64,
    pub sampling: *const fkv_sampling_params,
    pub stop_tokens: *const i32,
    pub n_stop_tokens: u64,
    pub on_token: fkv_token_fn,
    pub on_token_user_data: *mut c_void,
    pub on_progress: fkv_progress_fn,
    pub on_progress_user_data: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fkv_config {
    pub struct_size: u32,
    pub num_hidden_layers: i32,
    pub vocab_size: i64,
    pub hidden_size: i64,
    pub num_attention_heads: i64,
    pub head_dim: i64,
    pub qk_rope_head_dim: i64,
    pub sliding_window: i64,
    pub max_position_embeddings: i64,
    pub n_routed_experts: i64,
    pub n_shared_experts: i64,
    pub num_experts_per_tok: i64,
    pub moe_intermediate_size: i64,
    pub index_topk: i64,
    pub bos_token_id: i64,
    pub eos_token_id: i64,
    pub num_nextn_predict_layers: i32,
    pub num_engram_layers: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct fkv_memory {
    pub struct_size: u32,
    pub reserved0: u32,
    pub global_kv_bytes_per_token: f64,
    pub kv_entry_bytes: u64,
    pub index_key_bytes: u64,
    pub window_row_bytes: u64,
    pub window_bytes_per_session: u64,
    pub compressor_state_bytes_per_session: u64,
    pub weight_bytes_estimate: u64,
    pub resident_weight_bytes: u64,
    pub parameters_total: u64,
    pub parameters_active_per_token: u64,
    pub weight_storage: *const c_char,
}

extern "C" {
    pub fn fkv_status_string(status: fkv_status) -> *const c_char;
    pub fn fkv_last_error() -> *const c_char;
    pub fn fkv_abi_version() -> u32;
    pub fn fkv_version_string() -> *const c_char;

    pub fn fkv_load_options_init(options: *mut fkv_load_options) -> fkv_status;
    pub fn fkv_session_options_init(options: *mut fkv_session_options) -> fkv_status;
    pub fn fkv_sampling_params_init(params: *mut fkv_sampling_params) -> fkv_status;
    pub fn fkv_generate_options_init(options: *mut fkv_generate_options) -> fkv_status;

    pub fn fkv_model_load(
        abi_version: u32,
        checkpoint_dir: *const c_char,
        options: *const fkv_load_options,
        out_model: *mut *mut fkv_model,
    ) -> fkv_status;
    pub fn fkv_model_free(model: *mut fkv_model);
    pub fn fkv_model_load_options(model: *const fkv_model, options: *mut fkv_load_options) -> fkv_status;
    pub fn fkv_model_config(model: *const fkv_model, config: *mut fkv_config) -> fkv_status;
    pub fn fkv_model_memory(model: *const fkv_model, memory: *mut fkv_memory) -> fkv_status;
    pub fn fkv_model_global_kv_bytes(model: *const fkv_model, tokens: u64, out_bytes: *mut u64) -> fkv_status;

    pub fn fkv_session_create(
        model: *const fkv_model,
        options: *const fkv_session_options,
        out_session: *mut *mut fkv_session,
    ) -> fkv_status;
    pub fn fkv_session_free(session: *mut fkv_session);
    pub fn fkv_session_append(
        session: *mut fkv_session,
        tokens: *const i32,
        n_tokens: u64,
        progress: fkv_progress_fn,
        progress_user_data: *mut c_void,
    ) -> fkv_status;
    pub fn fkv_session_logits(session: *const fkv_session, logits: *mut f32, count: *mut u64) -> fkv_status;
    pub fn fkv_session_sample(
        session: *const fkv_session,
        params: *const fkv_sampling_params,
        out_token: *mut i32,
    ) -> fkv_status;
    pub fn fkv_session_generate(
        session: *mut fkv_session,
        prompt: *const i32,
        n_prompt: u64,
        options: *const fkv_generate_options,
        tokens_out: *mut i32,
        tokens_capacity: u64,
        n_generated: *mut u64,
        stop_reason: *mut i32,
    ) -> fkv_status;
    pub fn fkv_session_rewind(session: *mut fkv_session, n: i64) -> fkv_status;
    pub fn fkv_session_length(session: *const fkv_session, out_length: *mut i64) -> fkv_status;
    pub fn fkv_session_tokens(session: *const fkv_session, tokens: *mut i32, count: *mut u64) -> fkv_status;
    pub fn fkv_session_kv_bytes(session: *const fkv_session, out_bytes: *mut i64) -> fkv_status;
    pub fn fkv_session_kv(session: *const fkv_session, out_kv: *mut *mut fkv_kv) -> fkv_status;
    pub fn fkv_session_restore(session: *mut fkv_session, kv: *const fkv_kv) -> fkv_status;
    pub fn fkv_decode(sessions: *const *mut fkv_session, tokens: *const i32, n: u64) -> fkv_status;

    pub fn fkv_kv_fork(kv: *const fkv_kv, out_kv: *mut *mut fkv_kv) -> fkv_status;
    pub fn fkv_kv_free(kv: *mut fkv_kv);
    pub fn fkv_kv_tokens(kv: *const fkv_kv, tokens: *mut i32, count: *mut u64) -> fkv_status;
    pub fn fkv_kv_bytes(kv: *const fkv_kv, out_bytes: *mut i64) -> fkv_status;
}
