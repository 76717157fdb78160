//! A fuzzing campaign: programs generated from consecutive seeds, each run interpreted and
//! in every configuration, every divergence shrunk and saved with the command that shows it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::ast::Program;
use crate::compare::{compare, first_difference, Disagreement};
use crate::generate::generate;
use crate::run::{write_program, Config, Exit, Outcome, Tally};
use crate::shrink::shrink;

pub struct Settings {
    /// The `tally` binary under test.
    pub tally: PathBuf,
    pub first_seed: u64,
    /// Stop after this many programs…
    pub programs: Option<u64>,
    /// … or once this much time has passed, whichever comes first.
    pub time: Option<Duration>,
    /// Where each divergence is saved (a directory per divergence).
    pub out: Option<PathBuf>,
    /// How long shrinking one divergence may take (zero: not shrunk).
    pub shrink_time: Duration,
    /// Run only the configurations with these names (all when empty).
    pub only: Vec<String>,
    /// Stop after this many divergences.
    pub max_divergences: usize,
}

/// What a campaign did so far.
#[derive(Clone, Debug, Default)]
pub struct Progress {
    pub programs: u64,
    pub runs: u64,
    pub divergences: usize,
    pub elapsed: Duration,
    /// Per configuration: optimizing compiles and deoptimizations its runs reported.
    pub compiled: BTreeMap<String, (u64, u64)>,
}

impl Progress {
    pub fn programs_per_minute(&self) -> f64 {
        self.programs as f64 * 60.0 / self.elapsed.as_secs_f64().max(1e-3)
    }
}

#[derive(Clone, Debug)]
pub struct Divergence {
    pub seed: u64,
    pub config: Config,
    pub disagreement: Disagreement,
    /// The first difference, as shown by the shrunk program.
    pub detail: String,
    /// Shrunk, if shrinking was on.
    pub program: Program,
    pub original_size: usize,
    /// Other configurations the original program diverged in.
    pub also_in: Vec<String>,
    pub saved_to: Option<PathBuf>,
}

pub struct Summary {
    pub progress: Progress,
    pub divergences: Vec<Divergence>,
}

/// The interpreter's run of a program longer than this is not used (none should be).
const REFERENCE_TIMEOUT: Duration = Duration::from_secs(30);

pub fn fuzz(settings: &Settings, report: &mut dyn FnMut(&Progress)) -> std::io::Result<Summary> {
    let tally = Tally::new(&settings.tally);
    let start = Instant::now();
    let mut progress = Progress::default();
    let mut divergences = Vec::new();
    for seed in settings.first_seed.. {
        let out_of_programs = settings.programs.is_some_and(|n| progress.programs >= n);
        let out_of_time = settings.time.is_some_and(|t| start.elapsed() >= t);
        if out_of_programs || out_of_time || divergences.len() >= settings.max_divergences {
            break;
        }
        let program = generate(seed);
        let dir = tempfile::Builder::new().prefix("tierfuzz-").tempdir()?;
        write_program(dir.path(), &program)?;
        let reference = tally.run(dir.path(), &Config::reference(), REFERENCE_TIMEOUT)?;
        progress.runs += 1;
        let mut found: Option<Divergence> = None;
        if reference.exit != Exit::TimedOut {
            let configs = tally.configs_for(seed);
            let chosen = configs
                .iter()
                .filter(|c| settings.only.is_empty() || settings.only.contains(&c.name));
            // The interpreter's runs, by how often they repeat the program.
            let mut references = vec![(1, reference)];
            for config in chosen {
                let known = references.iter().position(|(r, _)| *r == config.repeats);
                let index = match known {
                    Some(index) => index,
                    None => {
                        let timeout = REFERENCE_TIMEOUT * config.repeats;
                        let run = tally.run(dir.path(), &config.reference_for(), timeout)?;
                        progress.runs += 1;
                        references.push((config.repeats, run));
                        references.len() - 1
                    }
                };
                let reference = &references[index].1;
                if reference.exit == Exit::TimedOut {
                    continue;
                }
                let mut got = tally.run(dir.path(), config, timeout_after(reference))?;
                progress.runs += 1;
                if got.exit == Exit::TimedOut {
                    // Slow is not hung: collections every few allocations can take a
                    // compiled run far past the interpreter's time, and more so on a loaded
                    // machine. A run that was killed gets ten times as long again.
                    got = tally.run(dir.path(), config, timeout_after(reference) * 10)?;
                    progress.runs += 1;
                }
                let counts = progress.compiled.entry(config.name.clone()).or_default();
                counts.0 += u64::from(got.opt_compiles);
                counts.1 += u64::from(got.deopts);
                let Some(disagreement) = compare(reference, &got) else {
                    continue;
                };
                match &mut found {
                    Some(first) => first.also_in.push(config.name.clone()),
                    None => {
                        found = Some(diverged(
                            &tally,
                            settings,
                            seed,
                            &program,
                            config,
                            disagreement,
                            reference,
                            &got,
                        )?)
                    }
                }
            }
        }
        if let Some(mut divergence) = found {
            if let Some(out) = &settings.out {
                divergence.saved_to = Some(save(&tally, out, &divergence)?);
            }
            divergences.push(divergence);
        }
        progress.programs += 1;
        progress.divergences = divergences.len();
        progress.elapsed = start.elapsed();
        report(&progress);
    }
    Ok(Summary {
        progress,
        divergences,
    })
}

