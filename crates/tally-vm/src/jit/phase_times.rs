//! `--time-passes`: how long each named phase of compilation took, summed over a run. The
//! code generator adds its phases (the optimizing tier's IR build and passes, lowering,
//! the baseline tier's assembly, Cranelift's own passes, the code module's work) on
//! whichever thread compiles; the installer adds installation on the VM thread. Each phase
//! counts its own time only (a Cranelift pass without the passes it runs inside it), so the
//! rows add up to the whole.
//!
//! Beside the times, what the optimizing tier's lowering wrote: Cranelift instructions by
//! what they lower (the entry, each kind of IR instruction, the exits). Cranelift's passes
//! take time in proportion to them, so this table says which lowering to make smaller.

use std::sync::Mutex;
use std::time::Duration;

/// Where in a compile a phase runs; the report lists stages in this order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Stage {
    /// The optimizing tier's IR made from bytecode.
    IrBuild,
    /// A pass over it (by the pass's name).
    IrPass,
    /// The IR lowered to Cranelift's.
    Lowering,
    /// The baseline tier's bytecode assembled by its template compiler.
    Translation,
    /// One of Cranelift's passes (by its own description).
    Cranelift,
    /// The code module: the machine code copied into executable memory and linked, the
    /// pc map and stack maps read out.
    Module,
    /// The VM makes the code run: its version registered, its entry points set.
    Installation,
}

impl Stage {
    fn label(self) -> &'static str {
        match self {
            Stage::IrBuild | Stage::IrPass => "tally-ir",
            Stage::Lowering => "lowering",
            Stage::Translation => "baseline",
            Stage::Cranelift => "cranelift",
            Stage::Module => "module",
            Stage::Installation => "vm",
        }
    }
}

#[derive(Default)]
pub struct PhaseTimes {
    rows: Mutex<Vec<Row>>,
    volume: Mutex<Vec<VolumeRow>>,
}

struct VolumeRow {
    what: &'static str,
    instructions: u64,
    compiles: u64,
}

struct Row {
    stage: Stage,
    phase: String,
    took: Duration,
    runs: u64,
}

impl PhaseTimes {
    /// Adds one run of `phase` that took `took`.
    pub fn add(&self, stage: Stage, phase: &str, took: Duration) {
        let mut rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        match rows
            .iter_mut()
            .find(|r| r.stage == stage && r.phase == phase)
        {
            Some(r) => {
                r.took += took;
                r.runs += 1;
            }
            None => rows.push(Row {
                stage,
                phase: phase.to_string(),
                took,
                runs: 1,
            }),
        }
    }

    /// Adds one compile's Cranelift instructions, by what they lower.
    pub fn add_volume(&self, volume: impl IntoIterator<Item = (&'static str, u64)>) {
        let mut rows = self.volume.lock().unwrap_or_else(|e| e.into_inner());
        for (what, instructions) in volume {
            if instructions == 0 {
                continue;
            }
            match rows.iter_mut().find(|r| r.what == what) {
                Some(r) => {
                    r.instructions += instructions;
                    r.compiles += 1;
                }
                None => rows.push(VolumeRow {
                    what,
                    instructions,
                    compiles: 1,
                }),
            }
        }
    }

    /// The table: each phase's time in milliseconds, its share of the whole and how often
    /// it ran, stages in order and phases in the order they first ran; then, if the
    /// optimizing tier compiled, the instructions its lowering wrote, most first.
    pub fn report(&self) -> String {
        use std::fmt::Write as _;
        let rows = self.rows.lock().unwrap_or_else(|e| e.into_inner());
        let mut order: Vec<usize> = (0..rows.len()).collect();
        order.sort_by_key(|&k| (rows[k].stage, k));
        let total: Duration = rows.iter().map(|r| r.took).sum();
        let installs = rows
            .iter()
            .find(|r| r.stage == Stage::Installation)
            .map_or(0, |r| r.runs);
        let mut out = format!(
            "--time-passes: {:.3} ms compiling, {installs} versions installed \
             (each phase's own time, summed over the run)\n",
            total.as_secs_f64() * 1e3
        );
        let _ = writeln!(out, "{:>10} {:>6} {:>7}  phase", "ms", "%", "runs");
        for k in order {
            let r = &rows[k];
            let share = if total.is_zero() {
                0.0
            } else {
                100.0 * r.took.as_secs_f64() / total.as_secs_f64()
            };
            let _ = writeln!(
                out,
                "{:>10.3} {share:>6.1} {:>7}  {:<9} {}",
                r.took.as_secs_f64() * 1e3,
                r.runs,
                r.stage.label(),
                r.phase
            );
        }
        drop(rows);
        out + &self.volume_report()
    }

    fn volume_report(&self) -> String {
        use std::fmt::Write as _;
        let mut rows = self.volume.lock().unwrap_or_else(|e| e.into_inner());
        if rows.is_empty() {
            return String::new();
        }
        rows.sort_by(|a, b| b.instructions.cmp(&a.instructions).then(a.what.cmp(b.what)));
        let total: u64 = rows.iter().map(|r| r.instructions).sum();
        let mut out = format!(
            "--time-passes: {total} Cranelift instructions written by the optimizing tier's \
             lowering, by what they lower\n"
        );
        let _ = writeln!(
            out,
            "{:>12} {:>6} {:>8}  lowering",
            "instructions", "%", "compiles"
        );
        for r in rows.iter() {
            let share = 100.0 * r.instructions as f64 / total as f64;
            let _ = writeln!(
                out,
                "{:>12} {share:>6.1} {:>8}  {}",
                r.instructions, r.compiles, r.what
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phases_add_up_by_name_and_list_by_stage() {
        let t = PhaseTimes::default();
        t.add(
            Stage::Cranelift,
            "Register allocation",
            Duration::from_millis(3),
        );
        t.add(Stage::IrPass, "fold", Duration::from_millis(1));
        t.add(Stage::IrPass, "fold", Duration::from_millis(1));
        t.add(Stage::Installation, "install", Duration::from_millis(4));
        let report = t.report();
        let lines: Vec<&str> = report.lines().collect();
        assert!(
            lines[0].contains("9.000 ms compiling, 1 versions installed"),
            "{report}"
        );
        assert!(
            lines[2].contains("22.2") && lines[2].ends_with("tally-ir  fold"),
            "{report}"
        );
        assert!(lines[2].contains("      2  "), "{report}");
        assert!(
            lines[3].ends_with("cranelift Register allocation"),
            "{report}"
        );
        assert!(lines[4].ends_with("vm        install"), "{report}");
        assert_eq!(
            lines.len(),
            5,
            "no volume table without optimizing compiles"
        );
    }

    #[test]
    fn instructions_add_up_by_what_they_lower_largest_first() {
        let t = PhaseTimes::default();
        t.add_volume([("entry", 30), ("Send", 50), ("exits", 0)]);
        t.add_volume([("entry", 20), ("GuardClass", 100)]);
        let report = t.report();
        let lines: Vec<&str> = report.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.contains("200 Cranelift instructions"))
            .unwrap_or_else(|| panic!("{report}"));
        let rows: Vec<Vec<&str>> = lines[at + 2..]
            .iter()
            .map(|l| l.split_whitespace().collect())
            .collect();
        assert_eq!(
            rows,
            [
                ["100", "50.0", "1", "GuardClass"],
                ["50", "25.0", "1", "Send"],
                ["50", "25.0", "2", "entry"],
            ],
            "{report}"
        );
    }
}
