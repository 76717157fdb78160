//! `tally`: run a SOM program.

use std::path::PathBuf;
use std::process::ExitCode;

/// `eprintln!` that ignores a closed stderr (`tally … 2>&1 | head`): a message that cannot be
/// shown must not turn a finished run into a panic.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod calibrate;
mod disasm_cmd;
mod experiment;
mod gc_hints_cmd;
mod phases_cmd;
mod profile_cmd;
mod validate;
mod vertical_cmd;
mod vertical_phases;

use clap::{Parser, ValueEnum};
use tally_vm::tally_controller::CallGraphSource;
use tally_vm::tally_profile::trigger::{auto_trigger, TimerClock, Trigger};
use tally_vm::tally_profile::{CbsConfig, Mechanism};
use tally_vm::{ClockKind, ProfileOptions, Vm, VmError, VmOptions};

const AFTER_HELP: &str = "\
Examples:
  tally Hello.som                       run the class in Hello.som (its directory joins the class path)
  tally -cp lib:app Main arg1 arg2      load Main from the class path and send it run: with the arguments
  tally -cp SOM/Smalltalk:SOM/TestSuite TestHarness
                                        run SOM's test suite with SOM's own core library
  tally --profile=run.profile Hello.som profile a run (250 samples per CPU second and CBS call edges; see the profiling options)
  tally record -o run.profile -- -cp lib Main
                                        the same, spelled like perf record
  tally report run.profile              flat profile, call tree, hottest call edges, VM states
  tally compare exact.profile run.profile
                                        accuracy of one profile against another, and a per-method diff
  tally export pprof run.profile -o run.pb.gz
                                        also: folded, flamegraph, speedscope, firefox, chrome
  tally disasm 'Vector>>forEach:'       a method's bytecode with source lines
  tally vertical cache -- Main.som      an instrumented run: cache misses per method, line, class
  tally bench bench/smoke.toml          benchmark (see `tally bench --help`)
  tally experiment cbs                  profiling-accuracy experiments: CBS call graphs, method
  tally experiment sampling             sampling, GC hints, inlining directed by call graphs
                                        (see `tally experiment --help`)
  tally validate -- Main.som            every sampler checked against delays of known size at
                                        known places (see `tally validate --help`)

The main class is sent `run:` with an Array of the command-line words (its name first) if it
understands `run:`, else `run`. Classes are looked up on the class path first, then in Tally's
embedded standard library, so a directory that defines Object, Integer, … replaces ours.

Files: every file Tally writes is whole or absent. It is written to a temporary beside it and
renamed into place when complete; an error leaves the old file (or none) and no temporary.

