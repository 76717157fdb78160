//! How deep compiled code may nest calls on the native stack. The optimizing tier runs a call
//! to completion inside the caller's native frame, so SOM recursion through it recurses on
//! the thread's stack; its stubs refuse a call below `Jit::native_stack_limit` with SOM's
//! stack-overflow error instead of letting the thread overflow. The limit leaves
//! `NATIVE_STACK_MARGIN` above the stack's lowest address for what runs after the last
//! check: the callee's own frames up to its next call, a collection, the error's report.

/// Room left below the limit.
pub(crate) const NATIVE_STACK_MARGIN: usize = 1 << 20;

/// Native stack the limit allows below the point it is set, where the thread's stack
/// bounds are unknown.
const FALLBACK_BUDGET: usize = 1 << 20;

/// The lowest native stack pointer compiled code may call at, for the calling thread, whose
/// stack pointer is about `here`.
pub(crate) fn native_stack_limit(here: usize) -> usize {
    match thread_stack_low() {
        Some(low) if low + NATIVE_STACK_MARGIN < here => low + NATIVE_STACK_MARGIN,
        _ => here.saturating_sub(FALLBACK_BUDGET),
    }
}

/// The lowest address of the calling thread's stack, where the platform tells.
fn thread_stack_low() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: `attr` is initialised by `pthread_getattr_np` before it is read and
        // destroyed once; the out-parameters are plain locals.
        unsafe {
            let mut attr: libc::pthread_attr_t = std::mem::zeroed();
            if libc::pthread_getattr_np(libc::pthread_self(), &mut attr) != 0 {
                return None;
            }
            let mut address: *mut libc::c_void = std::ptr::null_mut();
            let mut size: libc::size_t = 0;
            let got = libc::pthread_attr_getstack(&attr, &mut address, &mut size);
            libc::pthread_attr_destroy(&mut attr);
            (got == 0 && !address.is_null()).then_some(address as usize)
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_limit_is_below_here_and_above_the_margin() {
        let here = std::hint::black_box(0u8);
        let here = std::ptr::addr_of!(here) as usize;
        let limit = native_stack_limit(here);
        assert!(limit < here);
        // A test thread's stack is a few MiB: the limit is within it.
        assert!(here - limit < 64 << 20, "{}", here - limit);
    }

    #[test]
    fn a_thread_with_a_large_stack_gets_a_deep_limit() {
        let depth = std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn(|| {
                let here = std::hint::black_box(0u8);
                let here = std::ptr::addr_of!(here) as usize;
                here - native_stack_limit(here)
            })
            .unwrap()
            .join()
            .unwrap();
        assert!(depth > 60 << 20, "{depth}");
    }
}
