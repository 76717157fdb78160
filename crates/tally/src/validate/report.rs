//! What `tally validate` found, and its report: `validate.md` (the tables, also printed) and
//! `validate.json` (every figure and every run).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tally_vm::tally_profile::validation::Place;

use super::Config;

/// The delay loop checked before the sweep: what the VM says it injected against the extra
/// CPU time the delayed runs took.
pub(super) struct DelayCheck {
    pub tier: String,
    pub method: String,
    /// The loop's cost per iteration, as the VM calibrated it at start-up.
    pub ns_per_iteration: f64,
    pub injected_ms: f64,
    pub measured_ms: f64,
    /// Half the width of the measured difference's 95 % interval (normal approximation).
    pub measured_pm_ms: f64,
}

/// One place and amount in one configuration.
pub(super) struct PlaceResult {
    pub place: Place,
    /// Percent of the tier's CPU time.
    pub amount: f64,
    /// One attribution error per run (0 exact, −1 none credited).
    pub errors: Vec<f64>,
    /// Runs in which the place had the rank among the top 5 the delay gives it.
    pub ranked_as_expected: usize,
    /// What each baseline run credited the place, what each delayed run credited it, and
    /// the extra delay each injected (ns).
    pub credited_without_ns: Vec<f64>,
    pub credited_with_ns: Vec<f64>,
    pub injected_ns: Vec<f64>,
    /// Samples that fell in the delay on average, had it been credited exactly.
    pub samples_in_delay: f64,
}

/// One configuration's results.
pub(super) struct ConfigResult {
    pub config: Config,
    /// What one sample cost the program (ns), taken out of the time each sample stands for.
    pub sample_cost_ns: f64,
    /// CPU time of its profiled runs without a delay (s).
    pub cpu_s: f64,
    pub places: Vec<PlaceResult>,
    /// Median error over every place, amount and run, with its 95 % bootstrap interval.
    pub median: Option<(f64, f64, f64)>,
}

impl ConfigResult {
    pub fn new(config: Config, sample_cost_ns: f64, cpu_s: f64, places: Vec<PlaceResult>) -> Self {
        let all: Vec<f64> = places.iter().flat_map(|p| p.errors.clone()).collect();
        ConfigResult {
            config,
            sample_cost_ns,
            cpu_s,
            median: median_ci(&all),
            places,
        }
    }

    /// Whether its median error is beyond `threshold` (a fraction).
    pub fn flagged(&self, threshold: f64) -> bool {
        self.median.is_some_and(|m| m.0.abs() > threshold)
    }

    /// The median and its interval, as a table cell.
    fn median_cell(&self) -> String {
        match self.median {
            Some((m, lo, hi)) => format!("{} [{}, {}]", pct(m), pct(lo), pct(hi)),
            None => "–".into(),
        }
    }

    /// "yes" when its median error is within `threshold`, as a table cell.
    fn within(&self, threshold: f64) -> &'static str {
        if self.flagged(threshold) {
            "no"
        } else {
            "yes"
        }
    }

    /// Why it errs, where the reason is known.
    fn reason(&self) -> Option<String> {
        if self.config.broken {
            return Some("the broken sampler credits each sample to the caller".into());
        }
        if self.config.is_cbs() {
            let unseen: Vec<&str> = self
                .places
                .iter()
                .filter(|p| p.errors.is_empty())
                .map(|p| p.place.method.as_str())
                .collect();
            return (!unseen.is_empty()).then(|| {
                let mut unseen = unseen;
                unseen.dedup();
                format!("CBS saw no call into {}", unseen.join(", "))
            });
        }
        if self.config.mechanism == "polling" {
            let worst = self
                .places
                .iter()
                .min_by(|a, b| super::mean(&a.errors).total_cmp(&super::mean(&b.errors)));
            let at = worst
                .map(|p| {
                    format!(
                        " (at `{}`: {})",
                        p.place.method,
                        pct(super::mean(&p.errors))
                    )
                })
                .unwrap_or_default();
            return Some(format!(
                "polling takes each sample at the next yieldpoint, and a delay has none in \
                 it: its samples go to the method that reaches one next, the place only \
                 where a yieldpoint follows the delay in it{at}"
            ));
        }
        let samples = self.mean_samples_in_delay();
        (samples < 100.0).then(|| {
            format!(
                "few samples fall in a delay ({samples:.0} on average): the error is noisy \
                 (larger --amounts or longer runs put more in it)"
            )
        })
    }

    fn mean_samples_in_delay(&self) -> f64 {
        let v: Vec<f64> = self.places.iter().map(|p| p.samples_in_delay).collect();
        super::mean(&v)
    }

    fn ranked(&self) -> (usize, usize) {
        self.places.iter().fold((0, 0), |(k, n), p| {
            (k + p.ranked_as_expected, n + p.errors.len())
        })
    }
}