Exit status of a run:
  0       the program ended, and every file asked for (--profile, --gc-hints-record,
          --phases-record, --phases-report) was written
  N       the program's own: `system exit: N`
  1       the program failed (a SOM error, a class that does not load, stack or heap
          exhausted), or the VM did
  2       the command line cannot be used (an unknown option, an output file that cannot
          be made); the program did not run
  74      the program ended, but a file asked for could not be written (said on stderr,
          after the program's output); when the program failed, its status wins
  128+S   stopped by signal S (130 for SIGINT); the profile is still written";

/// Tally: a virtual machine for SOM, the Simple Object Machine.
#[derive(Parser, Debug)]
#[command(name = "tally", version, about, after_help = AFTER_HELP)]
struct Cli {
    /// Class path: directories separated by ':' (also spelled -cp, as in other SOM VMs).
    #[arg(long = "classpath", value_name = "DIR:DIR…")]
    classpath: Vec<String>,

    /// Collect garbage every N allocations (exercises the GC; slow).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    gc_stress: Option<u64>,

    /// The garbage collector (an MMTk plan): genimmix (the default: a copying nursery and an
    /// Immix old generation), gencopy (a copying nursery and a semi-space old generation),
    /// semispace (two copying halves), immix (mark-region: reuses free lines, copies
    /// only to defragment) or marksweep (size-class free lists, never moves objects). The
    /// generational plans add a write barrier to every store into the heap.
    /// [default: genimmix]
    #[arg(long = "gc", value_name = "PLAN", value_parser = parse_gc_plan)]
    gc_plan: Option<tally_vm::GcPlan>,

    /// Upper bound of the heap, e.g. 64M, 2G (default: grows as needed).
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    heap_size: Option<usize>,

    /// Where the growing heap starts, and the least it keeps (default 16M under the
    /// generational collectors, 64M under the others): it bounds a small program's memory.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, conflicts_with = "heap_size")]
    heap_min: Option<usize>,

    /// The most a generational collector's nursery holds before it is collected, e.g. 4M
    /// (default 4M; other collectors ignore it)
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    nursery: Option<usize>,

    /// Print garbage-collection statistics to stderr when the program ends.
    #[arg(long)]
    gc_stats: bool,

    /// Record GC hints to FILE (Buytaert et al.'s GCH): the run measures the live data with a
    /// full collection at method entries and exits (the rare ones, at their first call in
    /// every 256 KiB of allocation, and others to sample the curve between them) and writes the
    /// points where it is repeatedly at a local minimum and low. The run is interpreted, under
    /// SemiSpace, and much slower than usual: record a short run of the program.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "gc_hints",
        help_heading = "GC hints"
    )]
    gc_hints_record: Option<PathBuf>,

    /// Use the GC hints in FILE (from --gc-hints-record, for this program and this Tally):
    /// once a collection is near (three quarters of the nursery, or of the heap left free,
    /// allocated), each hinted method entry or exit asks a cost model whether to collect
    /// there: the nursery, the whole heap (when it would reclaim at least twice the live data
    /// the profile expects there and the heap is nearly full), or nothing. A file that does
    /// not fit (another program, another Tally, damaged) is an error.
    #[arg(long, value_name = "FILE", help_heading = "GC hints")]
    gc_hints: Option<PathBuf>,

    /// With --gc-hints: a file that cannot be used is a warning, and the run goes on without
    /// hints.
    #[arg(long, requires = "gc_hints", help_heading = "GC hints")]
    gc_hints_optional: bool,

    /// Time every method of the run into FILE (MonitorMethod's first run): calls and
    /// inclusive time, read from a clock at each entry and exit, with the probes' own cost
    /// taken out, and what a counter reading costs here. Then `tally vertical phases FILE`
    /// chooses the phases. Use the tier the counting run will use.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["phases", "gc_hints", "gc_hints_record"],
        help_heading = "Method-level phases"
    )]
    phases_record: Option<PathBuf>,

    /// Read counters (perf_events: CPU time, page faults, context switches, and cycles,
    /// instructions, cache and branch misses where there is a PMU) at the entry and exit of
    /// the phases in FILE (from `tally vertical phases`) only, at every collection (on the
    /// collector's threads) and around every compilation (on the compiler's). The report,
    /// per phase each metric's mean and CoV and an ANOVA across phases, goes to stderr when
    /// the program ends.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["gc_hints", "gc_hints_record"],
        help_heading = "Method-level phases"
    )]
    phases: Option<PathBuf>,

    /// Delay every entry of METHOD (`Holder>>selector`) by DURATION of busy CPU work (a
    /// loop calibrated at start-up; 50us, 2ms, or ns), in every tier: a slowdown of known
    /// size at a known place, to check what a profile credits it to. What was injected goes
    /// to stderr when the program ends.
    #[arg(
        long,
        value_name = "METHOD=DURATION",
        value_parser = parse_injection,
        conflicts_with_all = ["phases", "phases_record", "gc_hints", "gc_hints_record"],
        help_heading = "Validation"
    )]
    inject_delay: Option<(String, u64)>,

    /// Test-only: a deliberately broken sampler that credits every sample to the caller of
    /// the method it was taken in, for checking that sampler checks catch it.
    #[arg(long, hide = true, requires = "profile")]
    debug_credit_callers: bool,

    /// With --phases: also write the report as JSON to FILE.
    #[arg(
        long,
        value_name = "FILE",
        requires = "phases",
        help_heading = "Method-level phases"
    )]
    phases_report: Option<PathBuf>,

    /// Record a profile of the run to FILE (default tally.profile). It streams to the run's
    /// own FILE.PID.partial as the run goes (a killed run leaves that, readable up to its last
    /// half second) and is renamed to FILE when the run ends; SIGINT, SIGTERM and SIGHUP end
    /// the run and write it. The directory is checked before the program starts. A profile
    /// that cannot be written (a full disk) fails the run (exit status 74) and keeps what
    /// was streamed in FILE.PID.partial, saying how much. Runs started together on one FILE
    /// each stream to their own file: with --force the last to finish wins; without it the
    /// first does, and the others keep their whole profile in FILE.PID.partial and fail.
    #[arg(long, value_name = "FILE", num_args = 0..=1, require_equals = true, default_missing_value = "tally.profile", help_heading = "Profiling")]
    profile: Option<PathBuf>,

    /// What triggers samples. `auto` (the default) takes the cheapest trigger that reaches
    /// the rate: the VM thread's CPU-time timer up to the kernel tick (CONFIG_HZ, 250 Hz on
    /// most kernels; it cannot go faster), perf_events above it or where the tick is unknown.
    /// `perf`: perf_events (hardware cycles where a PMU exists, else the software task-clock;
    /// reaches 10 kHz of CPU time; falls back to `timer` where perf_events is not allowed).
    /// `timer`: the CPU-time timer of the VM thread. `timer-wall`: a wall-clock timer (reaches
    /// 10 kHz, counts waiting too). `itimer`: setitimer(ITIMER_PROF), process-wide. `none`:
    /// no method samples (only CBS / exhaustive counts). The profile's header names the
    /// trigger used and why.
    #[arg(long, value_enum, default_value_t = SamplerKind::Auto, help_heading = "Profiling")]
    sampler: SamplerKind,

    /// How samples are taken: in the signal handler from published VM state (immediate), or
    /// at the next yieldpoint (polling).
    #[arg(long, value_enum, default_value_t = MechanismKind::Immediate, help_heading = "Profiling")]
    mechanism: MechanismKind,

    /// Samples (and CBS ticks) per second of CPU time. The interpreter's default keeps the
    /// cost under 1 % where each tick is dear (on a virtual machine, up to 16 µs of kernel
    /// time per CPU-time timer tick and 20–35 µs per perf_events tick); raise it for short
    /// runs (`auto` then switches to perf_events above the kernel tick). Under the adaptive
    /// tier the profile's samples are also the controller's, so the default is the rate the
    /// controller samples at without a profile: profiling then changes none of its decisions
    /// [default: 250 interpreted, 1000 under --tier=adaptive].
    #[arg(long, value_name = "HZ", help_heading = "Profiling")]
    rate: Option<u32>,

    /// Counter-based sampling of call edges (Arnold & Grove): each tick opens a window that
    /// samples every STRIDE-th call, SAMPLES times; `off` disables it. The default was chosen
    /// with `tally experiment cbs` (see ACCURACY.md). Inside its windows CBS needs flag tests
    /// at calls that push no frame; between them, and with it off, the interpreter runs the
    /// code it runs unprofiled, so immediate samples cost only their ticks.
    #[arg(
        long,
        value_name = "STRIDE:SAMPLES|off",
        default_value = DEFAULT_CBS,
        value_parser = parse_cbs,
        help_heading = "Profiling"
    )]
    cbs: CbsChoice,

    /// Also count every call and bytecode exactly (the ground truth; slower).
    #[arg(long, help_heading = "Profiling")]
    exhaustive: bool,

    /// Also count every call per method per tier (interpreter, baseline, optimizing), for
    /// `tally report --amortization`: did each recompilation pay for itself? The counting's
    /// own time is estimated (counts × a cost measured at start-up) and taken out.
    #[arg(long, help_heading = "Profiling")]
    count_calls: bool,

    /// Frames kept per sample, innermost first (1 to 65535). A deeper stack keeps its
    /// innermost FRAMES frames under a `[truncated: N frames]` root, N being the frames lost,
    /// and reports and exports count such samples. A tick copies (and the profile stores) every
    /// kept frame, so a deep limit costs only where stacks are deep; the sample ring grows by 16
    /// bytes per frame of this limit.
    #[arg(
        long,
        value_name = "FRAMES",
        default_value_t = tally_vm::tally_profile::DEFAULT_SAMPLE_DEPTH,
        value_parser = parse_sample_depth,
        help_heading = "Profiling"
    )]
    sample_depth: usize,

    /// Overwrite an existing profile file (only with the complete profile of a run that
    /// started), GC hints, method times or phase report; also one that another run wrote
    /// while this one ran.
    #[arg(long, help_heading = "Profiling")]
    force: bool,

    /// Which code runs methods and blocks: `interp`, the bytecode interpreter; `baseline`,
    /// machine code from the baseline compiler (a template compiler for x86-64: each
    /// bytecode's machine code written in place, in microseconds), made for each method and
    /// block at its first call (anything it cannot compile stays interpreted; see `--tier-log`); `opt`,
    /// the same with the optimizing compiler (Tally's IR: SOM values in registers, native
    /// calls, speculation on what the send sites saw so far, with guards that deoptimize
    /// through frame states: at a first call the sites have seen nothing but small
    /// integers); `quick`, the optimizing compiler at its cheap level (the same IR, guards
    /// and deoptimization, nothing inlined beyond trivial methods, Cranelift without its
    /// optimizations: compiles about twice as fast for slower code); `adaptive`, methods
    /// start interpreted and a controller fed by samples
    /// recompiles the hot ones on a compiler thread, to the baseline, the quick or the full
    /// optimizing level, when the predicted gain outweighs the compile (Jikes RVM's
    /// cost/benefit model over every level above the method's, with this machine's figures
    /// from `tally calibrate`)
    /// [default: adaptive; interp with `--exhaustive`, which counts bytecodes as the
    /// interpreter runs them, with `--sampler=none`, which leaves the controller no samples,
    /// and in a build without the profiler].
    #[arg(long, value_enum)]
    tier: Option<TierChoice>,

    /// Print one line on stderr for every compile: tier, method, bytecodes, machine-code
    /// bytes, compile time; for every method that could not be compiled, why; under
    /// `--tier=adaptive` every decision of the controller with its predicted cost and gain;
    /// and every deoptimization (a speculation that failed: method, bytecode index, why, and
    /// the tier the method runs in afterwards).
    #[arg(long)]
    tier_log: bool,

    /// Compile without speculation: no guards on the receiver classes and small-integer
    /// operands the sites have seen so far, so compiled code never deoptimizes (the
    /// optimizing tier does every send the general way).
    #[arg(long)]
    no_speculation: bool,

    /// Receiver-class value profiles (after OpenJ9's JProfiling): baseline code counts each
    /// send's receiver classes in a small table per site, and the optimizing tier guards on
    /// the classes holding over 40 % of a site (instead of the one or two its inline cache
    /// holds at the time) [default: on under --tier=adaptive, off in --tier=baseline, where
    /// it only measures what counting costs].
    #[arg(long, value_enum, value_name = "WHEN")]
    value_profiles: Option<Switch>,

    /// No on-stack replacement: a loop running in the interpreter does not move into
    /// compiled code at its back-edge. In the baseline tier its activation moves when it next
    /// returns from a call; the optimizing tier's code is entered only at a call or a loop
    /// head, so there the activation stays interpreted to its end.
    #[arg(long)]
    no_osr: bool,

    /// Whether the optimizing tier inlines the methods a call reaches (monomorphic, or, at a
    /// site that saw two to four receiver classes, each one's behind a class switch whose
    /// miss sends) and the blocks passed to them: an inlined method or block runs in its
    /// caller's compiled code without a frame of its own (a closure inlined wherever it is
    /// called is never made, nor an inlined method's context its blocks share when they all
    /// run inlined: its variables stay in registers), and gets a frame only where the
    /// interpreter takes over (a failed guard); stack traces and samples show it all the
    /// same. `--tier-log` prints every choice and refusal with its reason. `off` is the
    /// baseline of inlining's gain.
    #[arg(long, value_enum, value_name = "WHEN", default_value = "on")]
    inline: Switch,

    /// What weighs the inliner's choices under `--tier=adaptive` (Arnold & Grove's oracle:
    /// a site's size limit grows with its edge's share of the call graph's calls from 12 to
    /// 60 bytecodes, targets under 40 % of their site are not inlined, hot sites take the
    /// budget first): `cbs`, the call graph counter-based sampling keeps (its windows cost
    /// flag tests at calls); `samples`, the caller and callee of each method sample;
    /// `exhaustive`, every call counted (a perfect graph, at the cost of a hook at every
    /// call); `static`, no call graph: every call the inline cache saw counts as hot and
    /// the size limit is 60. With `--inline=off` the graph is collected and not read (what
    /// collecting it costs). `tally experiment inlining` compares them.
    #[arg(long, value_enum, value_name = "GRAPH", default_value = "static")]
    inline_by: InlineBy,

    /// With `--inline-by=exhaustive`: read the exhaustive call graph from FILE, a profile an
    /// earlier run of the same program recorded with `--exhaustive`, instead of counting
    /// every call in this one (a perfect profile that costs this run nothing).
    #[arg(long, value_name = "FILE")]
    inline_graph: Option<PathBuf>,

    /// The cost model `--tier=adaptive` decides with (a file written by `tally calibrate`)
    /// [default: this machine's calibration if there is one, else built-in figures].
    #[arg(long, value_name = "FILE")]
    calibration: Option<PathBuf>,

    /// The tiers `--tier=adaptive`'s controller may compile a method to, comma-separated:
    /// `baseline`, `quick` (the optimizing compiler's cheap level) and `opt` (its full
    /// level). The controller weighs every one above the method's present tier (Jikes RVM's
    /// rule), so with `quick` a method may go there first and on to `opt` later. `quick` is
    /// not in the default: its compiles cost nearly what the full level's do, and AWFY's
    /// steady state is slower with it (BENCHMARKS.md) [default: baseline,opt]
    #[arg(long, value_enum, value_delimiter = ',', value_name = "TIERS")]
    adaptive_tiers: Option<Vec<CompilingTier>>,

    /// Write /tmp/perf-PID.map as methods are compiled (address, size and name of each
    /// compiled function, the name carrying its tier), so `perf report` names compiled code.
    #[arg(long)]
    perf_map: bool,

    /// Print the compiled code (annotated with bytecode indices: the baseline's machine code;
    /// the optimizing tier's IRs and machine code) of every compiled method or block whose name contains PATTERN, on stderr, as it is compiled
    /// (e.g. `--print-code='Vector>>'`). `tally disasm --tier=baseline` shows the same without
    /// running anything.
    #[arg(long, value_name = "PATTERN")]
    print_code: Option<String>,

    /// Print the optimizing tier's IR (Tally IR, with its frame states) on stderr after the
    /// named phases of every compile: `build` (the IR as made from bytecode) or a pass —
    /// trim-states, prune-params, fold, check-entries, eliminate-guards, forward-loads, dce,
    /// unbox-floats, sink-closures, virtualize-closures, virtualize-contexts,
    /// virtualize-objects — several separated by commas, or `all`. A pass the pipeline runs
    /// more than once prints each time. `tally disasm` takes it too.
    #[arg(long, value_name = "PHASE|all")]
    print_ir_after: Option<String>,

    /// At exit, print on stderr how long each phase of compilation took, summed over the
    /// run (each phase's own time, so the rows add up): the optimizing tier's IR build and
    /// each of its passes, lowering (or the baseline tier's translation), each of
    /// Cranelift's passes, the code module's work (code into memory, pc map and stack maps)
    /// and installation by the VM. Then how many Cranelift instructions the optimizing
    /// tier's lowering wrote, by what they lower (the entry, each kind of IR instruction,
    /// the exits to the interpreter): Cranelift's time grows with them. Listings made by
    /// --print-code compile again and count too. `tally disasm` takes it too.
    #[arg(long)]
    time_passes: bool,

    /// Write perf's jitdump file jit-PID.dump into DIR (default: the current directory) as
    /// methods are compiled: each function's machine code, name (with its tier) and source
    /// lines. Record with `perf record -k mono`, then `perf inject --jit` makes the symbols.
    #[arg(long, value_name = "DIR", num_args = 0..=1, require_equals = true, default_missing_value = ".")]
    jitdump: Option<PathBuf>,

    /// Deepest SOM call stack before "stack overflow" is reported. Counts the frames the VM
    /// keeps records of: methods and blocks the optimizing tier inlined take none, so
    /// compiled recursion may go a few frames deeper than interpreted.
    #[arg(long, value_name = "FRAMES", default_value_t = 100_000)]
    max_stack_depth: usize,

    /// `System>>ticks` and `time` count this process's CPU time (all its threads) instead of
    /// wall-clock time, so a harness's iteration times leave out time spent waiting for the
    /// CPU (`tally bench --lockstep` uses it).
    #[arg(long)]
    cpu_clock: bool,

    /// The class name or .som file to run, then its arguments.
    #[arg(
        required = true,
        trailing_var_arg = true,
        allow_hyphen_values = true,
        value_name = "CLASS|FILE.som [ARGS]"
    )]
    program: Vec<String>,
}

