//! Flushing the profile on Ctrl-C.
//!
//! Writing a file is not async-signal-safe, so the SIGINT handler only
//! raises [`crate::flag::STOP`] on the yieldpoint flag; the VM sees it at its
//! next yieldpoint (the check it already makes), writes the profile with
//! [`crate::Profile::write_atomically`] and exits. A VM that checks the flag
//! only where it already compares something (at calls, say) does not see it
//! in a loop that makes none, so a second Ctrl-C before the profile is written
//! exits at once with status 130, saying so.

use std::io;
use std::ptr;
use std::sync::atomic::{AtomicPtr, AtomicU32, Ordering};
use std::sync::Arc;

use crate::hot::{flag, HotState};

static TARGET: AtomicPtr<HotState> = AtomicPtr::new(ptr::null_mut());
static COUNT: AtomicU32 = AtomicU32::new(0);
static IN_FLIGHT: AtomicU32 = AtomicU32::new(0);

extern "C" fn on_sigint(_sig: libc::c_int) {
    if COUNT.fetch_add(1, Ordering::SeqCst) > 0 {
        const GIVING_UP: &[u8] =
            b"\ninterrupted again before the program reached a call: exiting without writing the profile\n";
        // SAFETY: write(2) and _exit are async-signal-safe; the message is a static buffer.
        // Nothing can be done about a failed write here, so its result is ignored.
        unsafe {
            libc::write(2, GIVING_UP.as_ptr().cast(), GIVING_UP.len());
            libc::_exit(130)
        };
    }
    IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
    let hot = TARGET.load(Ordering::SeqCst);
    if !hot.is_null() {
        // SAFETY: the guard that set TARGET holds an Arc to the state and,
        // when dropped, clears TARGET and waits for IN_FLIGHT (incremented
        // above, before the load) to reach zero before releasing it.
        // Raising the flag is one atomic fetch_or.
        unsafe { (*hot).flag.raise(flag::STOP) };
    }
    IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
}

/// Keeps the SIGINT handler installed; dropping it restores the previous
/// action.
pub struct SigintGuard {
    old: libc::sigaction,
    _hot: Arc<HotState>,
}

/// Routes SIGINT to `hot`'s yieldpoint flag.
pub fn install_sigint_flush(hot: &Arc<HotState>) -> io::Result<SigintGuard> {
    TARGET.store(Arc::as_ptr(hot) as *mut HotState, Ordering::SeqCst);
    COUNT.store(0, Ordering::SeqCst);
    // SAFETY: a zeroed sigaction with a one-argument handler, empty mask
    // and SA_RESTART is valid; the previous action is saved for restoring.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGINT, &action, &mut old) != 0 {
            TARGET.store(ptr::null_mut(), Ordering::SeqCst);
            return Err(io::Error::last_os_error());
        }
        Ok(SigintGuard {
            old,
            _hot: hot.clone(),
        })
    }
}

/// Whether SIGINT has been received since the guard was installed.
pub fn sigint_received() -> bool {
    COUNT.load(Ordering::SeqCst) > 0
}

impl Drop for SigintGuard {
    fn drop(&mut self) {
        // SAFETY: restoring the action saved at install time.
        unsafe { libc::sigaction(libc::SIGINT, &self.old, ptr::null_mut()) };
        TARGET.store(ptr::null_mut(), Ordering::SeqCst);
        while IN_FLIGHT.load(Ordering::SeqCst) != 0 {
            std::thread::yield_now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hot::HotConfig;

    #[test]
    fn sigint_raises_the_stop_bit() {
        let hot = HotState::new(HotConfig::default());
        let guard = install_sigint_flush(&hot).unwrap();
        // SAFETY: raise delivers SIGINT to this thread; our handler is
        // installed and only sets atomics.
        unsafe { libc::raise(libc::SIGINT) };
        assert!(sigint_received());
        assert_ne!(hot.flag.load() & flag::STOP, 0);
        assert_eq!(hot.flag.level(), flag::Level::All);
        drop(guard);
    }
}
