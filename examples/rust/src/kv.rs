//! KvHandle: an immutable snapshot of a session's KV state (owns one fkv_kv; freed on Drop). Readable from any
//! number of threads (Send + Sync). fork() is another handle to the same snapshot, without a copy; the snapshot is
//! freed with its last handle.
use std::ptr::{self, NonNull};

use crate::copy_out::copy_out;
use crate::error::{check, Error, Result, Status};
use crate::ffi;

pub struct KvHandle {
    raw: NonNull<ffi::fkv_kv>,
}

// SAFETY: the snapshot is immutable and every fkv_kv read function is thread-safe (flashkv.h, Threading);
// fkv_kv_free is only reached through Drop, which has exclusive access.
unsafe impl Send for KvHandle {}
unsafe impl Sync for KvHandle {}

impl KvHandle {
    /// Takes ownership of a handle a successful fkv_* call returned.
    pub(crate) fn from_raw(raw: *mut ffi::fkv_kv) -> Result<KvHandle> {
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::Internal, "an fkv_* call returned FKV_OK and a NULL snapshot"))?;
        Ok(KvHandle { raw })
    }

    pub(crate) fn as_ptr(&self) -> *const ffi::fkv_kv {
        self.raw.as_ptr()
    }

    /// Another handle to the same snapshot.
    pub fn fork(&self) -> Result<KvHandle> {
        let mut raw = ptr::null_mut();
        // SAFETY: live handle, out-pointer.
        check(unsafe { ffi::fkv_kv_fork(self.as_ptr(), &mut raw) })?;
        KvHandle::from_raw(raw)
    }

    /// The snapshot's token ids, oldest first.
    pub fn tokens(&self) -> Result<Vec<i32>> {
        // SAFETY: live handle; copy_out passes a buffer of *count elements or NULL with 0.
        copy_out(|buffer, count| unsafe { ffi::fkv_kv_tokens(self.as_ptr(), buffer, count) })
    }

    /// Bytes of KV state the snapshot holds.
    pub fn bytes(&self) -> Result<i64> {
        let mut bytes = 0;
        // SAFETY: live handle, out-pointer.
        check(unsafe { ffi::fkv_kv_bytes(self.as_ptr(), &mut bytes) })?;
        Ok(bytes)
    }
}

impl std::fmt::Debug for KvHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "KvHandle({:p})", self.raw)
    }
}

impl Drop for KvHandle {
    fn drop(&mut self) {
        // SAFETY: the handle is owned by self and freed exactly once, here.
        unsafe { ffi::fkv_kv_free(self.raw.as_ptr()) }
    }
}
