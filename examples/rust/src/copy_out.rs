//! The header's count convention for variable-length outputs: a first call with a NULL buffer and *count == 0
//! asks for the size, a second call fills a buffer of that size.
use std::ptr;

use crate::error::{check, Result};
use crate::ffi;

/// Runs `query(buffer, &mut count)` twice and returns the elements. The caller guarantees the result cannot change
/// between the two calls (the handle is borrowed and not shared across threads for writing).
pub(crate) fn copy_out<T: Copy + Default>(query: impl Fn(*mut T, *mut u64) -> ffi::fkv_status) -> Result<Vec<T>> {
    let mut count = 0u64;
    check(query(ptr::null_mut(), &mut count))?;
    let mut out = vec![T::default(); count as usize];
    let mut filled = count;
    check(query(out.as_mut_ptr(), &mut filled))?;
    out.truncate(filled as usize);
    Ok(out)
}