/// A compiled run may take much longer than the interpreted one (collections every few
/// allocations, compiles), but not forever.
fn timeout_after(reference: &Outcome) -> Duration {
    (reference.elapsed * 40).max(Duration::from_secs(20))
}

#[allow(clippy::too_many_arguments)]
fn diverged(
    tally: &Tally,
    settings: &Settings,
    seed: u64,
    program: &Program,
    config: &Config,
    disagreement: Disagreement,
    reference: &Outcome,
    got: &Outcome,
) -> std::io::Result<Divergence> {
    let mut detail = describe(disagreement, reference, got);
    let mut shrunk = program.clone();
    if !settings.shrink_time.is_zero() {
        let reference_time = reference.elapsed;
        let still = |candidate: &Program| {
            shows(tally, candidate, config, disagreement, reference_time).unwrap_or(None)
        };
        let result = shrink(
            program,
            &mut |p| still(p).is_some(),
            Instant::now() + settings.shrink_time,
        );
        shrunk = result.program;
        if let Some(d) = still(&shrunk) {
            detail = d;
        }
    }
    Ok(Divergence {
        seed,
        config: config.clone(),
        disagreement,
        detail,
        original_size: program.size(),
        program: shrunk,
        also_in: Vec::new(),
        saved_to: None,
    })
}

/// Whether `program` still disagrees with the interpreter in `config` the same way; if so,
/// how. Runs that depend on timing (the adaptive tier's compiles follow samples) get three
/// tries.
fn shows(
    tally: &Tally,
    program: &Program,
    config: &Config,
    disagreement: Disagreement,
    reference_time: Duration,
) -> std::io::Result<Option<String>> {
    let dir = tempfile::Builder::new()
        .prefix("tierfuzz-shrink-")
        .tempdir()?;
    write_program(dir.path(), program)?;
    let limit = reference_time * 4 + Duration::from_secs(3);
    let reference = tally.run(dir.path(), &config.reference_for(), limit * config.repeats)?;
    if reference.exit == Exit::TimedOut {
        return Ok(None);
    }
    let tries = if config.name.starts_with("adaptive") {
        3
    } else {
        1
    };
    for _ in 0..tries {
        let got = tally.run(dir.path(), config, timeout_after(&reference))?;
        if compare(&reference, &got) == Some(disagreement) {
            return Ok(Some(describe(disagreement, &reference, &got)));
        }
    }
    Ok(None)
}

fn describe(disagreement: Disagreement, want: &Outcome, got: &Outcome) -> String {
    match disagreement {
        Disagreement::Crash | Disagreement::Stderr => {
            format!(
                "{disagreement}: {}",
                first_difference(&want.stderr, &got.stderr)
            )
        }
        Disagreement::Hang => format!("{disagreement}: killed after {:?}", got.elapsed),
        Disagreement::ExitStatus => {
            format!(
                "{disagreement}: expected {:?}, got {:?}",
                want.exit, got.exit
            )
        }
        Disagreement::Stdout => {
            format!(
                "{disagreement}: {}",
                first_difference(&want.stdout, &got.stdout)
            )
        }
        Disagreement::CompileFailed => format!("{disagreement}: {}", got.failed_compiles[0]),
    }
}

/// Saves a divergence into its own directory under `out`: the (shrunk) program, the cost
/// models, `repro.sh` (reruns it interpreted and in the configuration) and `README.txt`
/// (what differed).
fn save(tally: &Tally, out: &Path, d: &Divergence) -> std::io::Result<PathBuf> {
    let dir = out.join(format!("seed-{}-{}", d.seed, d.config.name));
    std::fs::create_dir_all(dir.join("original"))?;
    write_program(&dir, &d.program)?;
    write_program(&dir.join("original"), &generate(d.seed))?;
    let interp = tally.command_line(&d.config.reference_for());
    let tier = tally.command_line(&d.config);
    let script = format!(
        "#!/bin/sh\n# Seed {} diverges in {} ({}).\ncd \"$(dirname \"$0\")\"\n\
         {interp} > interp.out 2> interp.err; echo \"interp: exit $?\"\n\
         {tier} > tier.out 2> tier.err; echo \"{}: exit $?\"\n\
         diff interp.out tier.out && diff interp.err tier.err\n",
        d.seed, d.config.name, d.disagreement, d.config.name
    );
    let repro = dir.join("repro.sh");
    whole(&repro, &script)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&repro, std::fs::Permissions::from_mode(0o755))?;
    let readme = format!(
        "Seed {seed}, configuration {name} ({flags}): {detail}\n\
         Also diverged in: {also}\n\
         Shrunk from {from} to {to} statements and expressions.\n\
         Rerun: ./repro.sh (interpreter and {name}, then diff); original/ holds the program\n\
         before shrinking.\n",
        seed = d.seed,
        name = d.config.name,
        flags = d.config.flags.join(" "),
        detail = d.detail,
        also = if d.also_in.is_empty() {
            "none".into()
        } else {
            d.also_in.join(", ")
        },
        from = d.original_size,
        to = d.program.size(),
    );
    whole(&dir.join("README.txt"), &readme)?;
    Ok(dir)
}

/// A file of a saved divergence, written whole (`tally_output`): one run's save replaces an
/// earlier one of the same seed and configuration.
fn whole(path: &Path, text: &str) -> std::io::Result<()> {
    tally_output::write(path, text.as_bytes(), tally_output::IfExists::Replace)
        .map_err(std::io::Error::other)
}
