//! Choosing a trigger for a rate when the user did not name one.
//!
//! Each tick costs what the kernel spends delivering it, and a perf_events tick costs the
//! kernel more than a thread CPU-time timer tick, so the timer is the cheaper trigger at any
//! rate it can reach. But CPU-time timers expire only on the scheduler tick (`CONFIG_HZ`), so
//! they cannot go faster than it; above it only perf_events reaches the rate asked for.

use std::io::Read;

use super::{TimerClock, Trigger};

/// The trigger for `rate_hz` ticks per second of CPU time, and why, for the profile header.
pub fn auto_trigger(rate_hz: u32) -> (Trigger, String) {
    choose(rate_hz, kernel_tick_hz())
}

fn choose(rate_hz: u32, tick_hz: Option<u32>) -> (Trigger, String) {
    let perf = Trigger::Perf {
        prefer_hardware: true,
    };
    match tick_hz {
        Some(hz) if rate_hz <= hz => (
            Trigger::Timer(TimerClock::ThreadCpu),
            format!(
                "auto: the thread CPU-time timer, the cheapest trigger, reaches {rate_hz} Hz on this kernel (CONFIG_HZ={hz})"
            ),
        ),
        Some(hz) => (
            perf,
            format!(
                "auto: perf_events, since {rate_hz} Hz is above the kernel tick (CONFIG_HZ={hz}) that caps CPU-time timers"
            ),
        ),
        None => (
            perf,
            "auto: perf_events, since the kernel tick that caps CPU-time timers is unknown (no kernel config found)".to_string(),
        ),
    }
}

/// The kernel's scheduler tick rate (`CONFIG_HZ`), from the running kernel's configuration in
/// `/proc/config.gz` or `/boot/config-<release>`; `None` where neither is readable.
pub fn kernel_tick_hz() -> Option<u32> {
    if let Ok(file) = std::fs::File::open("/proc/config.gz") {
        let mut text = String::new();
        if flate2::read::GzDecoder::new(file)
            .read_to_string(&mut text)
            .is_ok()
        {
            if let Some(hz) = config_hz(&text) {
                return Some(hz);
            }
        }
    }
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").ok()?;
    let text = std::fs::read_to_string(format!("/boot/config-{}", release.trim())).ok()?;
    config_hz(&text)
}

/// `CONFIG_HZ=N` from a kernel configuration.
fn config_hz(config: &str) -> Option<u32> {
    config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .and_then(|v| v.trim().parse().ok())
        .filter(|&hz| hz > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_tick_from_a_kernel_config() {
        let config = "# CONFIG_HZ_100 is not set\nCONFIG_HZ_250=y\nCONFIG_HZ=250\nCONFIG_NO_HZ=y\n";
        assert_eq!(config_hz(config), Some(250));
        assert_eq!(config_hz("CONFIG_HZ_1000=y\n"), None);
        assert_eq!(config_hz("CONFIG_HZ=zero\n"), None);
    }

    #[test]
    fn the_timer_up_to_the_kernel_tick_and_perf_above_it() {
        let (t, why) = choose(250, Some(250));
        assert_eq!(t, Trigger::Timer(TimerClock::ThreadCpu));
        assert!(why.contains("CONFIG_HZ=250"), "{why}");
        let (t, why) = choose(251, Some(250));
        assert!(matches!(t, Trigger::Perf { .. }));
        assert!(why.contains("above the kernel tick"), "{why}");
        let (t, _) = choose(1000, Some(1000));
        assert_eq!(t, Trigger::Timer(TimerClock::ThreadCpu));
        let (t, why) = choose(100, None);
        assert!(matches!(t, Trigger::Perf { .. }));
        assert!(why.contains("unknown"), "{why}");
    }
}
