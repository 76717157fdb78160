//! The overloaded yieldpoint flag (Arnold & Grove, CGO 2005).
//!
//! The interpreter already has to check *something* at its yieldpoints; by
//! making that something one byte whose bits say what is wanted, profiling
//! adds little to the path where nothing is wanted: a loop back-edge tests
//! `flag & ALL_YIELDPOINTS != 0`, and everything else happens out of line.
//!
//! Calls and returns can do better still, because a VM already compares
//! something there: the stack depth against its limit when it pushes a frame,
//! and against the depth at which its loop must stop when it pops one. A VM
//! that keeps those bounds in [`TripWord`]s and attaches them to its flag
//! ([`YieldpointFlag::attach`]) gets prologue and epilogue yieldpoints for
//! free: raising any bit also *trips* the words (the stack limit drops to 0,
//! the exit depth rises to the top), so the VM's own check fails and sends it
//! to its slow path, which serves the flag. This is the stack-limit trick V8
//! and Jikes RVM use for interrupts.
//!
//! Bits are set by signal handlers (timer tick, SIGINT) and cleared by the
//! VM thread when it has served the request.

use std::sync::atomic::{AtomicPtr, AtomicU8, AtomicUsize, Ordering};

/// A method sample is pending (polling mechanism): served at the next
/// yieldpoint of any kind.
pub const SAMPLE: u8 = 1 << 0;
/// A counter-based-sampling window is open: only prologues (and epilogues)
/// need to look, since CBS samples call edges.
pub const CBS_WINDOW: u8 = 1 << 1;
/// The sample ring is filling up: drain it at the next yieldpoint.
pub const DRAIN: u8 = 1 << 2;
/// SIGINT arrived: flush the profile and stop at the next yieldpoint.
pub const STOP: u8 = 1 << 3;

/// Exhaustive counting is on: every prologue goes out of line for the
/// exact call counts. Raised once for the whole run.
pub const EXACT: u8 = 1 << 4;

/// The VM's own request, raised and lowered by its thread alone: its running
/// dispatch loop is not the one it wants (say a CBS window closed where the
/// loop could not switch), so the next call should take the slow path where
/// the loop can hand over. Without it the VM would stay in the slower loop
/// until the next tick.
pub const HANDOFF: u8 = 1 << 5;

/// The VM's adaptive optimizer wants the VM thread: recompilation decisions
/// wait to be turned into compile requests, or code was installed that a
/// running loop may move into (on-stack replacement). Raised by the
/// optimizer's threads, served at any yieldpoint.
pub const CONTROLLER: u8 = 1 << 6;

/// The bits that loop back-edges must act on. `CBS_WINDOW` is absent on
/// purpose: that is the "prologue/epilogue-only" level of the flag.
pub const ALL_YIELDPOINTS: u8 = SAMPLE | DRAIN | STOP | CONTROLLER;

/// What a yieldpoint of a given kind must do, given one load of the flag.
/// Three levels: 0 (nothing), prologue/epilogue-only, all yieldpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Nothing,
    CallsOnly,
    All,
}

/// How many [`TripWord`]s one flag can trip: a stack limit and an exit depth.
pub const MAX_TRIP_WORDS: usize = 2;

pub struct YieldpointFlag {
    bits: AtomicU8,
    /// Words tripped with every raise. Null or pointing at a live word, under
    /// the contract of [`YieldpointFlag::attach`].
    trips: [AtomicPtr<TripWord>; MAX_TRIP_WORDS],
}

impl Default for YieldpointFlag {
    fn default() -> Self {
        YieldpointFlag::new()
    }
}

impl YieldpointFlag {
    pub const fn new() -> YieldpointFlag {
        YieldpointFlag {
            bits: AtomicU8::new(0),
            trips: [
                AtomicPtr::new(std::ptr::null_mut()),
                AtomicPtr::new(std::ptr::null_mut()),
            ],
        }
    }

    /// The fast-path read. Relaxed: a request seen one yieldpoint late is
    /// harmless, and a relaxed byte load is as cheap as a plain one.
    #[inline(always)]
    pub fn load(&self) -> u8 {
        self.bits.load(Ordering::Relaxed)
    }

    /// The flag's byte, for compiled code that tests it with a plain load (as relaxed as
    /// [`YieldpointFlag::load`]).
    pub fn bits_address(&self) -> *const u8 {
        self.bits.as_ptr()
    }

    #[inline(always)]
    pub fn level(&self) -> Level {
        level_of(self.load())
    }

    /// Sets `bits`, returning the previous value (so a handler can tell a
    /// fresh request from one that coalesced with a pending request), and
    /// trips the attached words. Async-signal-safe: atomics only.
    #[inline]
    pub fn raise(&self, bits: u8) -> u8 {
        self.raise_around(bits, || {})
    }

