//! `tally validate -- PROGRAM…`: checks each sampler configuration against slowdowns of known
//! size injected at known places (after Burchell & Marr, OOPSLA 2023 and 2025).
//!
//! One exhaustive interpreted run picks the places (`tally_profile::validation::
//! choose_places`). Runs without a profile give each tier's CPU time, which sizes the delays,
//! and runs with a delay check the delay loop's cost. Then per configuration (tier ×
//! trigger × mechanism): runs with the profile and no delay give what each place is credited
//! without one; runs at a second rate give what a sample costs the program (the extra CPU
//! over the extra samples); and per place and amount, runs with `--inject-delay` give the
//! attribution errors. The analysis is `tally_profile::validation`'s; this module runs the
//! processes (`runs`) and writes the report (`report`, `plot`).

mod plot;
mod report;
mod runs;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use tally_vm::tally_profile::validation::{
    attribution_errors, cbs_call_share, choose_places, credited_ns, exact_calls_by_name,
    expected_ranking, methods_that_call, methods_with_frames, place_ranked_as_expected, ranking,
    sample_cost_ns, Place, PlaceRole,
};

use report::{ConfigResult, DelayCheck, PlaceResult, Report};
use runs::{injected_ns, ns_per_iteration, program_samples, take_profile, Runs};

