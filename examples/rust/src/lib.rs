//! Safe Rust bindings over the flashkv C ABI (capi/flashkv.h): load a DeepSeek-V4.1 checkpoint, run sessions,
//! snapshot KV state.
//!
//! - Ownership: Model, Session and KvHandle each own one C handle and free it on Drop; there is no way to use a
//!   freed handle or free one twice. Sessions and snapshots keep the model's weights alive, so they borrow nothing.
//! - Errors: every fallible call returns Result<_, Error>; an Error carries the C status and the library's message
//!   naming the argument, file, field or tensor at fault. No panic crosses into C: a panicking callback cancels the
//!   C call and the panic resumes after it returns.
//! - Threading: Model and KvHandle are Send + Sync; Session is Send (one thread at a time, enforced by &mut).
//! - Linking: build.rs links libflashkv.so from FLASHKV_LIB_DIR (default FLASHKV_BUILD_DIR, then ../../build) and
//!   sets an rpath for this package's examples and tests; a program depending on this crate sets its own.
pub mod ffi;

mod callbacks;
mod copy_out;
mod error;
mod kv;
mod model;
mod options;
mod session;

use std::ffi::CStr;

pub use error::{Error, Result, Status};
pub use kv::KvHandle;
pub use model::{Config, Memory, Model};
pub use options::{
    Device, GenerateOptions, LoadOptions, LogLevel, Numerics, Prefill, SamplingParams, SessionOptions, StopReason,
};
pub use session::{decode, Generation, Session};

/// FKV_ABI_VERSION of the loaded library ((major << 16) | minor); this crate was written for ffi::FKV_ABI_VERSION.
pub fn abi_version() -> u32 {
    // SAFETY: no arguments; thread-safe.
    unsafe { ffi::fkv_abi_version() }
}

/// The library's release version, e.g. "0.1.0".
pub fn version() -> &'static str {
    // SAFETY: a never-NULL pointer to a static NUL-terminated string.
    unsafe { CStr::from_ptr(ffi::fkv_version_string()) }.to_str().unwrap_or("unknown")
}
