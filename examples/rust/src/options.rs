//! Plain-value options of load, session, sampling and generation. Their Default values are the library's: each is
//! read from the matching fkv_*_init, so the header stays the one source of defaults.
use crate::ffi;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    Cpu,
    /// Refused (Status::Unsupported) until the CUDA engine lands.
    Cuda,
}

/// Clean: fp32 with the KV quantizers off (agrees with the numpy reference). Faithful: the checkpoint's storage
/// formats and cast points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Numerics {
    Clean,
    Faithful,
}

/// Exact: every prompt row through every layer. Ced: causal encoder-decoder prefill for a session's first append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prefill {
    Exact,
    Ced,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Debug,
    Info,
    Warning,
    Error,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadOptions {
    pub device: Device,
    /// Backend worker threads; 0: the hardware's concurrency.
    pub threads: i32,
    pub numerics: Numerics,
    /// The default prefill mode of the model's sessions.
    pub prefill: Prefill,
    /// Rows per prefill forward; > 0.
    pub prefill_chunk: i64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SessionOptions {
    /// None: the model's prefill mode.
    pub prefill: Option<Prefill>,
    /// Rows per prefill forward; 0: the model's.
    pub prefill_chunk: i64,
}

/// Filters apply in this order: penalties, temperature, top-k, top-p, min-p (docs/sampling.md).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SamplingParams {
    /// 0 = greedy (argmax, lowest id among ties).
    pub temperature: f32,
    /// 0 = off.
    pub top_k: i32,
    /// 1 = off; in (0, 1].
    pub top_p: f32,
    /// 0 = off; in [0, 1].
    pub min_p: f32,
    /// 1 = off; > 0.
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    /// Same seed, same session, same draws.
    pub seed: u64,
}

#[derive(Clone, Debug, PartialEq)]
pub struct GenerateOptions {
    pub sampling: SamplingParams,
    /// Tokens to generate at most; >= 0 (0: prefill only).
    pub max_tokens: i64,
    /// Ids in [0, vocab) that end generation (the stop token is kept).
    pub stop_tokens: Vec<i32>,
    /// Also stop at the config's eos_token_id.
    pub stop_at_eos: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    MaxTokens,
    StopToken,
    ContextFull,
}

impl Device {
    fn from_raw(raw: i32) -> Device {
        if raw == ffi::FKV_DEVICE_CUDA {
            Device::Cuda
        } else {
            Device::Cpu
        }
    }
    fn raw(self) -> i32 {
        match self {
            Device::Cpu => ffi::FKV_DEVICE_CPU,
            Device::Cuda => ffi::FKV_DEVICE_CUDA,
        }
    }
}

impl Numerics {
    fn from_raw(raw: i32) -> Numerics {
        if raw == ffi::FKV_NUMERICS_CLEAN {
            Numerics::Clean
        } else {
            Numerics::Faithful
        }
    }
    fn raw(self) -> i32 {
        match self {
            Numerics::Clean => ffi::FKV_NUMERICS_CLEAN,
            Numerics::Faithful => ffi::FKV_NUMERICS_FAITHFUL,
        }
    }
}

impl Prefill {
    fn from_raw(raw: i32) -> Option<Prefill> {
        match raw {
            ffi::FKV_PREFILL_EXACT => Some(Prefill::Exact),
            ffi::FKV_PREFILL_CED => Some(Prefill::Ced),
            _ => None,
        }
    }
    fn raw(self) -> i32 {
        match self {
            Prefill::Exact => ffi::FKV_PREFILL_EXACT,
            Prefill::Ced => ffi::FKV_PREFILL_CED,
        }
    }
}

impl LogLevel {
    pub(crate) fn from_raw(raw: i32) -> LogLevel {
        match raw {
            ffi::FKV_LOG_DEBUG => LogLevel::Debug,
            ffi::FKV_LOG_INFO => LogLevel::Info,
            ffi::FKV_LOG_WARNING => LogLevel::Warning,
            _ => LogLevel::Error,
        }
    }
}

impl StopReason {
    pub(crate) fn from_raw(raw: i32) -> StopReason {
        match raw {
            ffi::FKV_STOP_TOKEN => StopReason::StopToken,
            ffi::FKV_STOP_CONTEXT_FULL => StopReason::ContextFull,
            _ => StopReason::MaxTokens,
        }
    }
}