/// The median of `errors` with a 95 % bootstrap interval; `None` for fewer than two.
pub(super) fn median_ci(errors: &[f64]) -> Option<(f64, f64, f64)> {
    let ci = tally_stats::bootstrap_ci(
        errors.len(),
        0.95,
        tally_stats::Bootstrap::default(),
        |idx| {
            let v: Vec<f64> = idx.iter().map(|&i| errors[i]).collect();
            tally_stats::median(&v).unwrap_or(f64::NAN)
        },
    )
    .ok()?;
    Some((ci.estimate, ci.lower, ci.upper))
}

/// Everything `tally validate` found.
pub(super) struct Report {
    pub program: Vec<String>,
    pub amounts: Vec<f64>,
    pub runs: u32,
    /// A fraction.
    pub threshold: f64,
    pub places: Vec<Place>,
    /// Unprofiled CPU time per tier (s).
    pub cpu_s: BTreeMap<String, f64>,
    pub delay_check: DelayCheck,
    pub configs: Vec<ConfigResult>,
}

fn pct(x: f64) -> String {
    format!("{:+.1} %", x * 100.0)
}

impl Report {
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "# tally validate: {}\n", self.program.join(" "));
        let _ = writeln!(out, "## Places\n");
        let _ = writeln!(out, "| place | role | self share | calls |");
        let _ = writeln!(out, "| --- | --- | ---: | ---: |");
        for p in &self.places {
            let _ = writeln!(
                out,
                "| `{}` | {:?} | {:.1} % | {} |",
                p.method,
                p.role,
                p.share * 100.0,
                p.calls
            );
        }
        let cpu: Vec<String> = self
            .cpu_s
            .iter()
            .map(|(t, s)| format!("{t} {s:.2} s"))
            .collect();
        let amounts: Vec<String> = self.amounts.iter().map(|a| format!("{a}")).collect();
        let _ = writeln!(
            out,
            "\nSelf share and calls from an exhaustive interpreted run. Delays: {} % of the \
             program's CPU time in the tier ({}), spread over the place's calls; {} runs each.\n",
            amounts.join(", "),
            cpu.join(", "),
            self.runs
        );
        let d = &self.delay_check;
        let _ = writeln!(
            out,
            "Delay loop: {:.3} ns per iteration, calibrated by the VM on its thread's CPU clock \
             at start-up. Check ({}, at `{}`, no profile, against runs with its entry hook \
             alone): {:.1} ms injected, {:.1} ms of extra CPU measured, ± {:.1} ({}).\n",
            d.ns_per_iteration,
            d.tier,
            d.method,
            d.injected_ms,
            d.measured_ms,
            d.measured_pm_ms,
            pct(d.measured_ms / d.injected_ms - 1.0)
        );
        let _ = writeln!(out, "## Attribution error per configuration\n");
        let _ = writeln!(
            out,
            "Error = (credited with the delay − credited without − injected) / injected: 0 is \
             exact, −100 % credits none of it to the place. Median over places, amounts and \
             runs, with its 95 % bootstrap interval.\n"
        );
        let _ = writeln!(
            out,
            "| configuration | median error [95 % CI] | within ±{:.0} % | a sample's cost | samples per delay | ranked as expected | why it differs |",
            self.threshold * 100.0
        );
        let _ = writeln!(out, "| --- | --- | :-: | ---: | ---: | ---: | --- |");
        for r in self.configs.iter().filter(|r| !r.config.is_cbs()) {
            let median = r.median_cell();
            let (k, n) = r.ranked();
            let _ = writeln!(
                out,
                "| {} | {median} | {} | {:.1} µs | {:.0} | {k}/{n} | {} |",
                r.config.name(),
                r.within(self.threshold),
                r.sample_cost_ns / 1e3,
                r.mean_samples_in_delay(),
                r.reason().unwrap_or_default(),
            );
        }
        let _ = writeln!(out, "\n## Mean error per place and amount\n");
        let columns: Vec<String> = self
            .configs
            .first()
            .map(|r| {
                r.places
                    .iter()
                    .map(|p| format!("{:?} `{}` {} %", p.place.role, p.place.method, p.amount))
                    .collect()
            })
            .unwrap_or_default();
        let _ = writeln!(out, "| configuration | {} |", columns.join(" | "));
        let _ = writeln!(out, "| --- |{}", " ---: |".repeat(columns.len()));
        for r in &self.configs {
            let cells: Vec<String> = r
                .places
                .iter()
                .map(|p| {
                    if p.errors.is_empty() {
                        "–".into()
                    } else {
                        pct(super::mean(&p.errors))
                    }
                })
                .collect();
            let _ = writeln!(out, "| {} | {} |", r.config.name(), cells.join(" | "));
        }
        self.cbs_table(&mut out);
        let flagged: Vec<&ConfigResult> = self
            .configs
            .iter()
            .filter(|r| r.flagged(self.threshold))
            .collect();
        let _ = writeln!(out);
        if flagged.is_empty() {
            let _ = writeln!(
                out,
                "Every configuration's median error is within ±{:.0} %.",
                self.threshold * 100.0
            );
        } else {
            let _ = writeln!(out, "## Beyond ±{:.0} %\n", self.threshold * 100.0);
            for r in flagged {
                let mut worst: Vec<&PlaceResult> = r.places.iter().collect();
                worst.sort_by(|a, b| {
                    super::mean(&b.errors)
                        .abs()
                        .total_cmp(&super::mean(&a.errors).abs())
                });
                let at: Vec<String> = worst
                    .iter()
                    .take(3)
                    .map(|p| {
                        format!(
                            "`{}` at {} %: {}",
                            p.place.method,
                            p.amount,
                            pct(super::mean(&p.errors))
                        )
                    })
                    .collect();
                let _ = writeln!(
                    out,
                    "- **{}**, median {}{}. Worst: {}.",
                    r.config.name(),
                    r.median.map(|m| pct(m.0)).unwrap_or_default(),
                    r.reason().map(|w| format!(": {w}")).unwrap_or_default(),
                    at.join("; ")
                );
            }
        }
        out
    }

    /// CBS configurations: how far the delay moved CBS's estimate of the calls into the place.
    fn cbs_table(&self, out: &mut String) {
        let cbs: Vec<&ConfigResult> = self.configs.iter().filter(|r| r.config.is_cbs()).collect();
        if cbs.is_empty() {
            return;
        }
        let _ = writeln!(out, "\n## CBS call edges\n");
        let _ = writeln!(
            out,
            "A delay changes no call, so CBS's estimate of the share of calls that go into the \
             place should not move: the error is its relative change, delayed against baseline \
             runs (the rows above, under the same configuration name, per place and amount).\n"
        );
        let _ = writeln!(
            out,
            "| configuration | median change [95 % CI] | within ±{:.0} % | note |",
            self.threshold * 100.0
        );
        let _ = writeln!(out, "| --- | --- | :-: | --- |");
        for r in cbs {
            let median = r.median_cell();
            let _ = writeln!(
                out,
                "| {} | {median} | {} | {} |",
                r.config.name(),
                r.within(self.threshold),
                r.reason().unwrap_or_default()
            );
        }
    }

    pub fn json(&self, runs: &[serde_json::Value]) -> serde_json::Value {
        let d = &self.delay_check;
        serde_json::json!({
            "program": self.program,
            "amounts_percent": self.amounts,
            "runs_each": self.runs,
            "threshold": self.threshold,
            "cpu_s": self.cpu_s,
            "places": self.places.iter().map(|p| serde_json::json!({
                "role": format!("{:?}", p.role).to_lowercase(),
                "method": p.method, "share": p.share, "calls": p.calls,
            })).collect::<Vec<_>>(),
            "delay_check": {
                "tier": d.tier, "method": d.method, "ns_per_iteration": d.ns_per_iteration,
                "injected_ms": d.injected_ms, "measured_ms": d.measured_ms,
                "measured_pm_ms": d.measured_pm_ms,
            },
            "configurations": self.configs.iter().map(|r| serde_json::json!({
                "name": r.config.name(),
                "tier": r.config.tier,
                "sampler": r.config.sampler,
                "mechanism": r.config.mechanism,
                "rate_hz": r.config.rate,
                "broken": r.config.broken,
                "sample_cost_ns": r.sample_cost_ns,
                "cpu_s": r.cpu_s,
                "median_error": r.median.map(|m| m.0),
                "ci95": r.median.map(|m| [m.1, m.2]),
                "flagged": r.flagged(self.threshold),
                "reason": r.reason(),
                "places": r.places.iter().map(|p| serde_json::json!({
                    "method": p.place.method,
                    "amount_percent": p.amount,
                    "errors": p.errors,
                    "ranked_as_expected": p.ranked_as_expected,
                    "samples_in_delay": p.samples_in_delay,
                    "credited_without_ns": p.credited_without_ns,
                    "credited_with_ns": p.credited_with_ns,
                    "injected_ns": p.injected_ns,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "runs": runs,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_median_has_an_interval_around_it() {
        let (m, lo, hi) = median_ci(&[0.1, -0.1, 0.0, 0.05, -0.05]).unwrap();
        assert_eq!(m, 0.0);
        assert!(lo <= m && m <= hi);
        assert!(median_ci(&[0.5]).is_none());
    }
}
