//! `tally-tierfuzz`: runs generated SOM programs in every tier of a `tally` binary and saves
//! each divergence from the interpreter, shrunk, with the command that shows it.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::Parser;
use tally_tierfuzz::{fuzz, generate, Settings};

#[derive(Parser)]
#[command(
    about = "Differential fuzzer of Tally's tiers: generated programs must behave in \
every compiled tier, collector and stress setting as they do in the interpreter"
)]
struct Args {
    /// The `tally` binary to test.
    #[arg(long, default_value = "target/release/tally")]
    tally: PathBuf,
    /// Run for this many minutes (fractions allowed).
    #[arg(long)]
    minutes: Option<f64>,
    /// Run this many programs.
    #[arg(long)]
    programs: Option<u64>,
    /// The first seed; programs use consecutive seeds from there.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Save each divergence (shrunk program, repro.sh, README.txt) into a directory here.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Seconds shrinking one divergence may take (0: save it unshrunk).
    #[arg(long, default_value_t = 300)]
    shrink_seconds: u64,
    /// Only these configurations (comma-separated names; see --list-configs).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Stop after this many divergences.
    #[arg(long, default_value_t = 20)]
    max_divergences: usize,
    /// Print the configurations and their flags, and stop.
    #[arg(long)]
    list_configs: bool,
    /// Print the program of --seed, and stop.
    #[arg(long)]
    print: bool,
}

fn main() -> std::io::Result<()> {
    let args = Args::parse();
    if args.print {
        print!("{}", generate(args.seed).listing());
        return Ok(());
    }
    if args.list_configs {
        let tally = tally_tierfuzz::Tally::new(&args.tally);
        println!("every program:");
        for config in tally.core_configs() {
            println!("  {:<32} {}", config.name, config.flags.join(" "));
        }
        println!(
            "one program in {} each (by seed):",
            tally.extra_configs().len()
        );
        for config in tally.extra_configs() {
            println!("  {:<32} {}", config.name, config.flags.join(" "));
        }
        return Ok(());
    }
    if args.minutes.is_none() && args.programs.is_none() {
        eprintln!("tally-tierfuzz: say how long: --minutes M or --programs N");
        std::process::exit(2);
    }
    let settings = Settings {
        tally: args.tally,
        first_seed: args.seed,
        programs: args.programs,
        time: args.minutes.map(|m| Duration::from_secs_f64(m * 60.0)),
        out: args.out,
        shrink_time: Duration::from_secs(args.shrink_seconds),
        only: args.only,
        max_divergences: args.max_divergences,
    };
    let mut last = Instant::now();
    let summary = fuzz(&settings, &mut |p| {
        if last.elapsed() >= Duration::from_secs(10) {
            last = Instant::now();
            eprintln!(
                "[tierfuzz] {} programs, {} runs, {} divergences, {:.0} programs/min",
                p.programs,
                p.runs,
                p.divergences,
                p.programs_per_minute()
            );
        }
    })?;
    let p = &summary.progress;
    eprintln!(
        "[tierfuzz] done: {} programs (seeds {}..{}), {} runs in {:.0?}, {:.0} programs/min",
        p.programs,
        settings.first_seed,
        settings.first_seed + p.programs,
        p.runs,
        p.elapsed,
        p.programs_per_minute()
    );
    for (config, (compiles, deopts)) in &p.compiled {
        eprintln!("[tierfuzz]   {config:<32} {compiles:>7} opt compiles {deopts:>6} deopts");
    }
    for d in &summary.divergences {
        eprintln!(
            "[tierfuzz] DIVERGENCE seed {} in {}: {}{}",
            d.seed,
            d.config.name,
            d.detail,
            d.saved_to
                .as_ref()
                .map(|p| format!(" (saved in {})", p.display()))
                .unwrap_or_default()
        );
    }
    if !summary.divergences.is_empty() {
        std::process::exit(1);
    }
    Ok(())
}
