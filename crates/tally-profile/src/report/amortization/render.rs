//! The amortization analysis as text.

use std::fmt::Write;

use super::{Amortization, Recompilation, Verdict};

impl Amortization {
    /// The analysis as text: the recompilations with their verdicts, then the `top`
    /// (method, tier) rows by samples with their calls and costs.
    pub fn render_text(&self, top: usize) -> String {
        let mut out = format!(
            "Amortization (Zimmer & Diehl): {} recompilation(s); t_unit = ({:.1} ms run − {:.1} ms \
             counting) / {} samples = {:.1} µs\n",
            self.recompilations.len(),
            self.run_ns as f64 / 1e6,
            self.instrumentation_ns as f64 / 1e6,
            self.samples,
            self.t_unit_ns / 1e3
        );
        let count = |label: &str| {
            self.recompilations
                .iter()
                .filter(|r| r.verdict.label() == label)
                .count()
        };
        let (won, lost) = self.won_and_lost_ns();
        let (won_least, lost_least) = self.won_and_lost_at_least_ns();
        let _ = writeln!(
            out,
            "paid off: {} (won {:.2} ms); did not pay: {} (lost {:.2} ms); unclear: {}",
            count("paid off"),
            won / 1e6,
            count("did not pay"),
            lost / 1e6,
            count("unclear")
        );
        let _ = writeln!(
            out,
            "  over the samples' error: won at least {:.2} ms, lost at least {:.2} ms",
            won_least / 1e6,
            lost_least / 1e6
        );
        // The red ones first, costliest first: what the controller should not have done.
        let mut red: Vec<(&Recompilation, f64)> = self
            .recompilations
            .iter()
            .filter_map(|r| match r.verdict {
                Verdict::DidNotPay { loss_ns } => Some((r, loss_ns)),
                _ => None,
            })
            .collect();
        red.sort_by(|a, b| b.1.total_cmp(&a.1));
        for (r, loss) in &red {
            let _ = writeln!(
                out,
                "  red: {} {} -> {} lost {:.2} ms ({} call(s) after a {:.2} ms compile)",
                r.name,
                r.from.name(),
                r.to.name(),
                loss / 1e6,
                r.calls,
                r.compile_ns as f64 / 1e6
            );
        }
        out.push_str(
            "  verdict      gain ms  method                            from -> to                   \
             at ms  compile ms      calls  µs/call after  µs/call before\n",
        );
        for r in &self.recompilations {
            let gain = match r.verdict {
                Verdict::PaidOff { gain_ns } => format!("{:+.2}", gain_ns / 1e6),
                Verdict::DidNotPay { loss_ns } => format!("{:+.2}", -loss_ns / 1e6),
                Verdict::Unclear { .. } => "?".into(),
            };
            let us = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.3}", v / 1e3));
            let _ = writeln!(
                out,
                "  {:<11} {:>8}  {:<33} {:<26} {:>8.1} {:>11.2} {:>10} {:>14} {:>15}",
                r.verdict.label(),
                gain,
                r.name,
                format!("{} -> {}", r.from.name(), r.to.name()),
                r.at_ns as f64 / 1e6,
                r.compile_ns as f64 / 1e6,
                r.calls,
                us(r.per_call_to_ns),
                us(r.per_call_from_ns)
            );
            if let Verdict::Unclear { why } = &r.verdict {
                let _ = writeln!(out, "              {why}");
            }
        }
        out.push_str(
            "\nby method and tier (exclusive time, inlined frames as if on the stack):\n  \
             method                            tier              calls   samples   time ms  \
             µs/call  compiles\n",
        );
        for c in self.costs.iter().take(top) {
            let _ = writeln!(
                out,
                "  {:<33} {:<12} {:>10} {:>9} {:>9.2} {:>8} {:>9}",
                c.name,
                c.tier.name(),
                c.calls,
                c.samples,
                c.time_ns / 1e6,
                c.per_call_ns()
                    .map_or("-".to_string(), |t| format!("{:.3}", t / 1e3)),
                c.compiles
            );
        }
        out
    }
}