const AFTER_HELP: &str = "\
What it does:
  1. One exhaustive interpreted run picks the places to slow down: the hottest method, one
     near 5 % of the self time, and one called often that samples barely see, preferably
     one that calls nothing (or --place).
  2. Per tier, --runs runs without a profile: the program's CPU time, which sizes the delays
     (each --amounts percent of it, spread over the place's calls). Then the delay loop is
     checked without a profile: the extra CPU time of runs with the largest delay over
     runs with the place's entry hook alone (--runs of each, at least 5), against what the VM says it injected.
  3. Per configuration (--tiers x --samplers x --mechanisms) and place, --runs baseline runs
     with the profile and the hook alone (what the place is credited without the delay), and
     per amount --runs with `--inject-delay PLACE=D`. Before them, --runs at a second rate
     give what one sample costs the program (the extra CPU over the extra samples), which is
     taken out of the time each sample stands for.
  4. Per tier, CBS (--samplers cbs): the same baseline and delayed runs, with CBS call edges.
     A delay changes no call, so the share of the calls CBS estimates into the place must not
     change either: its relative change is CBS's error.
  5. Per delayed run, the attribution error: (credited with the delay - credited without -
     injected) / injected. 0 is exact; -100 % credits none of it to the place. Per
     configuration the median error with a 95 % bootstrap interval, per place the mean, and
     whether the place took the rank among the top 5 that the injected time gives it.

Polling samplers take each sample at the next yieldpoint, and a delay has none in it: its
samples go to the method that reaches one next, so expect large negative errors at places
where no yieldpoint follows the delay in the method itself.
Few samples in a delay (a slow timer, a small amount) make errors noisy: the report gives
the samples per delay.

Output (-o DIR): validate.md (also printed), validate.svg (the errors per configuration),
validate.json (every figure and every run).

Example (DeltaBlue from SOM's Are We Fast Yet, about 6 minutes here):
  tally validate -o out -- -cp AWFY:AWFY/Core:AWFY/DeltaBlue:SOM/Smalltalk Harness DeltaBlue 80 500";

/// Checks every sampler against slowdowns of known size injected at known places.
#[derive(Parser, Debug)]
#[command(name = "tally validate", version, after_help = AFTER_HELP)]
struct Cli {
    /// Tiers to check.
    #[arg(long, value_delimiter = ',', default_value = "interp,baseline,opt,adaptive",
          value_parser = ["interp", "baseline", "opt", "adaptive"])]
    tiers: Vec<String>,
    /// Triggers to check, and `cbs`: CBS call edges (3:32 on the timer at --timer-rate),
    /// whose estimate of the calls into a place a delay must not change.
    #[arg(long, value_delimiter = ',', default_value = "perf,timer,cbs",
          value_parser = ["perf", "timer", "timer-wall", "itimer", "cbs"])]
    samplers: Vec<String>,
    /// Mechanisms to check.
    #[arg(long, value_delimiter = ',', default_value = "immediate,polling",
          value_parser = ["immediate", "polling"])]
    mechanisms: Vec<String>,
    /// Sampling rate of the perf trigger (Hz).
    #[arg(long, value_name = "HZ", default_value_t = 2000,
          value_parser = clap::value_parser!(u32).range(10..=10_000))]
    perf_rate: u32,
    /// Sampling rate of the timer triggers (Hz; CPU-time timers stop at the kernel tick).
    #[arg(long, value_name = "HZ", default_value_t = 250,
          value_parser = clap::value_parser!(u32).range(10..=10_000))]
    timer_rate: u32,
    /// Delays at each place, in percent of the program's CPU time in the tier. A delay
    /// spread over many short calls is sampled like a coin toss: measuring it within a few
    /// percent takes a few hundred samples in it, so small amounts need long runs, and the
    /// timer's 250 Hz needs larger amounts (100,200 for a 1-second program) than perf's 2 kHz.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "PERCENT",
        default_value = "20,40"
    )]
    amounts: Vec<f64>,
    /// Runs per configuration, place and amount (and of each baseline).
    #[arg(long, short = 'n', value_name = "N", default_value_t = 2,
          value_parser = clap::value_parser!(u32).range(2..))]
    runs: u32,
    /// Places to slow down instead of the chosen ones (`Holder>>selector`, repeatable).
    #[arg(long = "place", value_name = "METHOD")]
    places: Vec<String>,
    /// Fewest calls a chosen place must have, so that its delay is spread over entries.
    #[arg(long, value_name = "N", default_value_t = 10)]
    min_calls: u64,
    /// A configuration whose median error is beyond this (percent) is named in the report.
    #[arg(long, value_name = "PERCENT", default_value_t = 10.0)]
    threshold: f64,
    /// Test-only: also check a deliberately broken sampler, which credits each sample to
    /// the caller of the method it found (`--debug-credit-callers`).
    #[arg(long, hide = true)]
    broken_sampler: bool,
    /// Kill a run after this many seconds (the validation then stops).
    #[arg(long, value_name = "SECONDS", default_value_t = 600.0)]
    timeout: f64,
    /// Output directory [default: tally-validate-DATE-TIME].
    #[arg(short = 'o', long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Write into a directory that is not empty.
    #[arg(long)]
    force: bool,
    /// No progress on stderr.
    #[arg(short = 'q', long)]
    quiet: bool,
    /// The program: `[-cp DIR:DIR…] CLASS|FILE.som [ARGS]`, after `--`.
    #[arg(last = true, required = true, value_name = "PROGRAM")]
    program: Vec<String>,
}

/// One sampler configuration.
#[derive(Clone, Debug)]
pub(super) struct Config {
    pub tier: String,
    pub sampler: String,
    pub mechanism: String,
    pub rate: u32,
    /// `--debug-credit-callers`: the deliberately broken sampler.
    pub broken: bool,
}

impl Config {
    /// A CBS configuration: checks the call graph, not the time credited.
    pub fn is_cbs(&self) -> bool {
        self.sampler == "cbs"
    }

    pub fn name(&self) -> String {
        if self.is_cbs() {
            return format!("{} cbs 3:32@{}", self.tier, self.rate);
        }
        format!(
            "{} {}@{} {}{}",
            self.tier,
            self.sampler,
            self.rate,
            self.mechanism,
            if self.broken { " broken" } else { "" }
        )
    }

    /// The second rate, for the cost of a sample: four times the rate where the trigger
    /// reaches it (perf and wall-clock timers go to 10 kHz), else a quarter of it (CPU-time
    /// timers stop at the kernel tick).
    fn cost_rate(&self) -> u32 {
        let fast = matches!(self.sampler.as_str(), "perf" | "timer-wall");
        if fast && self.rate * 4 <= 10_000 {
            self.rate * 4
        } else {
            (self.rate / 4).max(10)
        }
    }