/// A zeroed C struct filled by its *_init; init only fails for a NULL pointer, which this never passes.
fn initialized<T>(init: unsafe extern "C" fn(*mut T) -> ffi::fkv_status) -> T {
    let mut raw = std::mem::MaybeUninit::<T>::zeroed();
    // SAFETY: raw points to writable storage of a T; init writes every field.
    let status = unsafe { init(raw.as_mut_ptr()) };
    assert_eq!(status, ffi::FKV_OK, "fkv_*_init refused a valid pointer");
    // SAFETY: zeroed then filled by init; every field of these C structs is valid when zero.
    unsafe { raw.assume_init() }
}

impl LoadOptions {
    pub(crate) fn from_raw(raw: &ffi::fkv_load_options) -> LoadOptions {
        LoadOptions {
            device: Device::from_raw(raw.device),
            threads: raw.threads,
            numerics: Numerics::from_raw(raw.numerics),
            prefill: Prefill::from_raw(raw.prefill).unwrap_or(Prefill::Exact),
            prefill_chunk: raw.prefill_chunk,
        }
    }

    /// The C struct, without log callback.
    pub(crate) fn raw(&self) -> ffi::fkv_load_options {
        let mut raw = initialized(ffi::fkv_load_options_init);
        raw.device = self.device.raw();
        raw.threads = self.threads;
        raw.numerics = self.numerics.raw();
        raw.prefill = self.prefill.raw();
        raw.prefill_chunk = self.prefill_chunk;
        raw
    }
}

impl Default for LoadOptions {
    fn default() -> LoadOptions {
        LoadOptions::from_raw(&initialized(ffi::fkv_load_options_init))
    }
}

impl SessionOptions {
    pub(crate) fn raw(&self) -> ffi::fkv_session_options {
        let mut raw = initialized(ffi::fkv_session_options_init);
        raw.prefill = self.prefill.map_or(ffi::FKV_PREFILL_MODEL, Prefill::raw);
        raw.prefill_chunk = self.prefill_chunk;
        raw
    }
}

impl Default for SessionOptions {
    fn default() -> SessionOptions {
        let raw = initialized(ffi::fkv_session_options_init);
        SessionOptions { prefill: Prefill::from_raw(raw.prefill), prefill_chunk: raw.prefill_chunk }
    }
}

impl SamplingParams {
    /// Argmax sampling (temperature 0), the rest at defaults.
    pub fn greedy() -> SamplingParams {
        SamplingParams { temperature: 0.0, ..SamplingParams::default() }
    }

    pub(crate) fn raw(&self) -> ffi::fkv_sampling_params {
        let mut raw = initialized(ffi::fkv_sampling_params_init);
        raw.temperature = self.temperature;
        raw.top_k = self.top_k;
        raw.top_p = self.top_p;
        raw.min_p = self.min_p;
        raw.repetition_penalty = self.repetition_penalty;
        raw.presence_penalty = self.presence_penalty;
        raw.frequency_penalty = self.frequency_penalty;
        raw.seed = self.seed;
        raw
    }
}

impl Default for SamplingParams {
    fn default() -> SamplingParams {
        let raw = initialized(ffi::fkv_sampling_params_init);
        SamplingParams {
            temperature: raw.temperature,
            top_k: raw.top_k,
            top_p: raw.top_p,
            min_p: raw.min_p,
            repetition_penalty: raw.repetition_penalty,
            presence_penalty: raw.presence_penalty,
            frequency_penalty: raw.frequency_penalty,
            seed: raw.seed,
        }
    }
}

impl GenerateOptions {
    /// The C struct; its pointers borrow `sampling` and self.stop_tokens, so both must outlive its use.
    pub(crate) fn raw(&self, sampling: &ffi::fkv_sampling_params) -> ffi::fkv_generate_options {
        let mut raw = initialized(ffi::fkv_generate_options_init);
        raw.stop_at_eos = i32::from(self.stop_at_eos);
        raw.max_tokens = self.max_tokens;
        raw.sampling = sampling;
        raw.stop_tokens = if self.stop_tokens.is_empty() { std::ptr::null() } else { self.stop_tokens.as_ptr() };
        raw.n_stop_tokens = self.stop_tokens.len() as u64;
        raw
    }
}

impl Default for GenerateOptions {
    fn default() -> GenerateOptions {
        let raw = initialized(ffi::fkv_generate_options_init);
        GenerateOptions {
            sampling: SamplingParams::default(),
            max_tokens: raw.max_tokens,
            stop_tokens: Vec::new(),
            stop_at_eos: raw.stop_at_eos != 0,
        }
    }
}
