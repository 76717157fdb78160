//! MonitorMethod's two files: the first run's per-method times, and the phases chosen from
//! them for the second run. Both are JSON with a format name and version, checked on reading.

use serde::{Deserialize, Serialize};

use crate::phases::{MethodTime, Selection};

const TIMES_FORMAT: &str = "tally-method-times";
const PHASES_FORMAT: &str = "tally-phases";
const VERSION: u32 = 1;

/// Why a file could not be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum PhaseFileError {
    #[error("it is not JSON of the expected shape: {0}")]
    Json(String),
    #[error("it is a `{found}` file, not `{expected}`")]
    Format {
        found: String,
        expected: &'static str,
    },
    #[error("it is version {0} of the format; this Tally reads version 1")]
    Version(u32),
    #[error("{0}")]
    Invalid(String),
}

/// The first run's result: per-method inclusive times, and what reading counters is expected
/// to cost per reading in the second.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MethodTimes {
    pub format: String,
    pub version: u32,
    /// The program as its command line named it.
    pub program: String,
    /// The tier the run used (the second run should use the same).
    pub tier: String,
    /// The run's time with the recording's own probes taken out.
    pub run_ns: u64,
    /// What one reading of the recording's clock cost (taken out of the times).
    pub record_probe_ns: f64,
    /// What one reading of the counters cost in this run (the estimate's unit).
    pub count_probe_ns: f64,
    pub methods: Vec<MethodTimeEntry>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MethodTimeEntry {
    pub name: String,
    pub calls: u64,
    pub inclusive_ns: u64,
}

impl MethodTimes {
    pub fn new(
        program: String,
        tier: String,
        run_ns: u64,
        record_probe_ns: f64,
        count_probe_ns: f64,
        methods: &[MethodTime],
    ) -> MethodTimes {
        MethodTimes {
            format: TIMES_FORMAT.into(),
            version: VERSION,
            program,
            tier,
            run_ns,
            record_probe_ns,
            count_probe_ns,
            methods: methods
                .iter()
                .map(|m| MethodTimeEntry {
                    name: m.name.clone(),
                    calls: m.calls,
                    inclusive_ns: m.inclusive_ns,
                })
                .collect(),
        }
    }

    pub fn render(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serializes") + "\n"
    }

    pub fn parse(text: &str) -> Result<MethodTimes, PhaseFileError> {
        let t: MethodTimes =
            serde_json::from_str(text).map_err(|e| PhaseFileError::Json(e.to_string()))?;
        check_header(&t.format, t.version, TIMES_FORMAT)?;
        check_non_negative(&[
            ("record_probe_ns", t.record_probe_ns),
            ("count_probe_ns", t.count_probe_ns),
        ])?;
        if let Some(m) = t
            .methods
            .iter()
            .find(|m| m.calls == 0 && m.inclusive_ns > 0)
        {
            return Err(PhaseFileError::Invalid(format!(
                "{} has time but no calls",
                m.name
            )));
        }
        Ok(t)
    }

    /// The methods, for [`crate::phases::select`].
    pub fn method_times(&self) -> Vec<MethodTime> {
        self.methods
            .iter()
            .map(|m| MethodTime {
                name: m.name.clone(),
                calls: m.calls,
                inclusive_ns: m.inclusive_ns,
            })
            .collect()
    }
}

/// The phases the second run reads counters at.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phases {
    pub format: String,
    pub version: u32,
    pub program: String,
    pub tier: String,
    /// θ_weight and θ_grain (ns) of the selection.
    pub weight: f64,
    pub grain_ns: f64,
    /// Its estimated overhead (a share of the run) and the first run's time and reading cost
    /// it came from, so the second run can report estimated against measured.
    pub estimated_overhead: f64,
    pub run_ns: u64,
    pub count_probe_ns: f64,
    /// Calls of the phases in the first run (each read at entry and exit).
    pub probed_calls: u64,
    /// The methods (`Holder>>selector`), heaviest first.
    pub methods: Vec<String>,
}

impl Phases {
    pub fn from_selection(times: &MethodTimes, selection: &Selection) -> Phases {
        Phases {
            format: PHASES_FORMAT.into(),
            version: VERSION,
            program: times.program.clone(),
            tier: times.tier.clone(),
            weight: selection.thresholds.weight,
            grain_ns: selection.thresholds.grain_ns,
            estimated_overhead: selection.estimated_overhead,
            run_ns: times.run_ns,
            count_probe_ns: times.count_probe_ns,
            probed_calls: selection.probed_calls,
            methods: selection.phases.iter().map(|p| p.name.clone()).collect(),
        }
    }