/// `--tier`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum TierChoice {
    Interp,
    Baseline,
    Quick,
    Opt,
    Adaptive,
}

/// A tier `--adaptive-tiers` names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum CompilingTier {
    Baseline,
    Quick,
    Opt,
}

impl CompilingTier {
    fn vm_tier(self) -> tally_vm::jit::Tier {
        match self {
            CompilingTier::Baseline => tally_vm::jit::Tier::Baseline,
            CompilingTier::Quick => tally_vm::jit::Tier::Quick,
            CompilingTier::Opt => tally_vm::jit::Tier::Opt,
        }
    }
}

/// `--inline-by`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum InlineBy {
    Cbs,
    Samples,
    Exhaustive,
    Static,
}

impl InlineBy {
    fn graph(self) -> Option<CallGraphSource> {
        match self {
            InlineBy::Cbs => Some(CallGraphSource::Cbs),
            InlineBy::Samples => Some(CallGraphSource::TimerSamples),
            InlineBy::Exhaustive => Some(CallGraphSource::Exhaustive),
            InlineBy::Static => None,
        }
    }
}

/// The exhaustive call graph of a recorded profile, by name.
fn read_inline_graph(path: &std::path::Path) -> Result<Vec<(String, u32, String, u64)>, String> {
    let p = tally_vm::tally_profile::Profile::read(path).map_err(|e| e.to_string())?;
    let Some(exact) = p.exact.as_ref() else {
        return Err("this profile has no exact call counts; record it with --exhaustive".into());
    };
    let graph = tally_vm::tally_profile::CallGraph::from_exact(exact).by_name(&p.symbols());
    if graph.is_empty() {
        return Err("this profile's exhaustive call graph has no edges".into());
    }
    Ok(graph
        .into_iter()
        .map(|((caller, bci, callee), n)| (caller, bci, callee, n))
        .collect())
}

