//! Runs a program in the `tally` binary under one configuration (tier, collector, stress) and
//! keeps what it did: standard output, the SOM error part of standard error, how it ended.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::ast::{Program, MAIN_CLASS};

/// One way of running programs: a name for reports, the flags that make it, and how many
/// times the program's `run` is repeated in one process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    pub name: String,
    pub flags: Vec<String>,
    /// Passed to `Main>>run:` (which repeats `run`): the adaptive tier's compiles follow the
    /// samples of a running program, so its configurations run the program long enough to
    /// compile, deoptimize and recompile; its reference run repeats as often.
    pub repeats: u32,
}

impl Config {
    pub fn new(name: &str, flags: &[&str]) -> Self {
        Config {
            name: name.to_string(),
            flags: flags.iter().map(|f| f.to_string()).collect(),
            repeats: 1,
        }
    }

    /// The interpreter: what every other configuration must agree with.
    pub fn reference() -> Self {
        Config::new("interp", &["--tier=interp"])
    }

    /// The interpreter's run to compare this configuration's with.
    pub fn reference_for(&self) -> Self {
        Config {
            repeats: self.repeats,
            ..Config::reference()
        }
    }

    /// The program's arguments (after `Main.som`).
    fn program_args(&self) -> Vec<String> {
        if self.repeats > 1 {
            vec![self.repeats.to_string()]
        } else {
            Vec::new()
        }
    }

    fn compiles(&self) -> bool {
        self.flags
            .iter()
            .any(|f| f != "--tier=interp" && f.starts_with("--tier="))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    /// Killed by a signal (a crash: SIGSEGV, SIGABRT, …).
    Signal(i32),
    TimedOut,
}

#[derive(Clone, Debug)]
pub struct Outcome {
    pub stdout: String,
    /// Standard error without the `--tier-log` lines: the SOM error and its trace, or a
    /// panic's message.
    pub stderr: String,
    pub exit: Exit,
    pub elapsed: Duration,
    /// Methods and blocks the run compiled with the optimizing tier (at either level), and deoptimizations, as
    /// `--tier-log` reported them: whether the configuration did what it is there for.
    pub opt_compiles: u32,
    pub deopts: u32,
    /// `--tier-log`'s "failed for" lines: compiles that failed (the method then stays
    /// interpreted, so the output alone does not tell).
    pub failed_compiles: Vec<String>,
}

/// The cost models the adaptive configurations name, by file name: written beside every
/// program (`write_program`), so a saved divergence reruns as it is.
const COST_MODELS: [(&str, f64); 2] = [(EAGER_OPT, 0.0), (LATE_OPT, 3_000_000.0)];
const EAGER_OPT: &str = "eager-opt.toml";
const LATE_OPT: &str = "late-opt.toml";
/// Under `--adaptive-tiers baseline,quick,opt`: everything sampled goes to the quick level
/// at once, and on to the full level once it has run 6 ms there (a recompile from one
/// optimizing level to the other).
const QUICK_THEN_OPT: &str = LATE_OPT;

/// Writes a program's classes, and the cost models, into `dir`.
pub fn write_program(dir: &Path, program: &Program) -> std::io::Result<()> {
    for (file, source) in program.sources() {
        std::fs::write(dir.join(file), source)?;
    }
    for (name, opt_fixed_ns) in COST_MODELS {
        std::fs::write(dir.join(name), cost_model(opt_fixed_ns))?;
    }
    Ok(())
}

/// Runs the `tally` binary.
pub struct Tally {
    binary: PathBuf,
}

impl Tally {
    /// Programs run in their own directories: a relative `binary` is made absolute here.
    pub fn new(binary: &Path) -> Self {
        Tally {
            binary: std::path::absolute(binary).unwrap_or_else(|_| binary.to_path_buf()),
        }
    }

    pub fn binary(&self) -> &Path {
        &self.binary
    }

    /// The configurations every program runs in besides the interpreter: each compiled
    /// tier, with collections every few allocations under a moving and a generational
    /// collector, and the adaptive tier with cost models that compile whatever it samples
    /// (straight to the optimizing tier, or to the baseline first so value profiles fill).
    pub fn core_configs(&self) -> Vec<Config> {
        vec![
            Config::new(
                "baseline-gencopy-stress",
                &["--tier=baseline", "--gc=gencopy", "--gc-stress", "50"],
            ),
            Config::new("opt", &["--tier=opt"]),
            Config::new(
                "quick-gencopy-stress",
                &["--tier=quick", "--gc=gencopy", "--gc-stress", "45"],
            ),
            Config::new(
                "opt-semispace-stress",
                &["--tier=opt", "--gc=semispace", "--gc-stress", "40"],
            ),
            adaptive("adaptive-stress", EAGER_OPT, &["--gc-stress", "60"]),
            adaptive("adaptive-late-opt", LATE_OPT, &["--gc=immix"]),
        ]
    }

    /// Configurations that each run one program in eight (by seed): the other collectors, no
    /// speculation, no inlining, stress at other intervals.
    pub fn extra_configs(&self) -> Vec<Config> {
        vec![
            Config::new("baseline", &["--tier=baseline"]),
            Config::new("opt-no-speculation", &["--tier=opt", "--no-speculation"]),
            Config::new(
                "opt-marksweep-no-inline-stress",
                &[
                    "--tier=opt",
                    "--gc=marksweep",
                    "--inline=off",
                    "--gc-stress",
                    "30",
                ],
            ),
            Config::new(
                "opt-gencopy-stress",
                &["--tier=opt", "--gc=gencopy", "--gc-stress", "9"],
            ),
            adaptive("adaptive", EAGER_OPT, &[]),
            adaptive(
                "adaptive-quick-then-opt",
                QUICK_THEN_OPT,
                &["--adaptive-tiers", "baseline,quick,opt"],
            ),
            adaptive(
                "adaptive-semispace-stress",
                EAGER_OPT,
                &["--gc=semispace", "--gc-stress", "15"],
            ),
        ]
    }

