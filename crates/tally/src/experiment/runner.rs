//! Running one Tally process of an experiment: command line, timing, checking, progress.
//!
//! Processes are started and timed by `tally_bench` (its suite's command line, `wait4` CPU
//! times, its success check: exit 0 and one harness line per iteration), so an experiment's
//! overhead figures are measured exactly like `tally bench`'s. What is added here is what
//! experiments need beyond that: a run that fails stops the experiment (a profile of a broken
//! run would poison the accuracy figures), profile files have a place to go, and the progress
//! line estimates the time left from runs of the same kind.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tally_bench::executor::{Executor, ExecutorKind};
use tally_bench::measure::run_process;
use tally_bench::results::{InvocationRecord, Outcome};
use tally_bench::runner::{format_duration, ProgressBar};
use tally_bench::suite::Suite;
use tally_vm::tally_profile::Profile;

/// Why a measuring loop stopped early.
#[derive(Debug)]
pub enum Stop {
    /// Ctrl-C.
    Interrupted,
    /// A run failed or its profile is unusable; the message says which and why.
    Failed(String),
}

/// How a successful process ran, as measured from outside.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timing {
    /// 1-based position in the whole experiment (shows the interleaving).
    pub sequence: u32,
    /// User + system CPU seconds (all threads): what the overhead is computed from.
    pub cpu_s: f64,
    pub user_s: f64,
    pub sys_s: f64,
    /// Wall-clock seconds from start to exit.
    pub wall_s: f64,
    pub max_rss_kib: u64,
    /// The exact command line.
    pub argv: Vec<String>,
    /// What it printed on standard error (statistics some experiments read); not kept in
    /// the results.
    #[serde(skip)]
    pub stderr: String,
}

pub struct RunnerOptions {
    pub timeout: Option<Duration>,
    pub keep_profiles: bool,
    pub quiet: bool,
    /// "tally experiment cbs", for messages.
    pub tool: String,
    /// The tier the measured runs use (`--tier=…`); the exhaustive reference runs always
    /// interpret, since exact bytecode counts come from the interpreter.
    pub tier: String,
}

