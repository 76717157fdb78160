//! What the controller knows about the tiers: how much faster each runs a method than the
//! interpreter, and how long it takes to compile one. Jikes RVM's controller weighs exactly
//! these two numbers; they differ from machine to machine, so they are measured
//! (`tally calibrate`) and stored in a small file, with built-in figures for a machine that
//! has none.

use serde::{Deserialize, Serialize};
use tally_profile::Tier;

/// One compiling tier's figures.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TierCost {
    /// How many times faster than the interpreter this tier runs a method (> 0).
    pub speedup: f64,
    /// Compile time of a method: `fixed_ns + per_bytecode_ns` × the bytecodes the compile
    /// translates, which is `expansion` × its own.
    pub compile_fixed_ns: f64,
    pub compile_per_bytecode_ns: f64,
    /// Bytecodes a compile translates per bytecode of the method compiled, inlined ones
    /// counted: 1 for a tier that inlines nothing.
    #[serde(default = "no_expansion")]
    pub expansion: f64,
}

fn no_expansion() -> f64 {
    1.0
}

impl TierCost {
    /// The predicted compile time of a method with `bytecodes` instructions.
    pub fn compile_ns(&self, bytecodes: u32) -> f64 {
        self.compile_fixed_ns + self.compile_per_bytecode_ns * f64::from(bytecodes) * self.expansion
    }

    fn check(&self, name: &str) -> Result<(), ModelError> {
        let finite = |x: f64| x.is_finite() && x >= 0.0;
        if !(self.speedup.is_finite() && self.speedup > 0.0) {
            return Err(ModelError::Invalid(format!(
                "{name}: speedup must be a positive number, not {}",
                self.speedup
            )));
        }
        if !finite(self.compile_fixed_ns) || !finite(self.compile_per_bytecode_ns) {
            return Err(ModelError::Invalid(format!(
                "{name}: compile times must be non-negative numbers"
            )));
        }
        if !(self.expansion.is_finite() && self.expansion >= 1.0) {
            return Err(ModelError::Invalid(format!(
                "{name}: expansion must be a number of at least 1, not {}",
                self.expansion
            )));
        }
        Ok(())
    }
}

/// Where a model's figures come from: a calibration of this machine, or the built-in ones.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    /// The machine the figures were measured on (host name and processor), empty for the
    /// built-in figures.
    #[serde(default)]
    pub machine: String,
    /// When (seconds since the Unix epoch), 0 for the built-in figures.
    #[serde(default)]
    pub measured_unix_s: u64,
    /// How: the calibration programs and runs, in words.
    #[serde(default)]
    pub method: String,
}

/// The figures of every compiling tier. The interpreter is the reference: speedup 1, no
/// compile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CostModel {
    #[serde(default)]
    pub provenance: Provenance,
    pub baseline: TierCost,
    /// The optimizing compiler's cheap level. A file written before the level existed has
    /// none: the built-in figures stand in.
    #[serde(default = "default_quick")]
    pub quick: TierCost,
    pub optimizing: TierCost,
}

fn default_quick() -> TierCost {
    CostModel::default().quick
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot parse the cost model: {0}")]
    Parse(String),
    #[error("invalid cost model: {0}")]
    Invalid(String),
}

impl Default for CostModel {
    /// Figures for a machine that was never calibrated. The quick level's are what `tally
    /// calibrate` measures on the two-core x86-64 machines this VM is developed on, rounded
    /// (BENCHMARKS.md has the command). The baseline's and the optimizing level's are older
    /// than calibrate's: the optimizing level's lower (calibrate: 9-11x, 1-1.4 ms + 42-64 us
    /// per bytecode compiled, 2.8 compiled per own bytecode over AWFY), the baseline's compile
    /// dearer than the template compiler's (calibrate: 2.0x, 1.6 us per bytecode). With
    /// calibrate's the controller sends methods to the baseline early and to the optimizing
    /// tier late: AWFY's iterations 11-20 run 1.23x slower, one run 1.4x slower (cheap
    /// baseline alone) or no faster (with calibrate's optimizing speedup too).
    fn default() -> Self {
        CostModel {
            provenance: Provenance {
                machine: String::new(),
                measured_unix_s: 0,
                method: "built-in figures (no calibration of this machine)".into(),
            },
            baseline: TierCost {
                speedup: 1.7,
                compile_fixed_ns: 260_000.0,
                compile_per_bytecode_ns: 51_000.0,
                expansion: 1.0,
            },
            quick: TierCost {
                speedup: 6.9,
                compile_fixed_ns: 800_000.0,
                compile_per_bytecode_ns: 38_000.0,
                expansion: 1.0,
            },
            optimizing: TierCost {
                speedup: 2.9,
                compile_fixed_ns: 400_000.0,
                compile_per_bytecode_ns: 47_000.0,
                expansion: 1.0,
            },
        }
    }
}

impl CostModel {
    /// The figures of `tier`; `None` for the interpreter.
    pub fn tier(&self, tier: Tier) -> Option<&TierCost> {
        match tier {
            Tier::Baseline => Some(&self.baseline),
            Tier::Quick => Some(&self.quick),
            Tier::Optimizing => Some(&self.optimizing),
            Tier::Interpreter | Tier::Other(_) => None,
        }
    }

    /// How many times faster than the interpreter `tier` runs.
    pub fn speedup(&self, tier: Tier) -> f64 {
        self.tier(tier).map_or(1.0, |t| t.speedup)
    }

    /// Reads a model written by [`CostModel::to_toml`], checking every figure.
    pub fn from_toml(text: &str) -> Result<CostModel, ModelError> {
        let model: CostModel =
            toml::from_str(text).map_err(|e| ModelError::Parse(e.to_string()))?;
        model.baseline.check("baseline")?;
        model.quick.check("quick")?;
        model.optimizing.check("optimizing")?;
        Ok(model)
    }

    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).expect("a cost model always serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_survives_its_file_format() {
        let mut m = CostModel::default();
        m.provenance.machine = "host (cpu)".into();
        m.optimizing.speedup = 4.5;
        let back = CostModel::from_toml(&m.to_toml()).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn nonsense_figures_are_rejected_with_the_tier_named() {
        let mut m = CostModel::default();
        m.baseline.speedup = 0.0;
        let err = CostModel::from_toml(&m.to_toml()).unwrap_err().to_string();
        assert!(err.contains("baseline") && err.contains("speedup"), "{err}");
        assert!(CostModel::from_toml("baseline = 3").is_err());
    }

    #[test]
    fn compile_time_grows_with_the_method() {
        let t = CostModel::default().optimizing;
        assert!(t.compile_ns(100) > t.compile_ns(10));
        assert_eq!(CostModel::default().speedup(Tier::Interpreter), 1.0);
    }
}
