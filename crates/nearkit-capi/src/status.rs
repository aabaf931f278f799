//! Status codes, the thread's last error message, the guard every entry point runs its body
//! in, and the checks of what C hands over (null, alignment, sizes).

use std::cell::RefCell;
use std::collections::TryReserveError;
use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use nearkit_core::Error;

/// What a call did. Every `nk_` function that can fail returns one; on anything but
/// `NK_STATUS_OK`, `nk_last_error_message()` says what went wrong and what to do, and the
/// call changed nothing (its outputs are left as they were, except that a failed `*_new`
/// sets its handle output to NULL).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NkStatus {
    /// Success.
    Ok = 0,
    /// A bad value: a non-finite coordinate, a radius that is not positive, a triangle that
    /// names a missing vertex, an unknown device, a misaligned array, and so on.
    InvalidArgument = 1,
    /// A pointer that must not be NULL was NULL.
    NullPointer = 2,
    /// A body id that names no body (never added, or removed).
    NoSuchBody = 3,
    /// The memory for a result could not be had.
    OutOfMemory = 4,
    /// CUDA was asked for, but no driver, NVRTC or GPU is usable here.
    NoCuda = 5,
    /// The GPU or its driver failed.
    CudaError = 6,
    /// An internal error (a Rust panic, caught): a bug in nearkit. The handles the call was
    /// given may be inconsistent; later calls on them return `NK_STATUS_POISONED`.
    Panic = 7,
    /// The handle was left unusable by an earlier `NK_STATUS_PANIC`; only freeing it works.
    Poisoned = 8,
}

impl NkStatus {
    /// Its name as in the header (`NK_STATUS_OK`, ...).
    pub fn name(self) -> &'static CStr {
        match self {
            NkStatus::Ok => c"NK_STATUS_OK",
            NkStatus::InvalidArgument => c"NK_STATUS_INVALID_ARGUMENT",
            NkStatus::NullPointer => c"NK_STATUS_NULL_POINTER",
            NkStatus::NoSuchBody => c"NK_STATUS_NO_SUCH_BODY",
            NkStatus::OutOfMemory => c"NK_STATUS_OUT_OF_MEMORY",
            NkStatus::NoCuda => c"NK_STATUS_NO_CUDA",
            NkStatus::CudaError => c"NK_STATUS_CUDA_ERROR",
            NkStatus::Panic => c"NK_STATUS_PANIC",
            NkStatus::Poisoned => c"NK_STATUS_POISONED",
        }
    }
}

/// Why a call failed: its status and message.
#[derive(Debug)]
pub(crate) struct Fail {
    pub status: NkStatus,
    pub message: String,
}

impl Fail {
    pub fn new(status: NkStatus, message: impl Into<String>) -> Self {
        Fail { status, message: message.into() }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Fail::new(NkStatus::InvalidArgument, message)
    }

