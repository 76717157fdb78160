//! The runner's figures for a VM are the VM's own, however large the runner is.
//!
//! Its own `main` (no test harness): the binary is the spawner the runner starts VMs through
//! (`spawner.rs`), so it must serve before doing anything else.

use std::sync::atomic::AtomicBool;
use tally_bench::measure::run_process;
use tally_bench::spawner;

/// How much larger than a shell this process makes itself before it runs one.
const BALLAST_BYTES: usize = 96 << 20;

fn sh(script: &str) -> Vec<String> {
    vec!["sh".into(), "-c".into(), script.into()]
}

fn main() {
    spawner::serve_if_asked();
    let never = AtomicBool::new(false);
    // Resident: every page written.
    let ballast = vec![1u8; BALLAST_BYTES];
    let ballast_kib = (BALLAST_BYTES / 1024) as u64;

    // Started directly, a small child reads as at least this process.
    let direct = run_process(&sh("exit 0"), None, &never).expect("sh starts");
    assert!(
        direct.max_rss_kib >= ballast_kib,
        "the kernel's accounting changed: a child started directly reads {} KiB",
        direct.max_rss_kib
    );

    spawner::spawn_through(std::env::current_exe().expect("this test's executable"));
    let run = run_process(&sh("echo out; echo err >&2; exit 3"), None, &never).expect("sh starts");
    assert_eq!((run.exit_code, run.signal), (Some(3), None));
    assert_eq!(
        (run.stdout.as_str(), run.stderr.as_str()),
        ("out\n", "err\n")
    );
    assert!(
        run.max_rss_kib > 0 && run.max_rss_kib < ballast_kib / 4,
        "a shell started through the spawner reads {} KiB",
        run.max_rss_kib
    );

    // Its CPU time is the VM's, and a VM that cannot start is an error as without spawner.
    let busy = run_process(
        &sh("i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"),
        None,
        &never,
    )
    .expect("sh starts");
    assert!(busy.cpu_s() > 0.05, "{:?}", busy);
    let missing = run_process(&["/nonexistent/vm".to_string()], None, &never);
    assert_eq!(
        missing.map(|r| r.exit_code).unwrap_err().kind(),
        std::io::ErrorKind::NotFound
    );
    drop(ballast);
    println!("spawner: ok");
}
