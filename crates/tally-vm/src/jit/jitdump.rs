//! `--jitdump`: perf's jitdump format (`tools/perf/Documentation/jitdump-specification.txt`
//! in the Linux sources), so `perf inject --jit` can turn compiled functions into symbols with
//! source lines. The file is `jit-PID.dump`; the process maps it executable once, which is
//! how `perf record` notices it (the mapping is the marker `perf inject` looks for).
//! Timestamps are `CLOCK_MONOTONIC`: record with `perf record -k mono`.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

const MAGIC: u32 = 0x4A69_5444;
const VERSION: u32 = 1;
const HEADER_SIZE: u32 = 40;
const CODE_LOAD: u32 = 0;
const DEBUG_INFO: u32 = 2;
/// ELF machine numbers.
#[cfg(target_arch = "x86_64")]
const ELF_MACHINE: u32 = 62;
#[cfg(target_arch = "aarch64")]
const ELF_MACHINE: u32 = 183;
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ELF_MACHINE: u32 = 0;

/// One line of debug information: machine address → source file and line.
pub(crate) struct DebugLine<'a> {
    pub address: u64,
    pub line: u32,
    pub file: &'a str,
}

pub(crate) struct JitDump {
    out: BufWriter<File>,
    pid: u32,
    next_index: u64,
    /// The address of the executable mapping of the file's first page, kept for the life of
    /// the dump (an address, so the dump may move to the compiler thread).
    marker: usize,
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl JitDump {
    /// Creates `dir/jit-PID.dump` (never replacing a file) and writes its header.
    pub(crate) fn create(dir: &Path) -> std::io::Result<(JitDump, PathBuf)> {
        let pid = std::process::id();
        let path = dir.join(format!("jit-{pid}.dump"));
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)?;
        let mut out = BufWriter::new(file);
        let mut header = Vec::with_capacity(HEADER_SIZE as usize);
        for word in [MAGIC, VERSION, HEADER_SIZE, ELF_MACHINE, 0, pid] {
            header.extend_from_slice(&word.to_ne_bytes());
        }
        header.extend_from_slice(&monotonic_ns().to_ne_bytes());
        header.extend_from_slice(&0u64.to_ne_bytes());
        out.write_all(&header)?;
        out.flush()?;
        let fd = std::os::fd::AsRawFd::as_raw_fd(out.get_ref());
        // SAFETY: maps the first page of a file we own, read-only and executable, private;
        // nothing reads or writes through the mapping (it only tells perf about the file).
        let marker = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                4096,
                libc::PROT_READ | libc::PROT_EXEC,
                libc::MAP_PRIVATE,
                fd,
                0,
            )
        };
        if marker == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok((
            JitDump {
                out,
                pid,
                next_index: 0,
                marker: marker as usize,
            },
            path,
        ))
    }

    /// Records one compiled function: its debug lines, then its code (perf wants the lines
    /// first).
    pub(crate) fn code_loaded(
        &mut self,
        name: &str,
        code: &[u8],
        lines: &[DebugLine<'_>],
    ) -> std::io::Result<()> {
        let address = code.as_ptr() as u64;
        let now = monotonic_ns();
        if !lines.is_empty() {
            let mut body = Vec::new();
            body.extend_from_slice(&address.to_ne_bytes());
            body.extend_from_slice(&(lines.len() as u64).to_ne_bytes());
            for l in lines {
                body.extend_from_slice(&l.address.to_ne_bytes());
                body.extend_from_slice(&l.line.to_ne_bytes());
                body.extend_from_slice(&0u32.to_ne_bytes());
                body.extend_from_slice(l.file.as_bytes());
                body.push(0);
            }
            self.record(DEBUG_INFO, now, &body)?;
        }
        let mut body = Vec::with_capacity(40 + name.len() + 1 + code.len());
        body.extend_from_slice(&self.pid.to_ne_bytes());
        body.extend_from_slice(&gettid().to_ne_bytes());
        for word in [address, address, code.len() as u64, self.next_index] {
            body.extend_from_slice(&word.to_ne_bytes());
        }
        body.extend_from_slice(name.as_bytes());
        body.push(0);
        body.extend_from_slice(code);
        self.next_index += 1;
        self.record(CODE_LOAD, now, &body)?;
        self.out.flush()
    }

    fn record(&mut self, id: u32, time: u64, body: &[u8]) -> std::io::Result<()> {
        let total = (16 + body.len()) as u32;
        self.out.write_all(&id.to_ne_bytes())?;
        self.out.write_all(&total.to_ne_bytes())?;
        self.out.write_all(&time.to_ne_bytes())?;
        self.out.write_all(body)
    }
}

fn gettid() -> u32 {
    // SAFETY: gettid has no preconditions.
    (unsafe { libc::syscall(libc::SYS_gettid) }) as u32
}

impl Drop for JitDump {
    fn drop(&mut self) {
        let _ = self.out.flush();
        // SAFETY: `marker` is the mapping made in `create`, unmapped only here.
        unsafe { libc::munmap(self.marker as *mut libc::c_void, 4096) };
    }
}
