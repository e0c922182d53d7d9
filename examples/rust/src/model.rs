//! Model: a loaded checkpoint (owns one fkv_model; freed on Drop). Immutable and thread-safe (Send + Sync), so it
//! can be shared across threads behind an Arc. Sessions and snapshots keep the weights alive, so a Model may be
//! dropped before them.
use std::ffi::{CStr, CString};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::ptr::{self, NonNull};

use crate::callbacks::{log_trampoline, Callback};
use crate::error::{check, Error, Result, Status};
use crate::ffi;
use crate::options::{LoadOptions, LogLevel, SessionOptions};
use crate::session::Session;

/// Shape and token facts of the model's config.json.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub num_hidden_layers: i32,
    /// Token ids are [0, vocab_size).
    pub vocab_size: i64,
    pub hidden_size: i64,
    pub num_attention_heads: i64,
    pub head_dim: i64,
    pub qk_rope_head_dim: i64,
    pub sliding_window: i64,
    /// The longest sequence a session may hold.
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

/// Cache and weight footprint: the config's figures plus what this load holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Memory {
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
    pub weight_storage: String,
}

pub struct Model {
    raw: NonNull<ffi::fkv_model>,
}

// SAFETY: fkv_model is immutable after load and every fkv_model function is thread-safe (flashkv.h, Threading);
// fkv_model_free is only reached through Drop, which has exclusive access.
unsafe impl Send for Model {}
unsafe impl Sync for Model {}

fn path_to_c(path: &Path) -> Result<CString> {
    CString::new(path.as_os_str().as_bytes()).map_err(|_| {
        Error::new(Status::InvalidArgument, format!("checkpoint path {} contains a NUL byte", path.display()))
    })
}

impl Model {
    /// Loads the checkpoint directory (config.json + safetensors shards). The library checks this crate's ABI
    /// version against its own and refuses a mismatch (Status::Unsupported).
    pub fn load(path: impl AsRef<Path>, options: &LoadOptions) -> Result<Model> {
        Model::load_raw(path.as_ref(), &options.raw())
    }

    /// Like load, handing the library's log lines about the load to `log`; returning false cancels the load
    /// (Status::Cancelled).
    pub fn load_with_log<F: FnMut(LogLevel, &str) -> bool>(
        path: impl AsRef<Path>,
        options: &LoadOptions,
        log: F,
    ) -> Result<Model> {
        let mut callback = Callback::new(log);
        let mut raw_options = options.raw();
        raw_options.log = Some(log_trampoline::<F>);
        raw_options.log_user_data = callback.user_data();
        let result = Model::load_raw(path.as_ref(), &raw_options);
        callback.resume_panic();
        result
    }

    fn load_raw(path: &Path, options: &ffi::fkv_load_options) -> Result<Model> {
        let c_path = path_to_c(path)?;
        let mut raw = ptr::null_mut();
        // SAFETY: valid NUL-terminated path, a filled options struct and an out-pointer; the library keeps no
        // reference to either after the call.
        check(unsafe { ffi::fkv_model_load(ffi::FKV_ABI_VERSION, c_path.as_ptr(), options, &mut raw) })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::Internal, "fkv_model_load returned FKV_OK and a NULL model"))?;
        Ok(Model { raw })
    }

    pub(crate) fn as_ptr(&self) -> *const ffi::fkv_model {
        self.raw.as_ptr()
    }

    /// A new empty session of this model.
    pub fn session(&self, options: &SessionOptions) -> Result<Session> {
        Session::new(self, options)
    }

    /// The options the model was loaded with.
    pub fn load_options(&self) -> Result<LoadOptions> {
        let mut raw = LoadOptions::default().raw();
        // SAFETY: live handle; raw has struct_size set by init.
        check(unsafe { ffi::fkv_model_load_options(self.as_ptr(), &mut raw) })?;
        Ok(LoadOptions::from_raw(&raw))
    }

    pub fn config(&self) -> Result<Config> {
        // SAFETY: an all-zero fkv_config is a valid value; struct_size is set before the call.
        let mut raw: ffi::fkv_config = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<ffi::fkv_config>() as u32;
        // SAFETY: live handle and a writable struct of the size announced.
        check(unsafe { ffi::fkv_model_config(self.as_ptr(), &mut raw) })?;
        Ok(Config {
            num_hidden_layers: raw.num_hidden_layers,
            vocab_size: raw.vocab_size,
            hidden_size: raw.hidden_size,
            num_attention_heads: raw.num_attention_heads,
            head_dim: raw.head_dim,
            qk_rope_head_dim: raw.qk_rope_head_dim,
            sliding_window: raw.sliding_window,
            max_position_embeddings: raw.max_position_embeddings,
            n_routed_experts: raw.n_routed_experts,
            n_shared_experts: raw.n_shared_experts,
            num_experts_per_tok: raw.num_experts_per_tok,
            moe_intermediate_size: raw.moe_intermediate_size,
            index_topk: raw.index_topk,
            bos_token_id: raw.bos_token_id,
            eos_token_id: raw.eos_token_id,
            num_nextn_predict_layers: raw.num_nextn_predict_layers,
            num_engram_layers: raw.num_engram_layers,
        })
    }

    pub fn memory(&self) -> Result<Memory> {
        // SAFETY: an all-zero fkv_memory (NULL weight_storage) is a valid value; struct_size is set before the call.
        let mut raw: ffi::fkv_memory = unsafe { std::mem::zeroed() };
        raw.struct_size = std::mem::size_of::<ffi::fkv_memory>() as u32;
        // SAFETY: live handle and a writable struct of the size announced.
        check(unsafe { ffi::fkv_model_memory(self.as_ptr(), &mut raw) })?;
        let weight_storage = if raw.weight_storage.is_null() {
            String::new()
        } else {
            // SAFETY: NUL-terminated and owned by the model, which lives through this copy.
            unsafe { CStr::from_ptr(raw.weight_storage) }.to_string_lossy().into_owned()
        };
        Ok(Memory {
            global_kv_bytes_per_token: raw.global_kv_bytes_per_token,
            kv_entry_bytes: raw.kv_entry_bytes,
            index_key_bytes: raw.index_key_bytes,
            window_row_bytes: raw.window_row_bytes,
            window_bytes_per_session: raw.window_bytes_per_session,
            compressor_state_bytes_per_session: raw.compressor_state_bytes_per_session,
            weight_bytes_estimate: raw.weight_bytes_estimate,
            resident_weight_bytes: raw.resident_weight_bytes,
            parameters_total: raw.parameters_total,
            parameters_active_per_token: raw.parameters_active_per_token,
            weight_storage,
        })
    }

    /// Exact global KV bytes of a sequence of `tokens` tokens.
    pub fn global_kv_bytes(&self, tokens: u64) -> Result<u64> {
        let mut bytes = 0;
        // SAFETY: live handle and an out-pointer.
        check(unsafe { ffi::fkv_model_global_kv_bytes(self.as_ptr(), tokens, &mut bytes) })?;
        Ok(bytes)
    }
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Model({:p})", self.raw)
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: the handle is owned by self and freed exactly once, here.
        unsafe { ffi::fkv_model_free(self.raw.as_ptr()) }
    }
}