    fn flags(&self, profile: &Path, rate: u32) -> Vec<String> {
        if self.is_cbs() {
            return vec![
                format!("--tier={}", self.tier),
                format!("--profile={}", profile.display()),
                "--force".into(),
                "--sampler=timer".into(),
                format!("--rate={rate}"),
                "--cbs=3:32".into(),
            ];
        }
        let mut f = vec![
            format!("--tier={}", self.tier),
            format!("--profile={}", profile.display()),
            "--force".into(),
            format!("--sampler={}", self.sampler),
            format!("--mechanism={}", self.mechanism),
            format!("--rate={rate}"),
            "--cbs=off".into(),
        ];
        if self.broken {
            f.push("--debug-credit-callers".into());
        }
        f
    }
}

pub fn main(args: Vec<std::ffi::OsString>, this: PathBuf) -> ExitCode {
    let argv = std::iter::once(std::ffi::OsString::from("tally validate")).chain(args);
    let cli = Cli::parse_from(argv);
    if let Err(e) = check_options(&cli) {
        say!("tally validate: error: {e}");
        return ExitCode::from(2);
    }
    let out = match output_dir(&cli) {
        Ok(out) => out,
        Err(e) => {
            say!("tally validate: error: {e}");
            return ExitCode::from(1);
        }
    };
    let mut runs = Runs {
        this,
        program: cli.program.clone(),
        timeout: Duration::from_secs_f64(cli.timeout.max(1.0)),
        interrupted: tally_bench::runner::install_interrupt_handler("tally validate"),
        quiet: cli.quiet,
        done: 0,
        total: 1,
        started: Instant::now(),
        log: Vec::new(),
    };
    match validate(&cli, &out, &mut runs) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // Keep every run done so far.
            let partial = serde_json::json!({ "error": e, "runs": runs.log });
            let path = out.join("validate.json");
            let text = serde_json::to_string_pretty(&partial).expect("plain data") + "\n";
            let kept = crate::experiment::output::write_file(&path, &text).is_ok();
            say!("tally validate: error: {e}");
            if kept {
                say!(
                    "tally validate: the runs done so far are in {}",
                    path.display()
                );
            }
            ExitCode::from(1)
        }
    }
}

fn check_options(cli: &Cli) -> Result<(), String> {
    if cli.amounts.is_empty() {
        return Err("--amounts needs at least one percentage".into());
    }
    for &a in &cli.amounts {
        if !(a > 0.0 && a <= 1000.0) {
            return Err(format!(
                "--amounts {a}: not a percentage above 0 (at most 1000)"
            ));
        }
    }
    if !(cli.threshold > 0.0 && cli.threshold.is_finite()) {
        return Err(format!(
            "--threshold {}: not a percentage above 0",
            cli.threshold
        ));
    }
    Ok(())
}

/// The output directory, created; one that holds files only with `--force`.
fn output_dir(cli: &Cli) -> Result<PathBuf, String> {
    let out = cli.out.clone().unwrap_or_else(|| {
        PathBuf::from(format!(
            "tally-validate-{}",
            tally_bench::now_rfc3339()
                .replace(['-', ':'], "")
                .replace('T', "-")
                .trim_end_matches('Z')
        ))
    });
    if out.exists() && !out.is_dir() {
        return Err(format!("{} exists and is not a directory", out.display()));
    }
    let holds_files = out.is_dir()
        && std::fs::read_dir(&out)
            .map_err(|e| format!("cannot read {}: {e}", out.display()))?
            .next()
            .is_some();
    if holds_files && !cli.force {
        return Err(format!(
            "{} is not empty; choose another -o DIR or pass --force",
            out.display()
        ));
    }
    std::fs::create_dir_all(&out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    Ok(out)
}

fn configs(cli: &Cli) -> Vec<Config> {
    let mut configs = Vec::new();
    for tier in &cli.tiers {
        for sampler in &cli.samplers {
            if sampler == "cbs" {
                configs.push(Config {
                    tier: tier.clone(),
                    sampler: sampler.clone(),
                    mechanism: "immediate".into(),
                    rate: cli.timer_rate,
                    broken: false,
                });
                continue;
            }
            for mechanism in &cli.mechanisms {
                configs.push(Config {
                    tier: tier.clone(),
                    sampler: sampler.clone(),
                    mechanism: mechanism.clone(),
                    rate: if sampler == "perf" {
                        cli.perf_rate
                    } else {
                        cli.timer_rate
                    },
                    broken: false,
                });
            }
        }
    }
    if cli.broken_sampler {
        let Some(first) = configs.iter().find(|c| !c.is_cbs()) else {
            return configs;
        };
        let mut c = first.clone();
        c.broken = true;
        c.mechanism = "immediate".into();
        configs.push(c);
    }
    configs
}

fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
}