/// The call graph the run keeps for the inliner: only under the adaptive tier (with
/// `--inline=off` it is collected and not read, which is what collecting it costs).
fn inline_graph(cli: &Cli, tier: TierChoice) -> Option<CallGraphSource> {
    (tier == TierChoice::Adaptive)
        .then(|| cli.inline_by.graph())
        .flatten()
}

/// An option that is on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Switch {
    On,
    Off,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum SamplerKind {
    Auto,
    Timer,
    TimerWall,
    Itimer,
    Perf,
    None,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum MechanismKind {
    Immediate,
    Polling,
}

/// The CBS configuration profiles get unless `--cbs` says otherwise: at `DEFAULT_RATE` ticks,
/// 3:32 reaches 80 % overlap with the exact call graph on every AWFY benchmark we measured
/// (3:16, Arnold & Grove's choice, did at 1 kHz but not at 250 Hz). See ACCURACY.md.
const DEFAULT_CBS: &str = "3:32";

/// Samples and CBS ticks per second unless `--rate` says otherwise (see `--help` and
/// ACCURACY.md: at 1 kHz the ticks alone cost about 1 % here).
const DEFAULT_RATE: u32 = 250;

/// `--cbs`: a configuration, or none (`off`).
#[derive(Clone, Copy, Debug)]
struct CbsChoice(Option<CbsConfig>);

fn parse_cbs(s: &str) -> Result<CbsChoice, String> {
    if s.trim() == "off" {
        return Ok(CbsChoice(None));
    }
    let (stride, samples) = s
        .split_once(':')
        .ok_or_else(|| format!("'{s}' is not STRIDE:SAMPLES (e.g. 3:16)"))?;
    let stride: u32 = stride
        .trim()
        .parse()
        .map_err(|_| format!("bad STRIDE in '{s}'"))?;
    let samples: u32 = samples
        .trim()
        .parse()
        .map_err(|_| format!("bad SAMPLES in '{s}'"))?;
    if stride == 0 || samples == 0 {
        return Err("STRIDE and SAMPLES must be at least 1".into());
    }
    Ok(CbsChoice(Some(CbsConfig {
        stride,
        samples,
        ..CbsConfig::default()
    })))
}

fn parse_sample_depth(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(n) if (1..=u16::MAX as usize).contains(&n) => Ok(n),
        _ => Err(format!("'{s}' is not a frame count from 1 to 65535")),
    }
}