    /// `raise`, with `between` run after the bits are set and before the words are tripped:
    /// the window in which another thread may serve and clear them, which tests widen.
    #[inline(always)]
    fn raise_around(&self, bits: u8, between: impl FnOnce()) -> u8 {
        let previous = self.bits.fetch_or(bits, Ordering::SeqCst);
        between();
        self.trip_words();
        previous
    }

    /// Clears `bits`, returning the previous value. When no bit is left the
    /// attached words are re-armed; a raise that races with this is not lost
    /// (the words are tripped again if a bit turned up meanwhile).
    #[inline]
    pub fn clear(&self, bits: u8) -> u8 {
        let previous = self.bits.fetch_and(!bits, Ordering::SeqCst);
        if previous & !bits == 0 {
            self.rearm_words();
        }
        previous
    }

    /// Makes every raise of this flag trip `word`, and trips it now if a bit
    /// is already up. Fails when [`MAX_TRIP_WORDS`] words are attached.
    ///
    /// # Safety
    /// `word` must stay alive and unmoved until [`YieldpointFlag::detach_all`]
    /// has returned and no thread can still be raising this flag through an
    /// earlier load of the pointer (stop the triggers before detaching).
    pub unsafe fn attach(&self, word: &TripWord) -> Result<(), AttachError> {
        let ptr = word as *const TripWord as *mut TripWord;
        for slot in &self.trips {
            if slot
                .compare_exchange(
                    std::ptr::null_mut(),
                    ptr,
                    Ordering::SeqCst,
                    Ordering::SeqCst,
                )
                .is_ok()
            {
                if self.bits.load(Ordering::SeqCst) != 0 {
                    word.trip();
                }
                return Ok(());
            }
        }
        Err(AttachError)
    }

    /// Re-arms and forgets every attached word, so a VM that runs on without
    /// its profiler is not left on its slow paths.
    pub fn detach_all(&self) {
        for slot in &self.trips {
            let ptr = slot.swap(std::ptr::null_mut(), Ordering::SeqCst);
            if !ptr.is_null() {
                // SAFETY: it was attached, so it is still alive (contract of `attach`).
                unsafe { &*ptr }.rearm();
            }
        }
    }

    fn trip_words(&self) {
        self.for_each_word(TripWord::trip);
    }

    /// Re-arms the words when no bit is up: for the VM thread's slow paths, which a word
    /// tripped with no bit up sends there with nothing to serve. That happens when the VM
    /// thread serves and clears a request between the raising thread's `fetch_or` and its
    /// trips (it reads the byte at back-edges, so it can): the clear's re-arm comes first and
    /// the trips stay, and every call and return would take the slow paths until the next
    /// raise, which a program with nothing left to compile may never see. The VM thread
    /// only: the thread that changes the armed values (`TripWord::set_armed`) is the one
    /// that may store them without a stale one landing after a new one.
    pub fn rearm_if_idle(&self) {
        if self.bits.load(Ordering::SeqCst) == 0 {
            self.rearm_words();
        }
    }

    /// Re-arms every word after the bits were seen all clear; trips them again if a bit
    /// turned up meanwhile (that raise's own trip may have landed before this re-arm).
    fn rearm_words(&self) {
        self.for_each_word(TripWord::rearm);
        if self.bits.load(Ordering::SeqCst) != 0 {
            self.trip_words();
        }
    }

    fn for_each_word(&self, f: impl Fn(&TripWord)) {
        for slot in &self.trips {
            let ptr = slot.load(Ordering::SeqCst);
            if !ptr.is_null() {
                // SAFETY: a non-null slot points at a live word, by the
                // contract of `attach`.
                f(unsafe { &*ptr });
            }
        }
    }
}

/// Every trip slot of the flag is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AttachError;

impl std::fmt::Display for AttachError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the yieldpoint flag already trips {MAX_TRIP_WORDS} words"
        )
    }
}

impl std::error::Error for AttachError {}

/// A bound the VM compares against on a hot path anyway (a stack limit, the
/// depth at which its loop returns), which the yieldpoint flag can *trip*:
/// while any bit is raised the word reads `tripped`, a value chosen so that
/// the VM's comparison fails and its slow path serves the flag.
///
/// The word's one state is its value: it is tripped exactly when it reads
/// `tripped` (which no armed value may equal). Raising threads only ever store
/// `tripped`; the VM thread stores armed values, and only over a value that is
/// not `tripped` (a compare-and-swap), so a trip is never overwritten except by
/// the flag's re-arm ([`YieldpointFlag::clear`] of the last bit, or
/// [`YieldpointFlag::rearm_if_idle`]), which checks the bits again afterwards
/// and stores the armed value again if the VM thread changed it meanwhile.
/// A word cannot be left marked tripped while reading an old armed value, which
/// would hide every later [`TripWord::set_armed`] until the next re-arm.
pub struct TripWord {
    value: AtomicUsize,
    armed: AtomicUsize,
    tripped: usize,
}