/// The variance of the mean of `xs` (0 for fewer than two).
fn variance_of_mean(xs: &[f64]) -> f64 {
    tally_stats::variance(xs).map_or(0.0, |v| v / xs.len() as f64)
}

/// Step 1: the places, from an exhaustive interpreted run (exact calls, and which methods
/// have frames) sampled at a high rate (self time).
fn choose(cli: &Cli, out: &Path, runs: &mut Runs) -> Result<Vec<Place>, String> {
    let path = out.join("reference.profile");
    runs.run(
        "reference run (interpreted, exhaustive counts, perf at 4 kHz)",
        &[
            "--tier=interp".into(),
            "--exhaustive".into(),
            "--sampler=perf".into(),
            "--rate=4000".into(),
            format!("--profile={}", path.display()),
            "--force".into(),
        ],
    )?;
    let reference = take_profile(&path)?;
    let framed = methods_with_frames(&reference);
    let mut calls =
        exact_calls_by_name(&reference).ok_or("the reference run has no exact counts")?;
    let credited = credited_ns(&reference, 0.0);
    let total: f64 = credited.values().sum();
    if !cli.places.is_empty() {
        return cli
            .places
            .iter()
            .map(|m| {
                let c = *calls
                    .get(m)
                    .ok_or_else(|| format!("--place {m}: the program never called it"))?;
                if !framed.contains(m) {
                    return Err(format!(
                        "--place {m}: it runs without a frame of its own (a primitive, or a \
                         trivial method answered inline), so nothing can be injected at its entry"
                    ));
                }
                Ok(Place {
                    role: PlaceRole::Warm,
                    method: m.clone(),
                    share: credited.get(m).copied().unwrap_or(0.0) / total.max(1.0),
                    calls: c,
                })
            })
            .collect();
    }
    calls.retain(|m, _| framed.contains(m));
    let callers = methods_that_call(&reference);
    let places = choose_places(&credited, &calls, &callers, cli.min_calls);
    if places.is_empty() {
        return Err(format!(
            "no method with a frame of its own was called at least {} times: nothing to slow \
             down (see --min-calls and --place)",
            cli.min_calls
        ));
    }
    Ok(places)
}

