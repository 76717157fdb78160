//! The SIGPROF handler and the one global it reads.
//!
//! A signal handler cannot take arguments, so the active [`HotState`] is
//! published through an `AtomicPtr`. Lifetime is guarded by a count of
//! handlers in flight: the handler increments it *before* loading the
//! pointer, and the stopping side clears the pointer and then waits for
//! the count to reach zero before it lets go of its `Arc`. A handler either
//! saw null (and does nothing) or is counted (and the state outlives it).
//!
//! The handler is installed once and stays installed: after a sampler
//! stops, a SIGPROF still in flight (timers and perf signals can be pending
//! when they are disarmed) finds a null pointer and returns, where the
//! default action would have killed the process.

use std::io;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::hot::HotState;

static ACTIVE: AtomicPtr<HotState> = AtomicPtr::new(ptr::null_mut());
static IN_HANDLER: AtomicUsize = AtomicUsize::new(0);
static INSTALLED: Mutex<bool> = Mutex::new(false);

pub const SIGNAL: libc::c_int = libc::SIGPROF;

/// Whether the handler can read where the thread was interrupted on this target, so that a
/// VM may register its interpreter code ([`crate::PublishedState::set_interpreter_code`])
/// instead of publishing every primitive call.
pub const INTERRUPTED_PC_AVAILABLE: bool = cfg!(all(
    target_os = "linux",
    any(target_arch = "x86_64", target_arch = "aarch64")
));

/// The program counter at which the signal interrupted the thread, from the context the
/// kernel hands an `SA_SIGINFO` handler.
///
/// # Safety
/// `ctx` must be the third argument of an `SA_SIGINFO` handler (a `ucontext_t`), or null.
#[inline(always)]
unsafe fn interrupted_pc(ctx: *mut libc::c_void) -> Option<usize> {
    if ctx.is_null() {
        return None;
    }
    #[cfg(all(target_os = "linux", target_arch = "x86_64"))]
    {
        // SAFETY: per this function's contract `ctx` points at the kernel's `ucontext_t`,
        // valid for the handler's duration; reading one register slot is a plain load.
        let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
        Some(uc.uc_mcontext.gregs[libc::REG_RIP as usize] as usize)
    }
    #[cfg(all(target_os = "linux", target_arch = "aarch64"))]
    {
        // SAFETY: as above.
        let uc = unsafe { &*(ctx as *const libc::ucontext_t) };
        Some(uc.uc_mcontext.pc as usize)
    }
    #[cfg(not(all(
        target_os = "linux",
        any(target_arch = "x86_64", target_arch = "aarch64")
    )))]
    {
        None
    }
}

/// The head of a POSIX timer's `siginfo_t` as Linux lays it out on 64-bit targets
/// (`include/uapi/asm-generic/siginfo.h`: three ints, padding to the union, then `_timer`'s
/// `si_tid` and `si_overrun`). The libc crate keeps `si_overrun` private.
#[cfg(all(target_os = "linux", target_pointer_width = "64"))]
#[repr(C)]
struct TimerSiginfo {
    si_signo: libc::c_int,
    si_errno: libc::c_int,
    si_code: libc::c_int,
    _pad: libc::c_int,
    si_tid: libc::c_int,
    si_overrun: libc::c_int,
}

/// How many expiries of a POSIX timer the kernel merged into this signal: a CPU-time timer is
/// checked on kernel ticks that find its thread running, so on a shared CPU it fires late and
/// counts the expiries it missed as overruns. Zero for other signals (perf_events, setitimer).
///
/// # Safety
/// `info` must be the second argument of an `SA_SIGINFO` handler, or null.
#[inline(always)]
unsafe fn timer_overrun(info: *const libc::siginfo_t) -> u64 {
    if info.is_null() {
        return 0;
    }
    #[cfg(all(target_os = "linux", target_pointer_width = "64"))]
    {
        // SAFETY: per this function's contract `info` points at the kernel's siginfo, which
        // is at least as large as `TimerSiginfo` (128 bytes); for `SI_TIMER` its union holds
        // `_timer`, laid out as `TimerSiginfo` says.
        let t = unsafe { &*(info as *const TimerSiginfo) };
        if t.si_code == libc::SI_TIMER && t.si_overrun > 0 {
            return t.si_overrun as u64;
        }
        0
    }
    #[cfg(not(all(target_os = "linux", target_pointer_width = "64")))]
    {
        0
    }
}

extern "C" fn on_sigprof(_sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: __errno_location returns this thread's errno slot; saving
    // and restoring it keeps the interrupted code's errno intact, since
    // gettid/clock_gettime below may overwrite it.
    let errno = unsafe { *libc::__errno_location() };
    IN_HANDLER.fetch_add(1, Ordering::SeqCst);
    let hot = ACTIVE.load(Ordering::SeqCst);
    if !hot.is_null() {
        // SAFETY: non-null means a `Sampler` holds an `Arc` to this state
        // and will not release it until IN_HANDLER (which we incremented
        // before loading) drops back to zero; `on_tick` is
        // async-signal-safe (atomics only, no allocation or locks). `ctx` is the handler's
        // own third argument, as `interrupted_pc` requires.
        // `info` is the handler's own second argument, as `timer_overrun` requires.
        unsafe {
            let merged = timer_overrun(info);
            if merged > 0 {
                (*hot).note_merged_ticks(merged);
            }
            (*hot).on_tick_at(interrupted_pc(ctx));
        }
    }
    IN_HANDLER.fetch_sub(1, Ordering::SeqCst);
    // SAFETY: as above.
    unsafe { *libc::__errno_location() = errno };
}

/// Installs the handler for SIGPROF (once per process).
pub fn ensure_installed() -> io::Result<()> {
    let mut installed = INSTALLED.lock().unwrap_or_else(|e| e.into_inner());
    if *installed {
        return Ok(());
    }
    // SAFETY: a zeroed sigaction is a valid starting point; we set the
    // handler, flags and an empty mask before passing it to the kernel.
    // SA_SIGINFO selects the three-argument handler signature we provide;
    // SA_RESTART keeps the VM's blocking syscalls from failing with EINTR.
    // SIGPROF is blocked while the handler runs (no SA_NODEFER), so the
    // handler never nests on one thread.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigprof as *const () as usize;
        action.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        if libc::sigaction(SIGNAL, &action, ptr::null_mut()) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    *installed = true;
    Ok(())
}

/// Makes `hot` the target of SIGPROF. Fails if another sampler is active:
/// there is one SIGPROF per process.
pub fn activate(hot: &Arc<HotState>) -> bool {
    ACTIVE
        .compare_exchange(
            ptr::null_mut(),
            Arc::as_ptr(hot) as *mut HotState,
            Ordering::SeqCst,
            Ordering::SeqCst,
        )
        .is_ok()
}

/// Stops delivering ticks to the active state and waits until no handler
/// is still using it. Afterwards the caller may drop its `Arc`.
pub fn deactivate() {
    ACTIVE.store(ptr::null_mut(), Ordering::SeqCst);
    while IN_HANDLER.load(Ordering::SeqCst) != 0 {
        std::thread::yield_now();
    }
}