impl TripWord {
    /// Where the current value (what [`TripWord::get`] reads) sits in the word, for compiled
    /// code that checks it inline.
    pub const VALUE_OFFSET: usize = std::mem::offset_of!(TripWord, value);

    /// `armed` must differ from `tripped`.
    pub const fn new(armed: usize, tripped: usize) -> TripWord {
        assert!(armed != tripped, "an armed value that reads as tripped");
        TripWord {
            value: AtomicUsize::new(armed),
            armed: AtomicUsize::new(armed),
            tripped,
        }
    }

    /// The bound as the hot path reads it: the armed value, or the tripped
    /// one while a flag bit is up.
    #[inline(always)]
    pub fn get(&self) -> usize {
        self.value.load(Ordering::Relaxed)
    }

    /// The value the word holds while nothing is wanted.
    pub fn armed(&self) -> usize {
        self.armed.load(Ordering::Relaxed)
    }

    /// Whether a raised flag bit has tripped the word.
    pub fn is_tripped(&self) -> bool {
        self.value.load(Ordering::SeqCst) == self.tripped
    }

    /// Changes the armed value (the VM thread only), answering the old one.
    /// A trip that races with this wins: the word ends up tripped. `armed`
    /// must differ from the tripped value.
    pub fn set_armed(&self, armed: usize) -> usize {
        debug_assert_ne!(armed, self.tripped, "an armed value that reads as tripped");
        let old = self.armed.swap(armed, Ordering::SeqCst);
        let mut now = self.value.load(Ordering::SeqCst);
        while now != self.tripped {
            match self
                .value
                .compare_exchange_weak(now, armed, Ordering::SeqCst, Ordering::SeqCst)
            {
                Ok(_) => break,
                Err(seen) => now = seen,
            }
        }
        old
    }

    fn trip(&self) {
        self.value.store(self.tripped, Ordering::SeqCst);
    }

    /// Any thread that clears the flag's last bit (the drain thread does, for
    /// [`DRAIN`]). A trip this overwrites was a raise of a bit just cleared (so
    /// it is being served), or `clear` trips again. The armed value read may be
    /// replaced by the VM thread ([`TripWord::set_armed`]) before the store
    /// lands: the store is then repeated with the new one, or an exit depth
    /// would be left at an enclosing loop's and a loop would run on below its
    /// base, into its caller's frames.
    fn rearm(&self) {
        loop {
            let armed = self.armed.load(Ordering::SeqCst);
            self.value.store(armed, Ordering::SeqCst);
            if self.armed.load(Ordering::SeqCst) == armed {
                return;
            }
        }
    }
}