/// Step 2: each tier's unprofiled CPU time (s), and the check of the delay loop.
fn baselines(
    cli: &Cli,
    places: &[Place],
    runs: &mut Runs,
) -> Result<(BTreeMap<String, f64>, DelayCheck), String> {
    let n = cli.runs as usize;
    let mut cpu = BTreeMap::new();
    for tier in &cli.tiers {
        let mut times = Vec::new();
        for k in 0..n {
            let r = runs.run(
                &format!("{tier}: no profile, run {}/{n}", k + 1),
                &[format!("--tier={tier}")],
            )?;
            times.push(r.cpu_s);
        }
        cpu.insert(tier.clone(), mean(&times));
    }
    let tier = &cli.tiers[0];
    let place = &places[0];
    let amount = cli.amounts.iter().copied().fold(0.0, f64::max);
    let delay_ns = delay_per_call(amount, cpu[tier], place.calls);
    // The hook alone (a 1 ns delay), then the delay: their difference is the delay's.
    let mut cpu_of = [Vec::new(), Vec::new()];
    let mut injected = [Vec::new(), Vec::new()];
    let mut per_iteration = Vec::new();
    let n = n.max(CHECK_RUNS);
    for (i, delay) in [1, delay_ns].into_iter().enumerate() {
        for k in 0..n {
            let what = if i == 0 { "hook only" } else { "delayed" };
            let r = runs.run(
                &format!(
                    "{tier}: delay check at {}, {what}, no profile, run {}/{n}",
                    place.method,
                    k + 1
                ),
                &[
                    format!("--tier={tier}"),
                    format!("--inject-delay={}={delay}", place.method),
                ],
            )?;
            cpu_of[i].push(r.cpu_s);
            injected[i]
                .push(injected_ns(&r.stderr).ok_or_else(|| nothing_injected(&place.method))?);
            per_iteration.extend(ns_per_iteration(&r.stderr));
        }
    }
    let check = DelayCheck {
        tier: tier.clone(),
        method: place.method.clone(),
        ns_per_iteration: mean(&per_iteration),
        injected_ms: (mean(&injected[1]) - mean(&injected[0])) / 1e6,
        measured_ms: (mean(&cpu_of[1]) - mean(&cpu_of[0])) * 1e3,
        measured_pm_ms: 1.96
            * (variance_of_mean(&cpu_of[0]) + variance_of_mean(&cpu_of[1])).sqrt()
            * 1e3,
    };
    Ok((cpu, check))
}

/// Runs of each kind in the delay check at least: the difference of two means of a
/// noisy CPU time needs a few runs to be within a few percent.
const CHECK_RUNS: usize = 5;

/// The delay per call, in whole ns, that adds `percent` of `cpu_s` over `calls` calls.
fn delay_per_call(percent: f64, cpu_s: f64, calls: u64) -> u64 {
    ((percent / 100.0 * cpu_s * 1e9 / calls.max(1) as f64) as u64).max(1)
}

fn nothing_injected(method: &str) -> String {
    format!("{method}: the VM injected no delay (see its warning with --place {method})")
}

/// One profiled run: its CPU time, its profile, and the delay it injected (ns).
struct Profiled {
    cpu_s: f64,
    profile: tally_vm::tally_profile::Profile,
    injected_ns: f64,
}

/// Runs `config` at `rate` with `delay_ns` at each entry of `method`.
fn profiled(
    runs: &mut Runs,
    what: &str,
    config: &Config,
    rate: u32,
    (method, delay_ns): (&str, u64),
    path: &Path,
) -> Result<Profiled, String> {
    let mut flags = config.flags(path, rate);
    flags.push(format!("--inject-delay={method}={delay_ns}"));
    let r = runs.run(what, &flags)?;
    Ok(Profiled {
        cpu_s: r.cpu_s,
        profile: take_profile(path)?,
        injected_ns: injected_ns(&r.stderr).ok_or_else(|| nothing_injected(method))?,
    })
}