    /// What the program of `seed` runs in: the core configurations and one extra.
    pub fn configs_for(&self, seed: u64) -> Vec<Config> {
        let extras = self.extra_configs();
        let mut configs = self.core_configs();
        configs.push(extras[(seed % extras.len() as u64) as usize].clone());
        configs
    }

    /// Runs `Main.som` in `dir` under `config`; a run still going after `timeout` is killed.
    pub fn run(&self, dir: &Path, config: &Config, timeout: Duration) -> std::io::Result<Outcome> {
        let out_path = dir.join(format!("{}.stdout", config.name));
        let err_path = dir.join(format!("{}.stderr", config.name));
        let mut command = Command::new(&self.binary);
        command.args(&config.flags);
        if config.compiles() {
            command.arg("--tier-log");
        }
        command
            .arg("-cp")
            .arg(".")
            .arg(format!("{MAIN_CLASS}.som"))
            .args(config.program_args())
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(File::create(&out_path)?)
            .stderr(File::create(&err_path)?);
        let start = Instant::now();
        let mut child = command.spawn()?;
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break Some(status);
            }
            if start.elapsed() > timeout {
                child.kill()?;
                child.wait()?;
                break None;
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let elapsed = start.elapsed();
        let stdout = String::from_utf8_lossy(&std::fs::read(&out_path)?).into_owned();
        let raw_err = String::from_utf8_lossy(&std::fs::read(&err_path)?).into_owned();
        std::fs::remove_file(&out_path)?;
        std::fs::remove_file(&err_path)?;
        let log = split_tier_log(&raw_err);
        Ok(Outcome {
            stdout,
            stderr: log.rest,
            exit: status.map_or(Exit::TimedOut, exit_of),
            elapsed,
            opt_compiles: log.opt_compiles,
            deopts: log.deopts,
            failed_compiles: log.failed,
        })
    }

    /// The command line that reruns `config` in a program's directory, for reports.
    pub fn command_line(&self, config: &Config) -> String {
        let mut words = vec![self.binary.display().to_string()];
        words.extend(config.flags.iter().map(|f| shell_word(f)));
        words.extend(["-cp".into(), ".".into(), format!("{MAIN_CLASS}.som")]);
        words.extend(config.program_args());
        words.join(" ")
    }
}

/// The adaptive tier under the cost model in file `model`, with `extra` flags. The controller
/// decides from samples: they come often, and the program runs four times over.
fn adaptive(name: &str, model: &str, extra: &[&str]) -> Config {
    let mut flags = vec![
        "--tier=adaptive",
        "--calibration",
        model,
        "--sampler",
        "perf",
        "--rate",
        "5000",
    ];
    flags.extend_from_slice(extra);
    Config {
        repeats: 4,
        ..Config::new(name, &flags)
    }
}

/// A cost model under which the controller compiles every method it sees a sample of: no
/// compile cost, a large speedup, the optimizing tier twice the baseline's. With a fixed cost
/// for the optimizing tier, methods go to the baseline first and on after a few milliseconds
/// there (its code counts receiver classes meanwhile).
fn cost_model(opt_fixed_ns: f64) -> String {
    format!(
        "[baseline]\nspeedup = 1000.0\ncompile_fixed_ns = 0.0\ncompile_per_bytecode_ns = 0.0\n\n\
         [quick]\nspeedup = 1500.0\ncompile_fixed_ns = 0.0\ncompile_per_bytecode_ns = 0.0\n\n\
         [optimizing]\nspeedup = 3000.0\ncompile_fixed_ns = {opt_fixed_ns:.1}\n\
         compile_per_bytecode_ns = 0.0\n"
    )
}

fn shell_word(word: &str) -> String {
    if word
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "-_=./:,".contains(c))
    {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

fn exit_of(status: ExitStatus) -> Exit {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => Exit::Code(code),
        (None, Some(signal)) => Exit::Signal(signal),
        (None, None) => Exit::Code(-1),
    }
}

/// Standard error split into the `--tier-log` lines, which differ between tiers by design,
/// and the rest.
struct TierLog {
    rest: String,
    opt_compiles: u32,
    deopts: u32,
    failed: Vec<String>,
}

fn split_tier_log(stderr: &str) -> TierLog {
    let mut log = TierLog {
        rest: String::new(),
        opt_compiles: 0,
        deopts: 0,
        failed: Vec::new(),
    };
    for line in stderr.lines() {
        if let Some(entry) = line.strip_prefix("[tier] ") {
            if entry.contains(" failed for ") {
                log.failed.push(line.to_string());
            } else if entry.starts_with("opt ") || entry.starts_with("quick ") {
                log.opt_compiles += 1;
            } else if entry.starts_with("deopt ") {
                log.deopts += 1;
            }
        } else {
            log.rest.push_str(line);
            log.rest.push('\n');
        }
    }
    log
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tier_log_lines_are_counted_and_left_out() {
        let log = split_tier_log(
            "[tier] opt Main>>run (12 bytecodes)\n[tier] deopt Main>>run @3 (#+): overflow\n\
             [tier] opt failed for Main>>x, stays where it was: why\nERROR: boom\n",
        );
        assert_eq!(log.rest, "ERROR: boom\n");
        assert_eq!((log.opt_compiles, log.deopts, log.failed.len()), (1, 1, 1));
    }

    #[test]
    fn command_lines_quote_what_the_shell_would_split() {
        assert_eq!(shell_word("--tier=opt"), "--tier=opt");
        assert_eq!(shell_word("a b"), "'a b'");
    }
}