/// Classifies an already-loaded flag value.
#[inline(always)]
pub fn level_of(value: u8) -> Level {
    if value == 0 {
        Level::Nothing
    } else if value & ALL_YIELDPOINTS == 0 {
        Level::CallsOnly
    } else {
        Level::All
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_the_bits() {
        let f = YieldpointFlag::new();
        assert_eq!(f.level(), Level::Nothing);
        f.raise(CBS_WINDOW);
        assert_eq!(f.level(), Level::CallsOnly);
        assert_eq!(f.load() & ALL_YIELDPOINTS, 0, "back-edges stay quiet");
        let before = f.raise(SAMPLE);
        assert_eq!(before, CBS_WINDOW);
        assert_eq!(f.level(), Level::All);
        f.clear(SAMPLE | CBS_WINDOW);
        assert_eq!(f.level(), Level::Nothing);
    }

    #[test]
    fn raising_trips_attached_words_and_clearing_the_last_bit_rearms_them() {
        let f = YieldpointFlag::new();
        let limit = TripWord::new(1000, 0);
        let exit = TripWord::new(3, usize::MAX);
        // SAFETY: both words outlive the flag's use in this test; detached below.
        unsafe {
            f.attach(&limit).unwrap();
            f.attach(&exit).unwrap();
        }
        assert_eq!((limit.get(), exit.get()), (1000, 3));
        f.raise(CBS_WINDOW);
        assert_eq!((limit.get(), exit.get()), (0, usize::MAX));
        f.raise(SAMPLE);
        f.clear(SAMPLE);
        assert_eq!(limit.get(), 0, "a bit is still up: the words stay tripped");
        f.clear(CBS_WINDOW);
        assert_eq!((limit.get(), exit.get()), (1000, 3));
        f.raise(SAMPLE);
        f.detach_all();
        assert_eq!(limit.get(), 1000, "detaching re-arms");
        f.raise(SAMPLE);
        assert_eq!(limit.get(), 1000, "a detached word is left alone");
    }

    #[test]
    fn a_word_attached_while_a_bit_is_up_starts_tripped() {
        let f = YieldpointFlag::new();
        f.raise(EXACT);
        let limit = TripWord::new(64, 0);
        // SAFETY: the word outlives the flag's use in this test; detached below.
        unsafe { f.attach(&limit).unwrap() };
        assert!(limit.is_tripped());
        assert_eq!(limit.get(), 0);
        f.detach_all();
    }

    #[test]
    fn only_two_words_attach() {
        let f = YieldpointFlag::new();
        let words = [
            TripWord::new(1, 0),
            TripWord::new(2, 0),
            TripWord::new(3, 0),
        ];
        // SAFETY: the words outlive the flag's use in this test; detached below.
        unsafe {
            assert!(f.attach(&words[0]).is_ok());
            assert!(f.attach(&words[1]).is_ok());
            assert_eq!(f.attach(&words[2]), Err(AttachError));
        }
        f.detach_all();
    }

    #[test]
    fn setting_the_armed_value_keeps_a_trip() {
        let f = YieldpointFlag::new();
        let exit = TripWord::new(0, usize::MAX);
        // SAFETY: the word outlives the flag's use in this test; detached below.
        unsafe { f.attach(&exit).unwrap() };
        assert_eq!(exit.set_armed(5), 0);
        assert_eq!(exit.get(), 5);
        f.raise(DRAIN);
        assert_eq!(exit.set_armed(7), 5);
        assert_eq!(exit.get(), usize::MAX, "still tripped");
        f.clear(DRAIN);
        assert_eq!(exit.get(), 7, "re-armed with the new value");
        f.detach_all();
    }

    /// A raise of a bit the VM thread is clearing, from another thread, must
    /// not leave the exit depth reading an old armed value: the VM would run
    /// past the depth its loop must return at (and resume a frame whose
    /// activation is suspended below it).
    #[test]
    fn a_raise_racing_with_a_clear_never_hides_a_new_armed_value() {
        use std::sync::atomic::AtomicBool;
        use std::sync::Arc;
        let f = Arc::new(YieldpointFlag::new());
        let exit = Box::leak(Box::new(TripWord::new(0, usize::MAX)));
        // SAFETY: the word is leaked (it lives for the rest of the process), and the
        // raising thread is joined before the word is detached.
        unsafe { f.attach(exit).unwrap() };
        let done = Arc::new(AtomicBool::new(false));
        let raiser = {
            let (f, done) = (f.clone(), done.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    f.raise(CONTROLLER);
                }
            })
        };
        let mut stale = 0;
        for depth in 1..400_000usize {
            f.clear(CONTROLLER);
            exit.set_armed(depth);
            let v = exit.get();
            if v != depth && v != usize::MAX {
                stale += 1;
            }
        }
        done.store(true, Ordering::Relaxed);
        raiser.join().unwrap();
        f.detach_all();
        assert_eq!(stale, 0, "the word read an old armed value");
    }

    /// The VM thread reads the flag's byte at back-edges, so it can serve and clear a
    /// request between the raising thread's `fetch_or` and its trips, which then stay with
    /// no bit up. The VM's slow paths re-arm them (`rearm_if_idle`); a bit still up keeps
    /// them tripped.
    #[test]
    fn words_a_late_trip_left_tripped_with_no_bit_up_are_rearmed_by_the_vm() {
        let f = YieldpointFlag::new();
        let limit = TripWord::new(1000, 0);
        let exit = TripWord::new(3, usize::MAX);
        // SAFETY: both words outlive the flag's use in this test; detached below.
        unsafe {
            f.attach(&limit).unwrap();
            f.attach(&exit).unwrap();
        }
        f.raise_around(CONTROLLER, || {
            f.clear(CONTROLLER);
        });
        assert_eq!(f.load(), 0);
        assert_eq!(
            (limit.get(), exit.get()),
            (0, usize::MAX),
            "the late trips stay"
        );
        f.rearm_if_idle();
        assert_eq!(
            (limit.get(), exit.get()),
            (1000, 3),
            "tripped with no bit up"
        );
        // A bit still up keeps them tripped.
        f.raise(SAMPLE);
        f.rearm_if_idle();
        assert_eq!((limit.get(), exit.get()), (0, usize::MAX));
        f.clear(SAMPLE);
        assert_eq!((limit.get(), exit.get()), (1000, 3));
        f.detach_all();
    }

    #[test]
    fn a_second_raise_reports_coalescing() {
        let f = YieldpointFlag::new();
        assert_eq!(f.raise(SAMPLE) & SAMPLE, 0);
        assert_eq!(f.raise(SAMPLE) & SAMPLE, SAMPLE);
    }
}