/// Step 3: one configuration's runs and errors. Every run, the baselines too, has the entry
/// hook at the place (baselines with a 1 ns delay), so that the delay is the only difference
/// between a baseline and a delayed run: the hook's own cost is the place's in both.
fn check_config(
    cli: &Cli,
    config: &Config,
    places: &[Place],
    cpu_s: f64,
    out: &Path,
    runs: &mut Runs,
) -> Result<ConfigResult, String> {
    let n = cli.runs as usize;
    let name = config.name();
    let path = out.join("run.profile");
    let period_ns = 1e9 / f64::from(config.rate);

    // What a sample costs: the first place's baseline at two rates.
    let first = places[0].method.as_str();
    let cost_rate = config.cost_rate();
    let (mut fast, mut first_base) = (Vec::new(), Vec::new());
    for k in 0..n {
        let what = format!(
            "{name}: at {cost_rate} Hz for a sample's cost, run {}/{n}",
            k + 1
        );
        fast.push(profiled(runs, &what, config, cost_rate, (first, 1), &path)?);
    }
    for k in 0..n {
        let what = format!("{name}: baseline at {first}, run {}/{n}", k + 1);
        first_base.push(profiled(
            runs,
            &what,
            config,
            config.rate,
            (first, 1),
            &path,
        )?);
    }
    let cpu_and_samples = |v: &[Profiled]| {
        let cpu: Vec<f64> = v.iter().map(|p| p.cpu_s).collect();
        let samples: Vec<f64> = v.iter().map(|p| program_samples(&p.profile)).collect();
        (mean(&cpu), mean(&samples))
    };
    let (base_cpu, base_samples) = cpu_and_samples(&first_base);
    let (fast_cpu, fast_samples) = cpu_and_samples(&fast);
    // A cost of half the period or more would leave samples standing for nothing real.
    let sample_cost = sample_cost_ns((base_cpu, fast_cpu), (base_samples, fast_samples))
        .unwrap_or(0.0)
        .min(period_ns / 2.0);

    let mut results = Vec::new();
    let mut first_base = Some(first_base);
    for place in places {
        let method = place.method.as_str();
        let base = match first_base.take() {
            Some(b) => b,
            None => (0..n)
                .map(|k| {
                    let what = format!("{name}: baseline at {method}, run {}/{n}", k + 1);
                    profiled(runs, &what, config, config.rate, (method, 1), &path)
                })
                .collect::<Result<Vec<_>, String>>()?,
        };
        let base_credited: Vec<BTreeMap<String, f64>> = base
            .iter()
            .map(|b| credited_ns(&b.profile, sample_cost))
            .collect();
        let without: Vec<f64> = base_credited
            .iter()
            .map(|b| b.get(method).copied().unwrap_or(0.0))
            .collect();
        let base_injected = mean(&base.iter().map(|b| b.injected_ns).collect::<Vec<_>>());
        let mut mean_base: BTreeMap<String, f64> = BTreeMap::new();
        for b in &base_credited {
            for (m, t) in b {
                *mean_base.entry(m.clone()).or_insert(0.0) += t / n as f64;
            }
        }
        for &amount in &cli.amounts {
            let delay_ns = delay_per_call(amount, cpu_s, place.calls);
            let (mut credited_with, mut injected) = (Vec::new(), Vec::new());
            let mut ranked = 0;
            for k in 0..n {
                let what = format!("{name}: {amount} % at {method}, run {}/{n}", k + 1);
                let d = profiled(runs, &what, config, config.rate, (method, delay_ns), &path)?;
                let c = credited_ns(&d.profile, sample_cost);
                let extra = d.injected_ns - base_injected;
                credited_with.push(c.get(method).copied().unwrap_or(0.0));
                injected.push(extra);
                let expected = expected_ranking(&mean_base, method, extra);
                if place_ranked_as_expected(&ranking(&c), &expected, method, 5) {
                    ranked += 1;
                }
            }
            let errors = attribution_errors(&credited_with, &injected, &without)
                .ok_or_else(|| nothing_injected(method))?;
            results.push(PlaceResult {
                place: place.clone(),
                amount,
                errors,
                ranked_as_expected: ranked,
                samples_in_delay: mean(&injected) / (period_ns - sample_cost),
                credited_without_ns: without.clone(),
                credited_with_ns: credited_with,
                injected_ns: injected,
            });
        }
    }
    Ok(ConfigResult::new(
        config.clone(),
        sample_cost,
        base_cpu,
        results,
    ))
}

