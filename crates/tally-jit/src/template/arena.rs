//! Executable memory for the template compiler's functions: one region mapped readable,
//! writable and executable at once, as HotSpot maps its code cache on Linux, and filled
//! from the front. A function is copied in whole before its address is published, and no
//! byte of a placed function is written again, so code that runs never sees a write and no
//! page changes protection (no `mprotect` per compile, no page left half used between
//! compiles). Code is never freed: an invalidated version may still have activations.

/// Address space reserved for the baseline tier's code at the first compile: pages are
/// backed (and counted as resident) only once code is written into them. One region keeps
/// every function within a 32-bit displacement of the shared routines it calls.
const REGION_BYTES: usize = 256 << 20;
/// Functions start on this boundary (the processor fetches code in 16-byte blocks).
const FUNCTION_ALIGN: usize = 16;

/// The region, filled from the front up to `used`.
pub(crate) struct CodeArena {
    start: *mut u8,
    used: usize,
}

// SAFETY: the arena owns its mapping; the pointer is the address of memory no other owner
// frees, and the compiler that holds the arena is used from one thread at a time.
unsafe impl Send for CodeArena {}

impl CodeArena {
    /// Reserves the region.
    pub(crate) fn new() -> Result<CodeArena, String> {
        // SAFETY: an anonymous private mapping at an address the kernel chooses, without
        // swap reserved for it; the answer is checked before use.
        let start = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                REGION_BYTES,
                libc::PROT_READ | libc::PROT_WRITE | libc::PROT_EXEC,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if start == libc::MAP_FAILED {
            return Err(format!(
                "cannot map {} MiB of address space for code: {}",
                REGION_BYTES >> 20,
                std::io::Error::last_os_error()
            ));
        }
        Ok(CodeArena {
            start: start.cast(),
            used: 0,
        })
    }

    /// Where the next function will be placed: code is assembled for its address.
    pub(crate) fn next_address(&self) -> usize {
        self.start as usize + align_up(self.used)
    }

    /// Copies `code`, assembled for `at` (the [`next_address`](Self::next_address) when it
    /// was assembled), into executable memory there.
    pub(crate) fn place(&mut self, at: usize, code: &[u8]) -> Result<(), String> {
        let offset = align_up(self.used);
        if at != self.start as usize + offset {
            return Err("code assembled for another address".into());
        }
        if offset + code.len() > REGION_BYTES {
            return Err(format!(
                "the {} MiB of baseline code space are full",
                REGION_BYTES >> 20
            ));
        }
        // SAFETY: `offset + code.len() <= REGION_BYTES` (checked above), the region is mapped
        // writable for its whole length, and no function was placed at or after `offset`, so
        // nothing runs in the bytes written.
        unsafe {
            std::ptr::copy_nonoverlapping(code.as_ptr(), self.start.add(offset), code.len());
        }
        self.used = offset + code.len();
        Ok(())
    }
}

impl Drop for CodeArena {
    fn drop(&mut self) {
        // A compiler is dropped with its VM, when no compiled code can run any more.
        // SAFETY: `start` and `REGION_BYTES` are what `mmap` answered and was asked for.
        unsafe {
            libc::munmap(self.start.cast(), REGION_BYTES);
        }
    }
}

fn align_up(n: usize) -> usize {
    n.next_multiple_of(FUNCTION_ALIGN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn functions_are_aligned_do_not_overlap_and_stay_where_they_were_assembled_for() {
        let mut arena = CodeArena::new().unwrap();
        let a = arena.next_address();
        arena.place(a, &[0xc3; 5]).unwrap();
        let b = arena.next_address();
        arena.place(b, &[0xc3; 40]).unwrap();
        assert_eq!(a % FUNCTION_ALIGN, 0);
        assert_eq!(b % FUNCTION_ALIGN, 0);
        assert!(b >= a + 5);
        // SAFETY: both were placed in mapped, readable memory.
        let copied = unsafe { std::slice::from_raw_parts(b as *const u8, 40) };
        assert!(copied.iter().all(|&x| x == 0xc3));
        assert!(arena.place(a, &[0xc3]).is_err());
    }
}