    pub fn render(&self) -> String {
        serde_json::to_string_pretty(self).expect("plain data serializes") + "\n"
    }

    pub fn parse(text: &str) -> Result<Phases, PhaseFileError> {
        let p: Phases =
            serde_json::from_str(text).map_err(|e| PhaseFileError::Json(e.to_string()))?;
        check_header(&p.format, p.version, PHASES_FORMAT)?;
        if !(p.weight.is_finite() && (0.0..=1.0).contains(&p.weight)) {
            return Err(PhaseFileError::Invalid(format!(
                "weight {} is not a share of the run",
                p.weight
            )));
        }
        check_non_negative(&[
            ("grain_ns", p.grain_ns),
            ("estimated_overhead", p.estimated_overhead),
            ("count_probe_ns", p.count_probe_ns),
        ])?;
        if p.methods.is_empty() {
            return Err(PhaseFileError::Invalid("it names no method".into()));
        }
        if let Some(m) = p.methods.iter().find(|m| !m.contains(">>")) {
            return Err(PhaseFileError::Invalid(format!(
                "`{m}` is not a method name (Holder>>selector)"
            )));
        }
        Ok(p)
    }
}

/// Each named number must be finite and at least 0 (a cost, a duration, a share).
fn check_non_negative(values: &[(&str, f64)]) -> Result<(), PhaseFileError> {
    match values.iter().find(|(_, x)| !(x.is_finite() && *x >= 0.0)) {
        Some((what, x)) => Err(PhaseFileError::Invalid(format!(
            "{what} is {x}, not at least 0"
        ))),
        None => Ok(()),
    }
}

fn check_header(format: &str, version: u32, expected: &'static str) -> Result<(), PhaseFileError> {
    if format != expected {
        return Err(PhaseFileError::Format {
            found: format.into(),
            expected,
        });
    }
    if version != VERSION {
        return Err(PhaseFileError::Version(version));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phases::{select, Thresholds};

    fn times() -> MethodTimes {
        MethodTimes::new(
            "Bench.som".into(),
            "adaptive".into(),
            1_000_000,
            20.0,
            1500.0,
            &[
                MethodTime {
                    name: "A>>run".into(),
                    calls: 1,
                    inclusive_ns: 900_000,
                },
                MethodTime {
                    name: "A>>step".into(),
                    calls: 100,
                    inclusive_ns: 500_000,
                },
            ],
        )
    }

    #[test]
    fn both_files_read_back_what_was_written() {
        let t = times();
        assert_eq!(MethodTimes::parse(&t.render()).unwrap(), t);
        let s = select(
            &t.method_times(),
            t.run_ns,
            t.count_probe_ns,
            Thresholds {
                weight: 0.1,
                grain_ns: 1000.0,
            },
        );
        let p = Phases::from_selection(&t, &s);
        assert_eq!(p.methods, ["A>>run", "A>>step"]);
        assert_eq!(p.probed_calls, 101);
        assert_eq!(Phases::parse(&p.render()).unwrap(), p);
    }

    #[test]
    fn a_file_of_another_kind_or_damaged_is_refused_with_the_reason() {
        let t = times();
        let as_phases = Phases::parse(&t.render()).unwrap_err();
        assert!(matches!(as_phases, PhaseFileError::Json(_)), "{as_phases}");
        let other = t.render().replace("tally-method-times", "tally-phases");
        assert!(matches!(
            MethodTimes::parse(&other).unwrap_err(),
            PhaseFileError::Format { .. }
        ));
        let v2 = t.render().replace("\"version\": 1", "\"version\": 2");
        assert_eq!(
            MethodTimes::parse(&v2).unwrap_err(),
            PhaseFileError::Version(2)
        );
        let cut = &t.render()[..40];
        assert!(matches!(
            MethodTimes::parse(cut).unwrap_err(),
            PhaseFileError::Json(_)
        ));
        let negative = t.render().replace("1500.0", "-3.0");
        assert!(matches!(
            MethodTimes::parse(&negative).unwrap_err(),
            PhaseFileError::Invalid(_)
        ));
        let s = select(
            &t.method_times(),
            t.run_ns,
            t.count_probe_ns,
            Thresholds {
                weight: 0.1,
                grain_ns: 1000.0,
            },
        );
        let p = Phases::from_selection(&t, &s).render();
        let bad_name = p.replace("A>>step", "step");
        assert!(Phases::parse(&bad_name)
            .unwrap_err()
            .to_string()
            .contains("not a method name"));
        let heavy = p.replace("\"weight\": 0.1", "\"weight\": 3.0");
        assert!(Phases::parse(&heavy)
            .unwrap_err()
            .to_string()
            .contains("weight 3"));
    }
}
