//! Session: one token timeline over one KV state (owns one fkv_session; freed on Drop). Used by one thread at a
//! time: Send, not Sync; methods that change the timeline take &mut self. The session keeps its model's weights
//! alive, so it does not borrow the Model.
use std::ptr::{self, NonNull};

use crate::callbacks::{progress_trampoline, token_trampoline, Callback};
use crate::copy_out::copy_out;
use crate::error::{check, Error, Result, Status};
use crate::ffi;
use crate::kv::KvHandle;
use crate::model::Model;
use crate::options::{GenerateOptions, SamplingParams, SessionOptions, StopReason};

/// What generate produced: the tokens in order (a final stop token included) and why it stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Generation {
    pub tokens: Vec<i32>,
    pub stop_reason: StopReason,
}

pub struct Session {
    raw: NonNull<ffi::fkv_session>,
}

// SAFETY: an fkv_session may move between threads as long as one thread uses it at a time, which &mut self and the
// absence of Sync guarantee.
unsafe impl Send for Session {}

impl Session {
    pub fn new(model: &Model, options: &SessionOptions) -> Result<Session> {
        let raw_options = options.raw();
        let mut raw = ptr::null_mut();
        // SAFETY: live model handle, filled options, out-pointer.
        check(unsafe { ffi::fkv_session_create(model.as_ptr(), &raw_options, &mut raw) })?;
        let raw = NonNull::new(raw)
            .ok_or_else(|| Error::new(Status::Internal, "fkv_session_create returned FKV_OK and a NULL session"))?;
        Ok(Session { raw })
    }

    fn as_ptr(&self) -> *const ffi::fkv_session {
        self.raw.as_ptr()
    }

    fn as_mut_ptr(&mut self) -> *mut ffi::fkv_session {
        self.raw.as_ptr()
    }

    /// Runs tokens through the model (prefill in chunks). An empty slice, an id outside [0, vocab) or a sequence
    /// past max_position_embeddings is an error and leaves the session unchanged.
    pub fn append(&mut self, tokens: &[i32]) -> Result<()> {
        // SAFETY: live handle; (pointer, count) describe the slice.
        check(unsafe {
            ffi::fkv_session_append(self.as_mut_ptr(), tokens.as_ptr(), tokens.len() as u64, None, ptr::null_mut())
        })
    }

    /// Like append, calling `progress(done, total)` after each prefill chunk; returning false cancels
    /// (Status::Cancelled) and the session keeps the chunks done.
    pub fn append_with_progress<F: FnMut(i64, i64) -> bool>(&mut self, tokens: &[i32], progress: F) -> Result<()> {
        let mut callback = Callback::new(progress);
        // SAFETY: live handle; the callback lives on this frame through the call and runs on this thread.
        let status = unsafe {
            ffi::fkv_session_append(
                self.as_mut_ptr(),
                tokens.as_ptr(),
                tokens.len() as u64,
                Some(progress_trampoline::<F>),
                callback.user_data(),
            )
        };
        let result = check(status);
        callback.resume_panic();
        result
    }

    /// The fp32 logits predicting the next token (vocab_size entries). Error on an empty session.
    pub fn logits(&self) -> Result<Vec<f32>> {
        // SAFETY: live handle; copy_out passes a buffer of *count elements or NULL with 0.
        copy_out(|buffer, count| unsafe { ffi::fkv_session_logits(self.as_ptr(), buffer, count) })
    }

    /// Draws the next token from the logits without appending it. Deterministic in (params, tokens).
    pub fn sample(&self, params: &SamplingParams) -> Result<i32> {
        let raw = params.raw();
        let mut token = 0;
        // SAFETY: live handle, filled params, out-pointer.
        check(unsafe { ffi::fkv_session_sample(self.as_ptr(), &raw, &mut token) })?;
        Ok(token)
    }

    /// Appends the prompt (may be empty to continue), then samples and appends up to options.max_tokens tokens.
    pub fn generate(&mut self, prompt: &[i32], options: &GenerateOptions) -> Result<Generation> {
        self.generate_streaming(prompt, options, |_| true)
    }