fn profile_options(cli: &Cli, tier: TierChoice) -> Result<Option<ProfileOptions>, String> {
    let Some(output) = cli.profile.clone() else {
        return Ok(None);
    };
    let rate = cli.rate.unwrap_or(match tier {
        TierChoice::Adaptive => tally_jit::ADAPTIVE_SAMPLE_RATE,
        _ => DEFAULT_RATE,
    });
    check_output(&output, cli.force)?;
    let mut trigger_choice = None;
    let trigger = match cli.sampler {
        SamplerKind::Auto => {
            let (t, why) = auto_trigger(rate);
            trigger_choice = Some(why);
            Some(t)
        }
        SamplerKind::Timer => Some(Trigger::Timer(TimerClock::ThreadCpu)),
        SamplerKind::TimerWall => Some(Trigger::Timer(TimerClock::Monotonic)),
        SamplerKind::Itimer => Some(Trigger::Itimer),
        SamplerKind::Perf => Some(Trigger::Perf {
            prefer_hardware: true,
        }),
        SamplerKind::None => None,
    };
    let mechanism = match cli.mechanism {
        MechanismKind::Immediate => Mechanism::Immediate,
        MechanismKind::Polling => Mechanism::Polling,
    };
    let settings = vec![
        (
            "sampler".to_string(),
            format!("{:?}", cli.sampler).to_lowercase(),
        ),
        ("mechanism".to_string(), mechanism.name().to_string()),
        ("rate".to_string(), rate.to_string()),
        (
            "cbs".to_string(),
            cli.cbs
                .0
                .map(|c| format!("{}:{}", c.stride, c.samples))
                .unwrap_or_else(|| "off".into()),
        ),
        ("exhaustive".to_string(), cli.exhaustive.to_string()),
        (
            "debug-credit-callers".to_string(),
            cli.debug_credit_callers.to_string(),
        ),
        ("count-calls".to_string(), cli.count_calls.to_string()),
        ("sample-depth".to_string(), cli.sample_depth.to_string()),
        (
            "gc-stress".to_string(),
            cli.gc_stress
                .map(|n| n.to_string())
                .unwrap_or_else(|| "off".into()),
        ),
    ];
    Ok(Some(ProfileOptions {
        output: Some(output),
        if_exists: tally_output::IfExists::from_force(cli.force),
        trigger,
        trigger_choice,
        mechanism,
        rate_hz: rate,
        sample_depth: cli.sample_depth,
        cbs: cli.cbs.0,
        exhaustive: cli.exhaustive,
        count_calls: cli.count_calls,
        call_graph: inline_graph(cli, tier).filter(|_| cli.inline_graph.is_none()),
        command_line: cli.program.clone(),
        settings,
        credit_callers: cli.debug_credit_callers,
    }))
}

const RECORD_HELP: &str = "\
Run a SOM program and write its profile (the same as `tally --profile=FILE …`, spelled like
`perf record`).

Usage: tally record [-o FILE] [PROFILING OPTIONS] -- [VM OPTIONS] CLASS [ARGS]...

Options:
  -o, --output <FILE>  Where to write the profile [default: tally.profile]
  -h, --help           Print this help

Every option of `tally` may come before or after `--`: the profiling options (`--sampler`,
`--mechanism`, `--rate`, `--cbs`, `--exhaustive`, `--force`, …) and the VM options
(`-cp`, `--heap-size`, …) are listed by `tally --help`.

Example:
  tally record -o run.profile --rate 1000 -- -cp lib Main
  tally report run.profile
";

/// Whether `tally record ARGS…` asks for its help: `-h`/`--help` among record's own arguments,
/// before `--` (after it they belong to the program).
fn record_asks_help(args: &[String]) -> bool {
    args.iter()
        .skip(2)
        .take_while(|a| *a != "--")
        .any(|a| a == "-h" || a == "--help")
}

/// Before a run: `output` (the `what` it writes, e.g. "the profile") can be written: no
/// directory, in an existing directory that takes new files (a temporary is made there and
/// removed), and an existing file only replaced with `force`. The file itself is written
/// through `tally_output` at the end, which checks all of this again.
pub(crate) fn check_new_file(
    output: &std::path::Path,
    force: bool,
    what: &str,
) -> Result<(), String> {
    tally_output::OutputFile::create(output, tally_output::IfExists::from_force(force))
        .map(drop)
        .map_err(|e| match e {
            tally_output::OutputError::Exists { .. } => e.to_string(),
            _ => format!("{what}: {e}"),
        })
}

/// Checks before the program runs that the profile can be written to `output`
/// ([`check_new_file`]); `-` (stdout) cannot take it.
fn check_output(output: &std::path::Path, force: bool) -> Result<(), String> {
    if output.as_os_str() == "-" {
        return Err(
            "the profile cannot go to stdout (`-`): the program writes there, and the \
             profile streams to a file as the run goes; name a file, then `tally export … -o -`"
                .into(),
        );
    }
    check_new_file(output, force, "the profile")
}

/// `tally record -o FILE [--force] -- ARGS…` is `tally --profile=FILE [--force] ARGS…`.
fn rewrite_record(args: Vec<String>) -> Result<Vec<String>, String> {
    let mut out = vec![args[0].clone()];
    let mut rest = args.into_iter().skip(2).peekable();
    let mut file = None;
    let mut passthrough = Vec::new();
    while let Some(a) = rest.next() {
        match a.as_str() {
            "-o" | "--output" => file = Some(rest.next().ok_or("-o needs a file name")?),
            "--" => {
                passthrough.extend(rest.by_ref());
                break;
            }
            _ => passthrough.push(a),
        }
    }
    let file = file.unwrap_or_else(|| "tally.profile".into());
    out.push(format!("--profile={file}"));
    out.extend(passthrough);
    Ok(out)
}

/// `--gc`: a plan by name, or an error naming the choices.
pub(crate) fn parse_gc_plan(name: &str) -> Result<tally_vm::GcPlan, String> {
    use tally_vm::GcPlan;
    GcPlan::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = GcPlan::ALL.iter().map(|p| p.name()).collect();
        format!(
            "unknown collector '{name}'; choose one of {}",
            names.join(", ")
        )
    })
}

/// `1500`, `10us`, `2.5ms`, `1s` as nanoseconds.
/// `Holder>>selector=DURATION`.
fn parse_injection(s: &str) -> Result<(String, u64), String> {
    let (method, duration) = s
        .rsplit_once('=')
        .ok_or_else(|| format!("'{s}' is not METHOD=DURATION (example: Foo>>bar=50us)"))?;
    if !method.contains(">>") {
        return Err(format!(
            "'{method}' is not a method name (write Holder>>selector)"
        ));
    }
    let ns = parse_duration_ns(duration)?;
    if !(ns.is_finite() && ns >= 1.0) {
        return Err(format!(
            "a delay of '{duration}' is not a duration of at least 1 ns"
        ));
    }
    Ok((method.to_string(), ns as u64))
}

pub(crate) fn parse_duration_ns(s: &str) -> Result<f64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("'{s}' is not a duration (examples: 100us, 1ms, 2500)"))?;
    let factor = match unit {
        "" | "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        _ => return Err(format!("unknown unit in '{s}' (use ns, us, ms or s)")),
    };
    Ok(n * factor)
}

fn parse_size(s: &str) -> Result<usize, String> {
    let s = s.trim();
    let (digits, unit) = match s.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((i, _)) => (&s[..i], s[i..].to_ascii_lowercase()),
        None => (s, String::new()),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("'{s}' is not a size (examples: 512M, 2G, 1048576)"))?;
    let factor = match unit.trim_end_matches('b') {
        "" => 1,
        "k" => 1 << 10,
        "m" => 1 << 20,
        "g" => 1 << 30,
        _ => return Err(format!("unknown size unit in '{s}' (use K, M or G)")),
    };
    n.checked_mul(factor)
        .ok_or_else(|| format!("'{s}' is too large"))
}

