//! Flushing the profile on Ctrl-C, SIGTERM and SIGHUP.
//!
//! All three end the run the same way (`timeout`, `kill` and a CI runner's cancel send
//! SIGTERM; a closed terminal SIGHUP), and the process then exits with 128 + the signal's
//! number ([`stop_signal`]). Writing a file is not async-signal-safe, so the handler only
//! raises [`crate::flag::STOP`] on the yieldpoint flag; the VM sees it at its
//! next yieldpoint (the check it already makes), ends the profile it has
//! been streaming ([`crate::Recorder::write_final`]) and exits. A VM that checks the flag
//! only where it already compares something (at calls, say) does not see it
//! in a loop that makes none, so a second Ctrl-C before the profile is written
//! exits at once with status 130, saying so.

use std::io;
use std::ptr;
use std::sync::atomic::{AtomicI32, AtomicPtr, AtomicU32, Ordering};
use std::sync::Arc;

use crate::hot::{flag, HotState};

static TARGET: AtomicPtr<HotState> = AtomicPtr::new(ptr::null_mut());
static COUNT: AtomicU32 = AtomicU32::new(0);
static IN_FLIGHT: AtomicU32 = AtomicU32::new(0);
/// The first stop signal received (0: none).
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// The signals that stop a profiled run and write its profile.
const STOP_SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

extern "C" fn on_sigint(sig: libc::c_int) {
    let _ = SIGNAL.compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst);
    if COUNT.fetch_add(1, Ordering::SeqCst) > 0 {
        const GIVING_UP: &[u8] =
            b"\ninterrupted again before the program reached a call: exiting without writing the profile\n";
        // SAFETY: write(2) and _exit are async-signal-safe; the message is a static buffer.
        // Nothing can be done about a failed write here, so its result is ignored.
        unsafe {
            libc::write(2, GIVING_UP.as_ptr().cast(), GIVING_UP.len());
            libc::_exit(128 + sig)
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

/// Keeps the handler of SIGINT, SIGTERM and SIGHUP installed; dropping it restores the
/// previous actions.
pub struct SigintGuard {
    old: [libc::sigaction; 3],
    _hot: Arc<HotState>,
}

/// Routes SIGINT, SIGTERM and SIGHUP to `hot`'s yieldpoint flag.
pub fn install_sigint_flush(hot: &Arc<HotState>) -> io::Result<SigintGuard> {
    TARGET.store(Arc::as_ptr(hot) as *mut HotState, Ordering::SeqCst);
    COUNT.store(0, Ordering::SeqCst);
    SIGNAL.store(0, Ordering::SeqCst);
    // SAFETY: a zeroed sigaction with a one-argument handler, empty mask
    // and SA_RESTART is valid; the previous actions are saved for restoring,
    // and on failure those already replaced are restored.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint as *const () as usize;
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        let mut old: [libc::sigaction; 3] = std::mem::zeroed();
        for (i, &sig) in STOP_SIGNALS.iter().enumerate() {
            if libc::sigaction(sig, &action, &mut old[i]) != 0 {
                let err = io::Error::last_os_error();
                for (j, &done) in STOP_SIGNALS[..i].iter().enumerate() {
                    libc::sigaction(done, &old[j], ptr::null_mut());
                }
                TARGET.store(ptr::null_mut(), Ordering::SeqCst);
                return Err(err);
            }
        }
        Ok(SigintGuard {
            old,
            _hot: hot.clone(),
        })
    }
}

/// Whether a stop signal (SIGINT, SIGTERM, SIGHUP) has been received since the guard was
/// installed.
pub fn sigint_received() -> bool {
    COUNT.load(Ordering::SeqCst) > 0
}

/// The first stop signal received since the guard was installed, if any: an interrupted run
/// exits with 128 + this number, as a shell reports a process killed by it.
pub fn stop_signal() -> Option<i32> {
    match SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        s => Some(s),
    }
}

impl Drop for SigintGuard {
    fn drop(&mut self) {
        for (i, &sig) in STOP_SIGNALS.iter().enumerate() {
            // SAFETY: restoring the action saved at install time.
            unsafe { libc::sigaction(sig, &self.old[i], ptr::null_mut()) };
        }
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
        assert_eq!(stop_signal(), Some(libc::SIGINT));
        assert_ne!(hot.flag.load() & flag::STOP, 0);
        assert_eq!(hot.flag.level(), flag::Level::All);
        drop(guard);
    }
}