    /// Like generate, handing each token to `on_token` before it is appended. Returning false cancels
    /// (Status::Cancelled); that token is not appended, the ones before it are kept (see tokens()).
    pub fn generate_streaming<F: FnMut(i32) -> bool>(
        &mut self,
        prompt: &[i32],
        options: &GenerateOptions,
        mut on_token: F,
    ) -> Result<Generation> {
        let mut tokens = Vec::new();
        // Tokens are collected here rather than in a tokens_out buffer, which would need max_tokens capacity.
        let mut callback = Callback::new(|token| {
            let keep_going = on_token(token);
            if keep_going {
                tokens.push(token);
            }
            keep_going
        });
        let sampling = options.sampling.raw();
        let mut raw_options = options.raw(&sampling);
        raw_options.on_token = Some(token_trampoline_for(&callback));
        raw_options.on_token_user_data = callback.user_data();
        let mut stop_reason = ffi::FKV_STOP_MAX_TOKENS;
        // SAFETY: live handle; prompt slice; options whose pointers borrow `sampling`, options.stop_tokens and
        // `callback`, all alive through the call; no tokens_out buffer (capacity 0).
        let status = unsafe {
            ffi::fkv_session_generate(
                self.as_mut_ptr(),
                prompt.as_ptr(),
                prompt.len() as u64,
                &raw_options,
                ptr::null_mut(),
                0,
                ptr::null_mut(),
                &mut stop_reason,
            )
        };
        callback.resume_panic();
        drop(callback);
        check(status)?;
        Ok(Generation { tokens, stop_reason: StopReason::from_raw(stop_reason) })
    }

    /// Drops the last n tokens, exactly. Beyond the session's length or window history: error, unchanged.
    pub fn rewind(&mut self, n: i64) -> Result<()> {
        // SAFETY: live handle.
        check(unsafe { ffi::fkv_session_rewind(self.as_mut_ptr(), n) })
    }

    /// Number of tokens the session holds.
    pub fn len(&self) -> Result<i64> {
        let mut length = 0;
        // SAFETY: live handle, out-pointer.
        check(unsafe { ffi::fkv_session_length(self.as_ptr(), &mut length) })?;
        Ok(length)
    }

    pub fn is_empty(&self) -> Result<bool> {
        Ok(self.len()? == 0)
    }

    /// The session's token ids, oldest first.
    pub fn tokens(&self) -> Result<Vec<i32>> {
        // SAFETY: live handle; copy_out passes a buffer of *count elements or NULL with 0.
        copy_out(|buffer, count| unsafe { ffi::fkv_session_tokens(self.as_ptr(), buffer, count) })
    }

    /// Bytes of KV state held now.
    pub fn kv_bytes(&self) -> Result<i64> {
        let mut bytes = 0;
        // SAFETY: live handle, out-pointer.
        check(unsafe { ffi::fkv_session_kv_bytes(self.as_ptr(), &mut bytes) })?;
        Ok(bytes)
    }

    /// An immutable snapshot of the KV state; the session stays usable and the snapshot outlives it.
    pub fn kv(&self) -> Result<KvHandle> {
        let mut raw = ptr::null_mut();
        // SAFETY: live handle, out-pointer.
        check(unsafe { ffi::fkv_session_kv(self.as_ptr(), &mut raw) })?;
        KvHandle::from_raw(raw)
    }

    /// Replaces the state with the snapshot's (exact continuation). A snapshot of another load is an error.
    pub fn restore(&mut self, kv: &KvHandle) -> Result<()> {
        // SAFETY: live handles.
        check(unsafe { ffi::fkv_session_restore(self.as_mut_ptr(), kv.as_ptr()) })
    }
}

/// The trampoline matching a callback's closure type (the closure type cannot be named).
fn token_trampoline_for<F: FnMut(i32) -> bool>(
    _: &Callback<F>,
) -> unsafe extern "C" fn(*mut std::os::raw::c_void, i32) -> i32 {
    token_trampoline::<F>
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Session({:p})", self.raw)
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        // SAFETY: the handle is owned by self and freed exactly once, here.
        unsafe { ffi::fkv_session_free(self.raw.as_ptr()) }
    }
}

/// Appends tokens[i] to sessions[i] for every i in one batched forward; equal to appending them one by one. The
/// sessions are distinct by construction (&mut) and must be of one model. On error no session changes.
pub fn decode(sessions: &mut [&mut Session], tokens: &[i32]) -> Result<()> {
    if sessions.len() != tokens.len() {
        return Err(Error::new(
            Status::InvalidArgument,
            format!("decode: {} sessions but {} tokens", sessions.len(), tokens.len()),
        ));
    }
    let raw: Vec<*mut ffi::fkv_session> = sessions.iter_mut().map(|session| session.as_mut_ptr()).collect();
    // SAFETY: distinct live handles borrowed mutably for the call; tokens has one id per session.
    check(unsafe { ffi::fkv_decode(raw.as_ptr(), tokens.as_ptr(), raw.len() as u64) })
}