/// Other SOM VMs spell the class path `-cp`; clap cannot have a two-letter short flag.
fn normalize_args(args: Vec<String>) -> Vec<String> {
    // Options whose value may be the next word: from the parser's own definition, so that a
    // new option is never read as the program's name.
    let takes_value: Vec<String> = {
        use clap::CommandFactory;
        Cli::command()
            .get_arguments()
            .filter(|a| a.get_action().takes_values() && !a.is_positional())
            .filter(|a| a.get_num_args().is_none_or(|n| n.min_values() > 0))
            .filter_map(|a| a.get_long().map(|l| format!("--{l}")))
            .collect()
    };
    let mut out = Vec::new();
    let mut program_started = false;
    let mut expect_value = false;
    for (i, a) in args.into_iter().enumerate() {
        if i > 0 && !program_started && !expect_value {
            if a == "-cp" {
                out.push("--classpath".to_string());
                expect_value = true;
                continue;
            }
            if !a.starts_with('-') {
                program_started = true;
            } else if !a.contains('=') && takes_value.contains(&a) {
                expect_value = true;
                out.push(a);
                continue;
            }
        }
        expect_value = false;
        out.push(a);
    }
    out
}

/// The directories of `--classpath` values (each ':'-separated), in order.
fn class_path(values: &[String]) -> Vec<PathBuf> {
    values
        .iter()
        .flat_map(|cp| cp.split(':'))
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .collect()
}

/// The native stack of the thread that runs everything: compiled code of the optimizing tier
/// nests SOM calls on it, about 1 KiB a call, so this lets recursion reach the default
/// `--max-stack-depth` before the native stack runs out (the pages are reserved, and only
/// touched as the stack grows).
const VM_THREAD_STACK: usize = 256 << 20;

/// What compiles report besides their code (`--print-ir-after`, `--time-passes`).
pub(crate) fn compile_diagnostics(
    print_ir_after: Option<&str>,
    time_passes: bool,
) -> Result<tally_jit::Diagnostics, String> {
    Ok(tally_jit::Diagnostics {
        print_ir_after: match print_ir_after {
            Some(phases) => tally_jit::PrintIrAfter::parse(phases)?,
            None => tally_jit::PrintIrAfter::Nothing,
        },
        times: time_passes.then(|| std::sync::Arc::new(tally_vm::jit::PhaseTimes::default())),
    })
}

fn main() -> ExitCode {
    tally_output::report_size_limit_as_error();
    // `tally bench` starts the VMs it measures through a copy of this binary (their peak
    // memory would otherwise start at ours): that copy does its work before anything else.
    tally_bench::spawner::serve_if_asked();
    let runs = std::thread::Builder::new()
        .name("tally".into())
        .stack_size(VM_THREAD_STACK)
        .spawn(main_on_vm_thread);
    match runs {
        Ok(thread) => thread.join().unwrap_or(ExitCode::from(101)),
        // Too large a stack for this machine's limits: the main thread's will do.
        Err(_) => main_on_vm_thread(),
    }
}

