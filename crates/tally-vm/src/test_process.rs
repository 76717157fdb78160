//! Unit tests that need the process to themselves: MMTk allows one heap per process, and
//! the process CPU clock counts every thread. Each such test re-runs its own binary with a
//! filter for just itself, so the test harness's other threads cannot interfere.

const CHILD: &str = "TALLY_TEST_IN_OWN_PROCESS";

/// Runs `body` in a fresh process of this test binary; `name` is the test's full path (as
/// `cargo test` prints it). In the child, `body` runs directly.
pub(crate) fn in_own_process(name: &str, body: impl FnOnce()) {
    if std::env::var_os(CHILD).is_some() {
        body();
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let out = std::process::Command::new(exe)
        .args([name, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, "1")
        .output()
        .expect("the test binary runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("1 passed"),
        "{name} failed in its own process ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}
