//! flashkv::Error: the status a C call returned plus the message the library left in fkv_last_error() on the
//! same thread, read right after the failing call (the next fkv_* call on the thread may overwrite it).
use std::ffi::CStr;
use std::fmt;

use crate::ffi;

/// The C ABI's fkv_status codes (equal to flashkv::ErrorCode of the C++ API). Values are stable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Status {
    InvalidArgument,
    InvalidConfig,
    InvalidCheckpoint,
    NotFound,
    Io,
    Unsupported,
    Device,
    OutOfMemory,
    Cancelled,
    Internal,
    /// A code this crate does not know (a newer library); the raw value.
    Unknown(i32),
}

impl Status {
    /// The status of a raw non-zero fkv_status.
    pub fn from_raw(raw: ffi::fkv_status) -> Status {
        match raw {
            ffi::FKV_ERR_INVALID_ARGUMENT => Status::InvalidArgument,
            ffi::FKV_ERR_INVALID_CONFIG => Status::InvalidConfig,
            ffi::FKV_ERR_INVALID_CHECKPOINT => Status::InvalidCheckpoint,
            ffi::FKV_ERR_NOT_FOUND => Status::NotFound,
            ffi::FKV_ERR_IO => Status::Io,
            ffi::FKV_ERR_UNSUPPORTED => Status::Unsupported,
            ffi::FKV_ERR_DEVICE => Status::Device,
            ffi::FKV_ERR_OUT_OF_MEMORY => Status::OutOfMemory,
            ffi::FKV_ERR_CANCELLED => Status::Cancelled,
            ffi::FKV_ERR_INTERNAL => Status::Internal,
            other => Status::Unknown(other),
        }
    }

    /// The raw fkv_status value.
    pub fn raw(self) -> ffi::fkv_status {
        match self {
            Status::InvalidArgument => ffi::FKV_ERR_INVALID_ARGUMENT,
            Status::InvalidConfig => ffi::FKV_ERR_INVALID_CONFIG,
            Status::InvalidCheckpoint => ffi::FKV_ERR_INVALID_CHECKPOINT,
            Status::NotFound => ffi::FKV_ERR_NOT_FOUND,
            Status::Io => ffi::FKV_ERR_IO,
            Status::Unsupported => ffi::FKV_ERR_UNSUPPORTED,
            Status::Device => ffi::FKV_ERR_DEVICE,
            Status::OutOfMemory => ffi::FKV_ERR_OUT_OF_MEMORY,
            Status::Cancelled => ffi::FKV_ERR_CANCELLED,
            Status::Internal => ffi::FKV_ERR_INTERNAL,
            Status::Unknown(raw) => raw,
        }
    }

    /// The library's stable lower-case name ("invalid_argument", ...; "unknown" for codes it does not know).
    pub fn name(self) -> &'static str {
        // SAFETY: fkv_status_string returns a never-NULL pointer to a static NUL-terminated string.
        let name = unsafe { CStr::from_ptr(ffi::fkv_status_string(self.raw())) };
        name.to_str().unwrap_or("unknown")
    }
}

/// A failed flashkv call: its status and the library's message naming what is at fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    status: Status,
    message: String,
}

impl Error {
    pub fn new(status: Status, message: impl Into<String>) -> Error {
        Error { status, message: message.into() }
    }

    pub fn status(&self) -> Status {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    /// The error of a failed call, with this thread's fkv_last_error() message. Call right after the call.
    pub(crate) fn from_last_call(raw: ffi::fkv_status) -> Error {
        // SAFETY: fkv_last_error returns a never-NULL, NUL-terminated, thread-local string valid until the next
        // fkv_* call on this thread; it is copied before any other call.
        let message = unsafe { CStr::from_ptr(ffi::fkv_last_error()) };
        Error::new(Status::from_raw(raw), message.to_string_lossy().into_owned())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "flashkv {}: {}", self.status.name(), self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// Ok for FKV_OK, else the error with this thread's message.
pub(crate) fn check(raw: ffi::fkv_status) -> Result<()> {
    if raw == ffi::FKV_OK {
        Ok(())
    } else {
        Err(Error::from_last_call(raw))
    }
}