/// What the progress estimate groups runs by: benchmark index and kind of run.
pub type EtaKey = (usize, &'static str);

pub struct Runner {
    suite: Suite,
    tally: PathBuf,
    profiles: PathBuf,
    options: RunnerOptions,
    interrupted: Arc<AtomicBool>,
    sequence: u32,
    progress: Progress,
}

impl Runner {
    /// Also installs the Ctrl-C handler: from now on Ctrl-C stops the running child and makes
    /// [`Runner::run`] answer [`Stop::Interrupted`].
    pub fn new(suite: Suite, tally: PathBuf, profiles: PathBuf, options: RunnerOptions) -> Runner {
        let interrupted = tally_bench::runner::install_interrupt_handler(&options.tool);
        let progress = Progress::new(options.quiet, options.tool.clone());
        Runner {
            suite,
            tally,
            profiles,
            options,
            interrupted,
            sequence: 0,
            progress,
        }
    }

    /// Announces every run to come, in order, for the progress bar and its time estimate.
    pub fn plan(&mut self, keys: Vec<EtaKey>) {
        self.progress.plan(keys);
    }

    /// Where the profile `file` of benchmark `bench` goes (DIR/profiles/BENCH/file).
    pub fn profile_path(&self, bench: usize, file: &str) -> Result<PathBuf, Stop> {
        let dir = self.profiles.join(&self.suite.benchmarks[bench].name);
        std::fs::create_dir_all(&dir)
            .map_err(|e| Stop::Failed(format!("cannot create {}: {e}", dir.display())))?;
        Ok(dir.join(file))
    }

    /// Runs benchmark `bench` with the extra tally `flags`; `label` describes the run in
    /// messages. Fails unless the process exited 0 and the harness printed every iteration.
    pub fn run(
        &mut self,
        bench: usize,
        round: u32,
        label: &str,
        flags: Vec<String>,
    ) -> Result<Timing, Stop> {
        if self.interrupted.load(Ordering::SeqCst) {
            return Err(Stop::Interrupted);
        }
        let b = self.suite.benchmarks[bench].clone();
        let mut flags = flags;
        // Exhaustive runs interpret, and a run may name its own tier.
        if !flags
            .iter()
            .any(|f| f == "--exhaustive" || f.starts_with("--tier"))
        {
            flags.push(format!("--tier={}", self.options.tier));
            // The adaptive controller is fed by method samples: its runs keep the default
            // sampler where the others take none.
            if self.options.tier == "adaptive" {
                if let Some(i) = flags
                    .windows(2)
                    .position(|w| w[0] == "--sampler" && w[1] == "none")
                {
                    flags.drain(i..i + 2);
                }
            }
        }
        let executor = Executor {
            name: "tally".into(),
            kind: ExecutorKind::Tally {
                program: self.tally.clone(),
                flags,
            },
        };
        let argv = executor.argv(&self.suite, &b);
        self.sequence += 1;
        let what = if round == 0 {
            format!("{} {label}", b.name)
        } else {
            format!("{} {label} (round {round})", b.name)
        };
        self.progress.begin(&what);
        let started = Instant::now();
        let run = run_process(&argv, self.options.timeout, &self.interrupted).map_err(|e| {
            Stop::Failed(format!(
                "cannot start {}: {e}\ncommand: {}",
                argv[0],
                argv.join(" ")
            ))
        })?;
        self.progress.end(started.elapsed().as_secs_f64());
        let record =
            InvocationRecord::from_run(&b, label, round, self.sequence, argv.clone(), &run);
        match record.outcome {
            Outcome::Ok => Ok(Timing {
                sequence: self.sequence,
                cpu_s: run.cpu_s(),
                user_s: run.user_s,
                sys_s: run.sys_s,
                wall_s: run.wall_s,
                max_rss_kib: run.max_rss_kib,
                argv,
                stderr: run.stderr.clone(),
            }),
            Outcome::Interrupted => Err(Stop::Interrupted),
            Outcome::Failed => Err(Stop::Failed(format!(
                "{what} failed: {}\ncommand: {}\n{}",
                record.failure.as_deref().unwrap_or("?"),
                argv.join(" "),
                record.output_tail.as_deref().unwrap_or("")
            ))),
        }
    }

    /// Reads a profile a run wrote, then deletes the file unless profiles are kept.
    pub fn take_profile(&self, path: &Path) -> Result<Profile, Stop> {
        let p = Profile::read(path).map_err(|e| {
            Stop::Failed(format!("cannot read the profile {}: {e}", path.display()))
        })?;
        if !self.options.keep_profiles {
            let _ = std::fs::remove_file(path);
        }
        Ok(p)
    }

    /// Ends the progress display and removes the (by now empty) profile directories unless
    /// profiles are kept.
    pub fn finish(&mut self) {
        self.progress.finish();
        if !self.options.keep_profiles {
            if let Ok(dirs) = std::fs::read_dir(&self.profiles) {
                for d in dirs.flatten() {
                    let _ = std::fs::remove_dir(d.path());
                }
            }
            let _ = std::fs::remove_dir(&self.profiles);
        }
    }

    /// Prints a line on stderr without tearing the progress bar.
    pub fn say(&self, line: &str) {
        if !self.options.quiet {
            self.progress.bar.suspend(|| say!("{line}"));
        }
    }
}

/// The progress bar (on a terminal) or a line now and then (in a log), with an estimate of
/// the time left: each remaining run is expected to take as long as runs of its kind on its
/// benchmark took so far (an exhaustive run is much slower than a baseline one).
struct Progress {
    bar: ProgressBar,
    keys: Vec<EtaKey>,
    next: usize,
    durations: BTreeMap<EtaKey, (f64, u32)>,
    started: Instant,
    last_line: Instant,
    quiet: bool,
    tool: String,
}

impl Progress {
    fn new(quiet: bool, tool: String) -> Progress {
        Progress {
            bar: tally_bench::runner::progress_bar(0, quiet),
            keys: Vec::new(),
            next: 0,
            durations: BTreeMap::new(),
            started: Instant::now(),
            last_line: Instant::now(),
            quiet,
            tool,
        }
    }

    fn plan(&mut self, keys: Vec<EtaKey>) {
        self.bar.set_length(keys.len() as u64);
        self.keys = keys;
        self.next = 0;
    }

    fn begin(&mut self, what: &str) {
        let total = self.keys.len();
        let eta = format_duration(self.remaining());
        self.bar.set_message(format!("{what}  ETA {eta}"));
        if !self.quiet
            && self.bar.is_hidden()
            && (self.next == 0 || self.last_line.elapsed() > Duration::from_secs(30))
        {
            say!(
                "{}: run {}/{total}: {what}; {} elapsed, ETA {eta}",
                self.tool,
                self.next + 1,
                format_duration(self.started.elapsed().as_secs_f64())
            );
            self.last_line = Instant::now();
        }
    }

    fn end(&mut self, seconds: f64) {
        if let Some(&key) = self.keys.get(self.next) {
            let d = self.durations.entry(key).or_insert((0.0, 0));
            d.0 += seconds;
            d.1 += 1;
        }
        self.next += 1;
        self.bar.inc(1);
    }

    /// Seconds still to go after the current run starts (the current one included).
    fn remaining(&self) -> f64 {
        let mean = |pred: &dyn Fn(&EtaKey) -> bool| {
            let (s, n) = self
                .durations
                .iter()
                .filter(|(k, _)| pred(k))
                .fold((0.0, 0u32), |a, (_, d)| (a.0 + d.0, a.1 + d.1));
            (n > 0).then(|| s / f64::from(n))
        };
        let Some(overall) = mean(&|_| true) else {
            return f64::NAN;
        };
        self.keys
            .iter()
            .skip(self.next)
            .map(|k| {
                self.durations
                    .get(k)
                    .map(|d| d.0 / f64::from(d.1))
                    .or_else(|| mean(&|x| x.0 == k.0))
                    .unwrap_or(overall)
            })
            .sum()
    }

    fn finish(&mut self) {
        self.bar.finish_and_clear();
        if !self.quiet && self.bar.is_hidden() {
            say!(
                "{}: {} run(s) in {}",
                self.tool,
                self.next,
                format_duration(self.started.elapsed().as_secs_f64())
            );
        }
    }
}