fn main_on_vm_thread() -> ExitCode {
    // Subcommands have their own parsers; a program class is never named like them.
    if let Some(command) = std::env::args().nth(1) {
        if let Some(code) = profile_cmd::dispatch(&command, std::env::args_os().skip(2).collect()) {
            return code;
        }
    }
    if std::env::args_os().nth(1).is_some_and(|a| a == "calibrate") {
        return calibrate::main(std::env::args_os().skip(2).collect());
    }
    if std::env::args_os().nth(1).is_some_and(|a| a == "disasm") {
        return disasm_cmd::main(std::env::args_os().skip(2).collect());
    }
    if std::env::args_os().nth(1).is_some_and(|a| a == "vertical") {
        return vertical_cmd::main(std::env::args_os().skip(2).collect());
    }
    // `tally validate` runs this binary as child processes.
    if std::env::args_os().nth(1).is_some_and(|a| a == "validate") {
        let this = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("tally"));
        return validate::main(std::env::args_os().skip(2).collect(), this);
    }
    // `tally bench …` has its own parser; programs are never named `bench`.
    if std::env::args_os().nth(1).is_some_and(|a| a == "bench") {
        let this = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("tally"));
        // The running binary itself, even when a build replaces its file during the run.
        tally_bench::spawner::spawn_through(PathBuf::from("/proc/self/exe"));
        return tally_bench::main(std::env::args_os().skip(2).collect(), this);
    }
    // `tally experiment …` likewise: it runs this binary (or --tally) as child processes.
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == "experiment")
    {
        let this = std::env::current_exe().unwrap_or_else(|_| PathBuf::from("tally"));
        return experiment::main(std::env::args_os().skip(2).collect(), this);
    }
    let mut args: Vec<String> = std::env::args().collect();
    if args.get(1).is_some_and(|a| a == "record") {
        if record_asks_help(&args) {
            print!("{RECORD_HELP}");
            return ExitCode::SUCCESS;
        }
        args = match rewrite_record(args) {
            Ok(a) => a,
            Err(e) => {
                say!("error: {e}");
                return ExitCode::from(2);
            }
        };
    }
    let cli = Cli::parse_from(normalize_args(args));
    // The controller feeds on method samples: a profile that takes none, and a build without
    // the profiler, run interpreted unless a tier is named.
    let takes_no_samples = cli.profile.is_some() && cli.sampler == SamplerKind::None;
    let no_profiler = !cfg!(feature = "profiling");
    if cli.gc_hints_record.is_some() {
        if cli.tier.is_some_and(|t| t != TierChoice::Interp) {
            say!("error: --gc-hints-record runs the interpreter (compiled code inlines methods, whose entries and exits are then gone); leave out --tier");
            return ExitCode::from(2);
        }
        if cli
            .gc_plan
            .is_some_and(|p| p != tally_vm::GcPlan::SemiSpace)
        {
            say!("error: --gc-hints-record measures live data under SemiSpace, where the space in use after a full collection is the live data; leave out --gc");
            return ExitCode::from(2);
        }
    }
    let hints_request = match (&cli.gc_hints_record, &cli.gc_hints) {
        (Some(output), _) => {
            if let Err(e) = gc_hints_cmd::check_record_output(output, cli.force) {
                say!("error: {e}");
                return ExitCode::from(2);
            }
            gc_hints_cmd::HintsRequest::Record {
                output: output.clone(),
                force: cli.force,
            }
        }
        (None, Some(file)) => gc_hints_cmd::HintsRequest::Use {
            file: file.clone(),
            optional: cli.gc_hints_optional,
        },
        (None, None) => gc_hints_cmd::HintsRequest::None,
    };
    let recording_hints = cli.gc_hints_record.is_some();
    let tier = cli.tier.unwrap_or(
        if cli.exhaustive || takes_no_samples || no_profiler || recording_hints {
            TierChoice::Interp
        } else {
            TierChoice::Adaptive
        },
    );
    let phases_request = match (&cli.phases_record, &cli.phases) {
        (Some(output), _) => phases_cmd::PhasesRequest::Record {
            output: output.clone(),
            force: cli.force,
            tier: match tier {
                TierChoice::Interp => "interp",
                TierChoice::Baseline => "baseline",
                TierChoice::Quick => "quick",
                TierChoice::Opt => "opt",
                TierChoice::Adaptive => "adaptive",
            },
        },
        (None, Some(file)) => phases_cmd::PhasesRequest::Count {
            file: file.clone(),
            report: cli.phases_report.clone(),
            force: cli.force,
        },
        (None, None) => phases_cmd::PhasesRequest::None,
    };
    if let Err(e) = phases_cmd::check_outputs(&phases_request) {
        say!("error: {e}");
        return ExitCode::from(2);
    }
    let profile = match profile_options(&cli, tier) {
        Ok(p) => p,
        Err(e) => {
            say!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let class_path = class_path(&cli.classpath);
    let options = VmOptions {
        class_path,
        heap: tally_vm::HeapOptions {
            plan: cli.gc_plan.unwrap_or(if recording_hints {
                tally_vm::GcPlan::SemiSpace
            } else {
                tally_vm::GcPlan::default()
            }),
            max_heap_bytes: cli.heap_size,
            min_heap_bytes: cli.heap_min,
            nursery_bytes: cli.nursery,
            gc_stress_every: cli.gc_stress,
        },
        max_stack_depth: cli.max_stack_depth,
        profile,
        clock: if cli.cpu_clock {
            ClockKind::ProcessCpu
        } else {
            ClockKind::Wall
        },
    };
    if tier == TierChoice::Interp {
        let compiled_only = [
            ("--print-code", cli.print_code.is_some()),
            ("--print-ir-after", cli.print_ir_after.is_some()),
            ("--time-passes", cli.time_passes),
            ("--perf-map", cli.perf_map),
            ("--jitdump", cli.jitdump.is_some()),
            ("--tier-log", cli.tier_log),
            ("--no-speculation", cli.no_speculation),
            ("--no-osr", cli.no_osr),
            ("--inline=off", cli.inline == Switch::Off),
        ];
        if let Some((flag, _)) = compiled_only.iter().find(|(_, set)| *set) {
            say!(
                "error: {flag} is about compiled code; it needs a compiling tier (--tier=baseline)"
            );
            return ExitCode::from(2);
        }
    }
    if cli.value_profiles.is_some() && !matches!(tier, TierChoice::Adaptive | TierChoice::Baseline)
    {
        say!("error: --value-profiles are counted by baseline code; they need --tier=adaptive or --tier=baseline");
        return ExitCode::from(2);
    }
    if cli.calibration.is_some() && tier != TierChoice::Adaptive {
        say!("error: --calibration is the adaptive controller's cost model; it needs --tier=adaptive");
        return ExitCode::from(2);
    }
    if cli.adaptive_tiers.is_some() && tier != TierChoice::Adaptive {
        say!("error: --adaptive-tiers are the adaptive controller's choices; they need --tier=adaptive");
        return ExitCode::from(2);
    }
    let adaptive_tiers: Vec<tally_vm::jit::Tier> = cli
        .adaptive_tiers
        .as_deref()
        .unwrap_or(&[CompilingTier::Baseline, CompilingTier::Opt])
        .iter()
        .map(|t| t.vm_tier())
        .fold(Vec::new(), |mut tiers, t| {
            if !tiers.contains(&t) {
                tiers.push(t);
            }
            tiers
        });
    if cli.count_calls && cli.profile.is_none() {
        say!("error: --count-calls records its counts in a profile; add --profile=FILE");
        return ExitCode::from(2);
    }
    if cli.inline_by != InlineBy::Static && tier != TierChoice::Adaptive {
        say!("error: --inline-by weighs the adaptive tier's inlining by the call graph the run collects; it needs --tier=adaptive");
        return ExitCode::from(2);
    }
    if cli.inline_graph.is_some() && cli.inline_by != InlineBy::Exhaustive {
        say!("error: --inline-graph reads an exhaustive call graph; it goes with --inline-by=exhaustive");
        return ExitCode::from(2);
    }
    let recorded_graph = match &cli.inline_graph {
        Some(path) => match read_inline_graph(path) {
            Ok(edges) => Some(edges),
            Err(e) => {
                say!("error: --inline-graph {}: {e}", path.display());
                return ExitCode::from(2);
            }
        },
        None => None,
    };
    if cli.inline_by == InlineBy::Exhaustive && cli.profile.is_some() && recorded_graph.is_none() {
        say!("error: --inline-by=exhaustive counts every call into the VM's own graph, which a recorded profile does not take; record with --inline-by=cbs, samples or static");
        return ExitCode::from(2);
    }
    if cli.inline_by == InlineBy::Cbs && cli.cbs.0.is_none() {
        say!("error: --inline-by=cbs reads CBS's call graph; --cbs=off turns CBS off");
        return ExitCode::from(2);
    }
    if cli.exhaustive && tier != TierChoice::Interp {
        say!("error: --exhaustive counts bytecodes in the interpreter; it needs --tier=interp");
        return ExitCode::from(2);
    }
    let model = match tier {
        TierChoice::Adaptive => match calibrate::load_model(cli.calibration.as_deref()) {
            Ok((model, note)) => {
                if cli.tier_log {
                    say!("[tier] cost model: {note}");
                }
                Some(model)
            }
            Err(e) => {
                say!("error: {e}");
                return ExitCode::from(2);
            }
        },
        _ => None,
    };
    let diagnostics = match compile_diagnostics(cli.print_ir_after.as_deref(), cli.time_passes) {
        Ok(d) => d,
        Err(e) => {
            say!("error: --print-ir-after: {e}");
            return ExitCode::from(2);
        }
    };
    let result = Vm::new(options).and_then(|mut vm| {
        match tier {
            TierChoice::Interp => {}
            TierChoice::Baseline => {
                let mut generator = tally_jit::Compiler::baseline()
                    .map_err(|e| VmError::Fatal(format!("--tier=baseline: {e}")))?;
                generator.set_diagnostics(diagnostics.clone());
                vm.set_code_generator(Box::new(generator), cli.tier_log);
            }
            TierChoice::Quick | TierChoice::Opt => {
                let level = if tier == TierChoice::Quick {
                    tally_vm::jit::Tier::Quick
                } else {
                    tally_vm::jit::Tier::Opt
                };
                let mut generator = tally_jit::Compiler::new(level)
                    .map_err(|e| VmError::Fatal(format!("--tier={}: {e}", level.name())))?;
                generator.set_diagnostics(diagnostics.clone());
                vm.set_code_generator(Box::new(generator), cli.tier_log);
            }
            TierChoice::Adaptive => {
                match recorded_graph.clone() {
                    Some(edges) => vm.set_recorded_inline_graph(edges),
                    None => vm.set_inline_call_graph(
                        inline_graph(&cli, tier),
                        cli.cbs.0.unwrap_or_default(),
                    ),
                }
                vm.set_adaptive(
                    tally_jit::adaptive_config(
                        model.clone().unwrap_or_default(),
                        diagnostics.clone(),
                        adaptive_tiers.clone(),
                    ),
                    cli.tier_log,
                )?;
            }
        }
        let value_profiles = cli.value_profiles.unwrap_or(if tier == TierChoice::Adaptive {
            Switch::On
        } else {
            Switch::Off
        });
        if value_profiles == Switch::On {
            vm.enable_value_profiles();
        }
        if cli.no_speculation {
            vm.disable_speculation();
        }
        if cli.no_osr {
            vm.disable_osr();
        }
        if cli.inline == Switch::Off {
            vm.disable_inlining();
        }
        if cli.perf_map {
            vm.write_perf_map()?;
        }
        if let Some(pattern) = &cli.print_code {
            vm.print_code(pattern);
        }
        if diagnostics.print_ir_after != tally_jit::PrintIrAfter::Nothing {
            vm.compiles_write_stderr();
        }
        if let Some(times) = &diagnostics.times {
            vm.time_installations(times.clone());
        }
        if let Some(dir) = &cli.jitdump {
            vm.write_jitdump(dir)?;
        }
        gc_hints_cmd::start(&mut vm, &hints_request, &cli.program)?;
        phases_cmd::start(&mut vm, &phases_request, &cli.program)?;
        if let Some((method, ns)) = &cli.inject_delay {
            vm.inject_delay(method, *ns)?;
        }
        let r = vm.run_main(&cli.program);
        vm.flush();
        let succeeded = matches!(r, Ok(_) | Err(VmError::Exit(0)));
        // Files the run was asked for and could not write: each is said, and the run fails.
        let mut unwritten = Vec::new();
        if succeeded {
            unwritten.extend(gc_hints_cmd::finish(&mut vm, &hints_request, &cli.program).err());
            unwritten.extend(phases_cmd::finish(&mut vm, &phases_request, &cli.program).err());
        }
        if let Some(i) = vm.injection().filter(|i| i.delays == 0) {
            say!(
                "tally: warning: no delay was injected: {} never ran in a frame of its own (it was never called, or it is a primitive or a trivial method, a getter, setter or constant, which are answered without a frame)",
                i.method
            );
        } else if let Some(i) = vm.injection() {
            say!(
                "tally: injected {} delay(s) of {} ns into {}: {:.3} ms of CPU in all ({} loop iterations each, {:.3} ns per iteration)",
                i.delays,
                i.delay_ns,
                i.method,
                i.injected_ns() / 1e6,
                i.iterations,
                i.ns_per_iteration
            );
        }
        vm.log_stub_sends();
        let exit_code = match &r {
            Ok(_) => 0,
            Err(e) => e.exit_code(),
        };
        match vm.finish_profile(exit_code) {
            Ok(Some(path)) => say!("tally: profile written to {} (see `tally report {}`)", path.display(), path.display()),
            // A stream that could not start is said as the run's error.
            Ok(None) if matches!(r, Err(VmError::Output(_))) => {}
            Ok(None) => {
                if let Some(path) = &cli.profile {
                    say!(
                        "tally: no profile written to {}: the program did not start",
                        path.display()
                    );
                }
            }
            Err(e) => unwritten.push(e),
        }
        if cli.gc_stats {
            let s = vm.heap.stats();
            say!(
                "gc ({}): {} collections{} in {:.1} ms, longest {:.2} ms; {} objects ({} bytes) allocated; heap {} bytes in use of {} bytes{}",
                vm.heap.plan().name(),
                s.collections,
                if vm.heap.plan().is_generational() {
                    format!(
                        " ({} nursery, {} full)",
                        s.nursery_collections,
                        s.collections - s.nursery_collections
                    )
                } else {
                    String::new()
                },
                s.gc_time.as_secs_f64() * 1e3,
                s.longest_pause.as_secs_f64() * 1e3,
                s.allocated_objects,
                s.allocated_bytes,
                s.heap_used_bytes,
                s.heap_limit_bytes,
                if vm.heap.plan().is_generational() {
                    format!("; write barrier remembered {} objects", s.barrier_slow_calls)
                } else {
                    String::new()
                }
            );
            if let Some(line) = gc_hints_cmd::stats_line(&vm) {
                say!("{line}");
            }
        }
        if let Some(times) = &diagnostics.times {
            say!("{}", times.report().trim_end());
        }
        if succeeded && !unwritten.is_empty() {
            let said: Vec<String> = unwritten.iter().map(ToString::to_string).collect();
            return Err(VmError::Output(said.join("\n")));
        }
        for e in unwritten {
            say!("{e}");
        }
        r
    });
    match result {
        Ok(_) => ExitCode::SUCCESS,
        Err(VmError::Exit(code)) => ExitCode::from(code as u8),
        Err(e) => {
            say!("{e}");
            ExitCode::from(e.exit_code() as u8)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{normalize_args, parse_duration_ns};

    #[test]
    fn the_help_names_every_phase_print_ir_after_takes() {
        let help = <super::Cli as clap::CommandFactory>::command()
            .render_long_help()
            .to_string();
        for phase in tally_jit::phase_names() {
            assert!(help.contains(phase), "--help does not name {phase}");
        }
    }

    #[test]
    fn durations_read_with_their_units() {
        assert_eq!(parse_duration_ns("2500"), Ok(2500.0));
        assert_eq!(parse_duration_ns("10us"), Ok(10_000.0));
        assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000.0));
        assert_eq!(parse_duration_ns("2s"), Ok(2e9));
        assert!(parse_duration_ns("3 weeks").is_err());
        assert!(parse_duration_ns("ms").is_err());
    }

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn option_values_are_not_taken_for_the_program_and_cp_is_a_class_path() {
        assert_eq!(
            normalize_args(words(
                "tally --calibration m.toml -cp lib --rate 99 Main -cp x"
            )),
            words("tally --calibration m.toml --classpath lib --rate 99 Main -cp x")
        );
        // A flag without a value, and one whose value is optional, end nothing.
        assert_eq!(
            normalize_args(words("tally --tier-log --jitdump -cp lib Main")),
            words("tally --tier-log --jitdump --classpath lib Main")
        );
    }
}