    pub fn null(what: &str) -> Self {
        Fail::new(NkStatus::NullPointer, format!("`{what}` is NULL"))
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Self {
        let status = match &e {
            Error::OutOfMemory(_) => NkStatus::OutOfMemory,
            Error::CudaUnavailable(_) => NkStatus::NoCuda,
            Error::Cuda(_) => NkStatus::CudaError,
            // Every other variant is about the input.
            _ => NkStatus::InvalidArgument,
        };
        Fail::new(status, e.to_string())
    }
}

impl From<TryReserveError> for Fail {
    fn from(e: TryReserveError) -> Self {
        Fail::new(NkStatus::OutOfMemory, format!("out of memory: {e}"))
    }
}

/// A call's outcome inside the guard.
pub(crate) type Outcome<T = ()> = Result<T, Fail>;

thread_local! {
    /// The message of the last call that failed on this thread.
    static LAST_ERROR: RefCell<Option<CString>> = const { RefCell::new(None) };
}

fn set_last_error(function: &str, message: &str) {
    // A message cannot hold a NUL in C; none of nearkit's do, but a panic's might.
    let text = format!("{function}: {message}").replace('\0', "\\0");
    let text = CString::new(text).unwrap_or_default();
    let _ = LAST_ERROR.try_with(|e| {
        if let Ok(mut e) = e.try_borrow_mut() {
            *e = Some(text);
        }
    });
}

/// The last error message on this thread (empty if no call has failed on it).
pub(crate) fn last_error_message() -> *const c_char {
    LAST_ERROR
        .try_with(|e| e.try_borrow().ok().and_then(|e| e.as_ref().map(|s| s.as_ptr())))
        .ok()
        .flatten()
        .unwrap_or(c"".as_ptr())
}

/// Runs an entry point's body: a panic is caught (and becomes `NK_STATUS_PANIC`), a failure
/// becomes its status, and both leave their message for `nk_last_error_message`, prefixed
/// with `function`.
pub(crate) fn guard(function: &'static str, body: impl FnOnce() -> Outcome) -> NkStatus {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(())) => NkStatus::Ok,
        Ok(Err(fail)) => {
            set_last_error(function, &fail.message);
            fail.status
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".into());
            // Dropping a panic's payload may panic in turn; that must not unwind into C either.
            if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(payload))) {
                std::mem::forget(again);
            }
            set_last_error(
                function,
                &format!(
                    "internal error, a bug in nearkit (please report it): {what}; the handles this call was \
                     given are poisoned (free them)"
                ),
            );
            NkStatus::Panic
        }
    }
}

/// `n` values at `p`, which may be NULL when `n` is 0.
///
/// # Safety
/// Unless NULL, `p` must point to `n` initialized values that stay valid and unmodified
/// for `'a`.
pub(crate) unsafe fn slice<'a, T>(p: *const T, n: usize, what: &str) -> Outcome<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(Fail::null(what));
    }
    if !p.is_aligned() {
        return Err(Fail::invalid(format!("`{what}` is not aligned to {} bytes", std::mem::align_of::<T>())));
    }
    if n.checked_mul(std::mem::size_of::<T>()).is_none_or(|bytes| bytes > isize::MAX as usize) {
        return Err(Fail::invalid(format!("`{what}`: {n} values do not fit in memory")));
    }
    // SAFETY: non-null, aligned, of a size that fits; the caller promises the rest.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// `n` writable values at `p`, which may be NULL when `n` is 0.
///
/// # Safety
/// Unless NULL, `p` must point to `n` writable values that nothing else reads or writes
/// during `'a`.
pub(crate) unsafe fn slice_mut<'a, T>(p: *mut T, n: usize, what: &str) -> Outcome<&'a mut [T]> {
    // SAFETY: the same checks; the caller promises exclusive access.
    let s = unsafe { slice(p.cast_const(), n, what) }?;
    Ok(unsafe { std::slice::from_raw_parts_mut(s.as_ptr().cast_mut(), s.len()) })
}

/// The `N` values at `p`.
///
/// # Safety
/// Unless NULL, `p` must point to `N` initialized values.
pub(crate) unsafe fn array<T: Copy, const N: usize>(p: *const T, what: &str) -> Outcome<[T; N]> {
    // SAFETY: forwarded.
    let s = unsafe { slice(p, N, what) }?;
    Ok(std::array::from_fn(|i| s[i]))
}

/// Checks that an output pointer can be written (before any work is done, so that a NULL
/// output never loses a result).
pub(crate) fn out_ok<T>(p: *mut T, what: &str) -> Outcome {
    if p.is_null() {
        Err(Fail::null(what))
    } else if !p.is_aligned() {
        Err(Fail::invalid(format!("`{what}` is not aligned to {} bytes", std::mem::align_of::<T>())))
    } else {
        Ok(())
    }
}

/// Writes an output that `out_ok` accepted.
///
/// # Safety
/// `p` must be valid for a write of `T`.
pub(crate) unsafe fn put<T>(p: *mut T, value: T) {
    // SAFETY: checked by `out_ok`; the caller promises validity.
    unsafe { p.write(value) }
}