/// Step 3 for CBS: per place, the share of all calls its CBS call graph says went into the
/// place, with the delay against without. Calls do not change when a method is slowed down,
/// so neither should the estimate: its relative change is the error. A place CBS never saw
/// a call into (a cold one, in a short run) has no error.
fn check_cbs(
    cli: &Cli,
    config: &Config,
    places: &[Place],
    cpu_s: f64,
    out: &Path,
    runs: &mut Runs,
) -> Result<ConfigResult, String> {
    let n = cli.runs as usize;
    let name = config.name();
    let path = out.join("run.profile");
    let mut results = Vec::new();
    let mut cpu = Vec::new();
    for place in places {
        let method = place.method.as_str();
        let mut base = Vec::new();
        for k in 0..n {
            let what = format!("{name}: baseline at {method}, run {}/{n}", k + 1);
            let b = profiled(runs, &what, config, config.rate, (method, 1), &path)?;
            cpu.push(b.cpu_s);
            base.extend(cbs_call_share(&b.profile, method));
        }
        let base_share = mean(&base);
        for &amount in &cli.amounts {
            let delay_ns = delay_per_call(amount, cpu_s, place.calls);
            let (mut shares, mut injected) = (Vec::new(), Vec::new());
            for k in 0..n {
                let what = format!("{name}: {amount} % at {method}, run {}/{n}", k + 1);
                let d = profiled(runs, &what, config, config.rate, (method, delay_ns), &path)?;
                shares.extend(cbs_call_share(&d.profile, method));
                injected.push(d.injected_ns);
            }
            let errors = if base_share > 0.0 {
                shares.iter().map(|s| s / base_share - 1.0).collect()
            } else {
                Vec::new()
            };
            results.push(PlaceResult {
                place: place.clone(),
                amount,
                errors,
                ranked_as_expected: 0,
                samples_in_delay: 0.0,
                credited_without_ns: base.clone(),
                credited_with_ns: shares,
                injected_ns: injected,
            });
        }
    }
    Ok(ConfigResult::new(config.clone(), 0.0, mean(&cpu), results))
}

fn validate(cli: &Cli, out: &Path, runs: &mut Runs) -> Result<(), String> {
    let configs = configs(cli);
    let n = cli.runs as usize;
    let places = choose(cli, out, runs)?;
    let per_place = places.len() * (1 + cli.amounts.len());
    runs.total = 1
        + cli.tiers.len() * n
        + 2 * n.max(CHECK_RUNS)
        + configs
            .iter()
            .map(|c| n * (per_place + usize::from(!c.is_cbs())))
            .sum::<usize>();
    let (cpu, delay_check) = baselines(cli, &places, runs)?;
    let mut results = Vec::new();
    for config in &configs {
        let cpu_s = cpu[&config.tier];
        results.push(if config.is_cbs() {
            check_cbs(cli, config, &places, cpu_s, out, runs)?
        } else {
            check_config(cli, config, &places, cpu_s, out, runs)?
        });
    }
    let report = Report {
        program: cli.program.clone(),
        amounts: cli.amounts.clone(),
        runs: cli.runs,
        threshold: cli.threshold / 100.0,
        places,
        cpu_s: cpu,
        delay_check,
        configs: results,
    };
    let md = report.markdown();
    print!("{md}");
    let write = |name: &str, text: &str| {
        let path = out.join(name);
        crate::experiment::output::write_file(&path, text)
    };
    write("validate.md", &md)?;
    write("validate.svg", &plot::errors(&report))?;
    let json = report.json(&runs.log);
    write(
        "validate.json",
        &(serde_json::to_string_pretty(&json).expect("plain data") + "\n"),
    )?;
    if !cli.quiet {
        say!(
            "tally validate: {} runs in {}; written to {}",
            runs.done,
            runs::minutes_of(runs.started.elapsed().as_secs_f64()),
            out.display()
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delay_spreads_its_share_of_the_run_over_the_calls() {
        // 10 % of 2 s over 1,000 calls: 200 µs each.
        assert_eq!(delay_per_call(10.0, 2.0, 1000), 200_000);
        // Never zero: a delay of 0 ns would inject nothing.
        assert_eq!(delay_per_call(1.0, 1e-6, 1_000_000), 1);
    }

    #[test]
    fn the_second_rate_is_faster_where_the_trigger_reaches_it() {
        let c = |sampler: &str, rate| Config {
            tier: "interp".into(),
            sampler: sampler.into(),
            mechanism: "immediate".into(),
            rate,
            broken: false,
        };
        assert_eq!(c("perf", 1000).cost_rate(), 4000);
        assert_eq!(c("perf", 4000).cost_rate(), 1000);
        assert_eq!(c("timer", 250).cost_rate(), 62);
        assert_eq!(c("timer-wall", 1000).cost_rate(), 4000);
    }
}
