//! Rust closures as C callbacks. The C side gets an `extern "C"` trampoline and a pointer to a Callback that lives
//! on the caller's stack for the duration of the C call (the header guarantees callbacks run on the calling thread
//! before the call returns). A panic must not unwind through C frames: the trampoline catches it, cancels the C
//! call, and the wrapper resumes the panic once the C call has returned.
use std::any::Any;
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::panic::{self, AssertUnwindSafe};

use crate::options::LogLevel;

/// What the C callback must return to continue (0) or cancel (non-zero).
fn c_verdict(keep_going: bool) -> i32 {
    i32::from(!keep_going)
}

pub(crate) struct Callback<F> {
    f: F,
    panic: Option<Box<dyn Any + Send>>,
}

impl<F> Callback<F> {
    pub(crate) fn new(f: F) -> Callback<F> {
        Callback { f, panic: None }
    }

    /// The user_data to hand to C with the trampoline; valid while self is neither moved nor dropped.
    pub(crate) fn user_data(&mut self) -> *mut c_void {
        self as *mut Callback<F> as *mut c_void
    }

    /// Runs the closure, catching a panic (which cancels the C call).
    fn call(&mut self, run: impl FnOnce(&mut F) -> bool) -> i32 {
        match panic::catch_unwind(AssertUnwindSafe(|| run(&mut self.f))) {
            Ok(keep_going) => c_verdict(keep_going),
            Err(payload) => {
                self.panic = Some(payload);
                c_verdict(false)
            }
        }
    }

    /// Call after the C call returned: re-raises a panic the closure raised during it.
    pub(crate) fn resume_panic(&mut self) {
        if let Some(payload) = self.panic.take() {
            panic::resume_unwind(payload);
        }
    }
}

/// # Safety
/// user_data must be the user_data() of a live Callback<F> on this thread.
pub(crate) unsafe extern "C" fn token_trampoline<F: FnMut(i32) -> bool>(user_data: *mut c_void, token: i32) -> i32 {
    let callback = &mut *(user_data as *mut Callback<F>);
    callback.call(|f| f(token))
}

/// # Safety
/// user_data must be the user_data() of a live Callback<F> on this thread.
pub(crate) unsafe extern "C" fn progress_trampoline<F: FnMut(i64, i64) -> bool>(
    user_data: *mut c_void,
    done: i64,
    total: i64,
) -> i32 {
    let callback = &mut *(user_data as *mut Callback<F>);
    callback.call(|f| f(done, total))
}

/// # Safety
/// user_data must be the user_data() of a live Callback<F> on this thread; message NULL or NUL-terminated.
pub(crate) unsafe extern "C" fn log_trampoline<F: FnMut(LogLevel, &str) -> bool>(
    user_data: *mut c_void,
    level: i32,
    message: *const c_char,
) -> i32 {
    let callback = &mut *(user_data as *mut Callback<F>);
    let text = if message.is_null() { Default::default() } else { CStr::from_ptr(message).to_string_lossy() };
    callback.call(|f| f(LogLevel::from_raw(level), &text))
}
