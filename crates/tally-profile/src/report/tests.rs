use super::*;
use crate::fixtures::example_profile;
use crate::metrics::TopN;
use crate::Cct;
use crate::Tier;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

#[test]
fn flat_profile_has_self_and_total_shares() {
    let flat = FlatProfile::new(&example_profile());
    assert_eq!(flat.total_samples, 9);
    assert_eq!(flat.no_frame, 1);
    let row = |n: &str| flat.rows.iter().find(|r| r.name == n).unwrap().clone();
    assert_eq!(flat.rows[0].name, "Bench>>fib:");
    // Recursion counts once per sample in total.
    assert_eq!(
        (
            row("Bench>>fib:").self_count,
            row("Bench>>fib:").total_count
        ),
        (4, 4)
    );
    assert_eq!(
        (
            row("Bench>>loop").self_count,
            row("Bench>>loop").total_count
        ),
        (3, 4)
    );
    assert_eq!(
        (row("Bench>>run").self_count, row("Bench>>run").total_count),
        (0, 8)
    );
    assert!(close(row("Bench>>run").total_pct, 800.0 / 9.0));
    let text = flat.render_text(10);
    assert!(
        text.contains(" 44.44%  44.44%        4        4  Bench>>fib:"),
        "{text}"
    );
    assert!(text.contains("(no method on the stack)"), "{text}");
}

#[test]
fn call_tree_nests_callees_under_call_sites() {
    let p = example_profile();
    let symbols = p.symbols();
    let cct = Cct::from_samples(&p.samples, &symbols);
    let text = render_call_tree(&cct, &symbols, 0.0, 10);
    let lines: Vec<&str> = text.lines().collect();
    // Call sites are the caller's source lines (Bench>>run's bytecode 2 is on line 4); a
    // caller without a line table falls back to its header line (Bench>>loop, line 12).
    assert_eq!(lines[1], " 77.78%   0.00% Bench>>run");
    assert_eq!(lines[2], " 44.44%  33.33%   Bench>>loop @Bench.som:5");
    assert!(
        text.contains(" 33.33%  11.11%   Bench>>fib: @Bench.som:4"),
        "{text}"
    );
    assert!(
        text.contains(" 22.22%  22.22%     Bench>>fib: @Bench.som:10"),
        "{text}"
    );
    assert!(
        text.contains(" 11.11%  11.11%     Bench>>add: @Bench.som:14 [inlined]"),
        "inlined callee under its call site: {text}"
    );
    // The truncated sample's kept frames hang under a root that says what was cut, not
    // under a real method posing as the program's root.
    assert!(
        text.contains("\n 11.11%   0.00% [truncated: 1 frames]\n 11.11%   0.00%   Bench>>run\n 11.11%  11.11%     Bench>>fib: @Bench.som:4\n"),
        "{text}"
    );
    let pruned = render_call_tree(&cct, &symbols, 40.0, 10);
    assert!(!pruned.contains("Bench>>add:"), "{pruned}");
}

#[test]
fn hottest_edges_come_from_cbs_or_the_exact_counts() {
    let p = example_profile();
    let cbs = hottest_edges(&p, EdgeSource::Cbs, 2);
    assert_eq!(cbs.len(), 2);
    assert_eq!(
        (
            cbs[0].caller.as_str(),
            cbs[0].edge.callsite,
            cbs[0].callee.as_str()
        ),
        ("Bench>>run", 2, "Bench>>fib:")
    );
    assert!(close(cbs[0].pct, 62.5));
    let exact = hottest_edges(&p, EdgeSource::Exact, 10);
    assert_eq!(exact[0].weight, 30);
    assert_eq!(exact.len(), 4);
    assert!(render_edges(&cbs).contains("62.50%       20  Bench>>run @2 -> Bench>>fib:"));
}

#[test]
fn vm_state_breakdown_counts_every_sample() {
    let b = StateBreakdown::new(&example_profile());
    let count = |n: &str| b.states.iter().find(|r| r.name == n).unwrap().count;
    assert_eq!(
        [
            count("interpreting"),
            count("primitive"),
            count("gc"),
            count("compiling"),
            count("runtime"),
            count("compiled")
        ],
        [4, 1, 1, 0, 1, 2]
    );
    assert_eq!(b.states.iter().map(|r| r.count).sum::<u64>(), b.total);
    assert_eq!(b.tiers[0].name, "interpreter");
    assert_eq!(
        (b.tiers[1].name.as_str(), b.tiers[1].count),
        ("optimizing", 2)
    );
    assert!(b.render_text().contains("11.11%        1  gc"));
    // The fixture has one collection of 1.5 ms in a run of 10 ms: GC time is reported from
    // the events too, since samples of the VM thread's CPU time can miss it.
    assert_eq!(
        (
            b.gc_events.collections,
            b.gc_events.nursery,
            b.gc_events.gc_ns,
            b.gc_events.longest_ns,
            b.gc_events.run_ns
        ),
        (1, 1, 1_500_000, 1_500_000, 10_000_000)
    );
    assert!(
        b.render_text().contains(
            "1 collection(s) (1 nursery, 0 full), 1.5 ms, 15.00% of the run, longest pause 1.50 ms"
        ),
        "{}",
        b.render_text()
    );
    // A collection a GC hint asked for is counted as such.
    let mut p = example_profile();
    for e in &mut p.events {
        if let crate::event::EventKind::GcEnd { kind, .. } = &mut e.kind {
            *kind = "Hint".into();
        }
    }
    let b = StateBreakdown::new(&p);
    assert_eq!(b.gc_events.hinted, 1);
    assert!(
        b.render_text()
            .contains("1 collection(s) (1 nursery, 0 full; 1 at GC hints), 1.5 ms"),
        "{}",
        b.render_text()
    );
}

#[test]
fn a_profile_compared_with_itself_agrees_fully() {
    let p = example_profile();
    let c = compare(&p, &p, TopN::PercentOfWeight(90.0));
    assert!(close(c.accuracy.method_overlap, 1.0));
    assert!(close(c.accuracy.weighted, 1.0));
    assert_eq!(c.accuracy.edge_overlap.map(|e| close(e, 1.0)), Some(true));
    assert!(c.methods.iter().all(|m| close(m.a_pct, m.b_pct)));
}

#[test]
fn compare_diffs_methods_by_name_across_runs() {
    let a = example_profile();
    let mut b = example_profile();
    // Run B renumbers its methods and spends more time in fib:.
    for e in &mut b.events {
        if let crate::EventKind::MethodCompiled { method, .. } = &mut e.kind {
            method.0 += 100;
        }
    }
    for s in &mut b.samples {
        for f in &mut s.frames {
            if let crate::RawFrame::Interpreted { method, .. } = f {
                method.0 += 100;
            }
        }
    }
    b.events
        .retain(|e| !matches!(e.kind, crate::EventKind::CodeInstalled(_)));
    b.samples.retain(|s| s.state != crate::VmState::Compiled);
    b.cbs_edges = Default::default();
    let c = compare(&a, &b, TopN::Count(1));
    assert_eq!(c.accuracy.unweighted, 1.0, "fib: is the top method in both");
    assert_eq!(c.accuracy.edge_overlap, None);
    let fib = c.methods.iter().find(|m| m.name == "Bench>>fib:").unwrap();
    assert!(close(fib.a_pct, 50.0) && close(fib.b_pct, 4.0 / 6.0 * 100.0));
    assert!(c.render_text(5).contains("Bench>>fib:"));
}

#[test]
fn sampled_profile_is_judged_against_its_own_ground_truth() {
    let acc = accuracy_against_exact(&example_profile(), TopN::Count(2)).unwrap();
    assert_eq!(acc.unweighted, 1.0);
    // Truth (bytecodes) .60/.30/.06/.04 vs samples .5/.375/.125.
    assert!(close(acc.method_overlap, 0.86), "{acc:?}");
    let edges = 20.0 / 32.0 + 10.0 / 46.0 + 1.0 / 46.0 + 5.0 / 46.0;
    assert!(close(acc.edge_overlap.unwrap(), edges), "{acc:?}");
    let mut p = example_profile();
    p.exact = None;
    assert!(accuracy_against_exact(&p, TopN::Count(2)).is_none());
}

#[test]
fn the_tier_report_pairs_each_decision_with_its_compile() {
    let r = TierReport::new(&example_profile()).expect("the fixture compiles a method");
    assert_eq!(r.tiers.len(), 1);
    let t = &r.tiers[0];
    assert_eq!(
        (t.tier, t.versions, t.compile_ns, t.code_bytes),
        (Tier::Optimizing, 1, 250_000, 0x200)
    );
    assert_eq!(t.samples, 2, "the samples in the optimized code");
    assert_eq!(r.methods.len(), 1);
    assert_eq!(r.methods[0].name, "Bench>>loop");
    assert_eq!(r.decisions.len(), 1);
    let d = &r.decisions[0];
    assert_eq!((d.from, d.to), (Tier::Interpreter, Tier::Optimizing));
    assert_eq!(d.predicted_compile_ns, 300_000);
    assert_eq!(
        d.actual_compile_ns,
        Some(250_000),
        "the compile that followed"
    );
    let text = r.render_text(10);
    assert!(
        text.contains(
            "Bench>>loop interpreter -> optimizing: ran 3.00; compile 0.30 / 0.25; then 0.75"
        ),
        "{text}"
    );
    assert_eq!(r.deopts.len(), 1);
    assert!(
        text.contains(
            "Bench>>loop @6: receiver class guard failed; invalidated, runs in interpreter"
        ),
        "{text}"
    );
    let mut none = example_profile();
    none.events.retain(|e| {
        !matches!(
            e.kind,
            crate::EventKind::CodeInstalled(_)
                | crate::EventKind::TierDecision { .. }
                | crate::EventKind::Deoptimized { .. }
        )
    });
    assert_eq!(TierReport::new(&none), None);
}

#[test]
fn the_vm_profile_splits_components_and_places_compiled_samples_on_bytecode_ranges() {
    let v = VmProfile::new(&example_profile());
    assert_eq!(v.total, 9);
    let row =
        |rows: &[ComponentRow], n: &str| rows.iter().find(|r| r.name == n).map_or(0, |r| r.samples);
    assert_eq!(v.generated_samples(), 2);
    assert_eq!(row(&v.generated, "optimizing"), 2);
    assert_eq!(row(&v.vm, "interpreter"), 4);
    assert_eq!(row(&v.vm, "primitives"), 1);
    assert_eq!(row(&v.vm, "garbage collector"), 1);
    assert_eq!((v.compiles, v.compile_ns), (1, 250_000));
    assert_eq!(v.methods.len(), 1);
    let m = &v.methods[0];
    assert_eq!(
        (m.name.as_str(), m.tier, m.samples),
        ("Bench>>loop", Tier::Optimizing, 2)
    );
    assert_eq!((m.versions, m.code_bytes, m.unmapped), (1, 0x200, 0));
    // The sample at pc 0x48 is in `add:` inlined at `loop`'s @6, at its bytecode 2, on line
    // 20 with bytecode 3; the one at 0x10 is `loop`'s own bytecode 0, line 13 (0 to 3).
    let inlined = m.ranges.iter().find(|r| r.is_inlined()).unwrap();
    assert_eq!(inlined.inlined_via, vec![("Bench>>loop".to_string(), 6)]);
    assert_eq!(inlined.method_name, "Bench>>add:");
    assert_eq!(
        (inlined.first_bci, inlined.last_bci, inlined.line),
        (2, 3, Some(20))
    );
    assert_eq!(
        inlined.bytecodes,
        vec![
            (2, Some("SendBinary #+".to_string()), 1),
            (3, Some("ReturnLocal".to_string()), 0)
        ]
    );
    let own = m.ranges.iter().find(|r| !r.is_inlined()).unwrap();
    assert_eq!(
        (own.first_bci, own.last_bci, own.line, own.samples),
        (0, 3, Some(13), 1)
    );
    let text = v.render_text(10, 0.0, &|file, line| {
        (file == "Bench.som" && line == 20).then(|| "  ^a + b".to_string())
    });
    assert!(text.contains("samples in generated code"), "{text}");
    assert!(
        text.contains("@2-3  Bench.som:20  [inlined: Bench>>loop @6 > Bench>>add:]"),
        "{text}"
    );
    assert!(text.contains("@2    SendBinary #+"), "{text}");
    assert!(text.contains("| ^a + b"), "{text}");
}

mod amortization {
    use super::*;
    use crate::code::{CodeVersion, PcMapEntry};
    use crate::event::{Event, EventKind};
    use crate::ids::{ClassId, CodeVersionId, MethodId, RawFrame, VmState};
    use crate::profile::Profile;
    use crate::sample::{Origin, Sample, SampleFlags};

    const MS: u64 = 1_000_000;

    fn ev(time_ns: u64, kind: EventKind) -> Event {
        Event { time_ns, kind }
    }

    fn method(id: u32, name: &str) -> Event {
        ev(
            0,
            EventKind::MethodCompiled {
                method: MethodId(id),
                class: ClassId(1),
                name: name.into(),
                file: "T.som".into(),
                line: 1,
                bytecode_len: 10,
            },
        )
    }

    fn install(at: u64, version: u32, m: u32, compile_ns: u64) -> Event {
        ev(
            at,
            EventKind::CodeInstalled(CodeVersion {
                id: CodeVersionId(version),
                method: MethodId(m),
                tier: Tier::Optimizing,
                compile_id: version,
                compile_time_ns: compile_ns,
                code_start: 0x1000 * u64::from(version),
                code_len: 0x100,
                pc_map: vec![PcMapEntry {
                    pc_offset: 0,
                    chain: vec![(MethodId(m), 0)],
                }],
            }),
        )
    }

    use crate::fixtures::tier_call_counts as counts;

    /// One sample per millisecond from `from` ms on, `n` of them, in `frame`.
    fn samples(out: &mut Vec<Sample>, from: u64, n: u64, frame: RawFrame, state: VmState) {
        for k in 0..n {
            out.push(Sample {
                time_ns: (from + k + 1) * MS,
                state,
                origin: Origin::Immediate,
                flags: SampleFlags::NONE,
                depth: 1,
                frames: vec![frame],
            });
        }
    }

    /// A run of 340 ms sampled every millisecond: `A>>fast` makes 1,000 interpreted calls of
    /// 100 µs, then is compiled in 1 ms and makes 10,000 calls of 10 µs; `B>>slow` makes 100
    /// interpreted calls of 1 ms, then is compiled in 50 ms and makes 50 calls of 0.8 ms.
    fn known_run(snapshots: Vec<Event>) -> Profile {
        let mut events = vec![method(1, "A>>fast"), method(2, "B>>slow")];
        events.push(install(100 * MS, 1, 1, MS));
        events.push(install(150 * MS, 2, 2, 50 * MS));
        events.extend(snapshots);
        let mut s = Vec::new();
        let compiled = |v: u32| RawFrame::Compiled {
            code: CodeVersionId(v),
            pc_offset: 0x10,
        };
        samples(
            &mut s,
            0,
            100,
            RawFrame::interpreted(MethodId(1), 0),
            VmState::Interpreting,
        );
        samples(
            &mut s,
            100,
            100,
            RawFrame::interpreted(MethodId(2), 0),
            VmState::Interpreting,
        );
        samples(&mut s, 200, 100, compiled(1), VmState::Compiled);
        samples(&mut s, 300, 40, compiled(2), VmState::Compiled);
        Profile {
            events,
            samples: s,
            ..Profile::default()
        }
    }

    fn final_counts(instrumentation_ns: u64) -> Event {
        counts(
            340 * MS,
            &[
                (1, Tier::Interpreter, 1_000),
                (1, Tier::Optimizing, 10_000),
                (2, Tier::Interpreter, 100),
                (2, Tier::Optimizing, 50),
            ],
            instrumentation_ns,
        )
    }

    #[test]
    fn verdicts_follow_compile_time_calls_and_costs_per_call() {
        let a = Amortization::new(&known_run(vec![final_counts(0)])).unwrap();
        assert_eq!((a.samples, a.run_ns), (340, 340 * MS));
        assert!(close(a.t_unit_ns, MS as f64));
        assert_eq!(a.recompilations.len(), 2);
        let fast = &a.recompilations[0];
        assert_eq!(
            (fast.name.as_str(), fast.from, fast.to),
            ("A>>fast", Tier::Interpreter, Tier::Optimizing)
        );
        assert!(close(fast.per_call_to_ns.unwrap(), 10_000.0));
        assert!(close(fast.per_call_from_ns.unwrap(), 100_000.0));
        // 1 ms + 10,000 × 10 µs = 101 ms < 10,000 × 100 µs = 1,000 ms.
        match fast.verdict {
            Verdict::PaidOff { gain_ns } => assert!((gain_ns - 899.0 * MS as f64).abs() < 1.0),
            ref v => panic!("{v:?}"),
        }
        // 50 ms + 50 × 0.8 ms = 90 ms > 50 × 1 ms = 50 ms.
        let slow = &a.recompilations[1];
        match slow.verdict {
            Verdict::DidNotPay { loss_ns } => assert!((loss_ns - 40.0 * MS as f64).abs() < 1.0),
            ref v => panic!("{v:?}"),
        }
        let (won, lost) = a.won_and_lost_ns();
        assert!((won - 899.0 * MS as f64).abs() < 1.0 && (lost - 40.0 * MS as f64).abs() < 1.0);
        // What the samples vouch for: less than the point estimates, still a gain and a loss.
        let (won_least, lost_least) = a.won_and_lost_at_least_ns();
        assert!(won_least > 0.0 && won_least < won, "{won_least}");
        assert!(lost_least > 0.0 && lost_least < lost, "{lost_least}");
        let (lo, hi) = fast.gain_range_ns.unwrap();
        let point = 899.0 * MS as f64;
        assert!(lo < point && point < hi);
        let text = a.render_text(10);
        assert!(
            text.contains("paid off: 1 (won 899.00 ms); did not pay: 1 (lost 40.00 ms)"),
            "{text}"
        );
        assert!(text.contains("did not pay   -40.00  B>>slow"), "{text}");
        assert!(
            text.contains("red: B>>slow interpreter -> optimizing lost 40.00 ms (50 call(s) after a 50.00 ms compile)"),
            "{text}"
        );
        assert!(
            text.contains("A>>fast                           optimizing        10000"),
            "{text}"
        );
    }

    fn decision(m: u32, past_ns: u64, predicted_future_ns: u64) -> Event {
        ev(
            99 * MS,
            EventKind::TierDecision {
                method: MethodId(m),
                from: Tier::Interpreter,
                to: Tier::Optimizing,
                past_ns,
                predicted_compile_ns: MS,
                predicted_future_ns,
            },
        )
    }

    #[test]
    fn a_speedup_far_beyond_what_the_model_expects_is_not_the_same_calls_made_faster() {
        // A>>fast's calls cost 10× less after the move (100 µs → 10 µs).
        let verdict = |model_past: u64, model_future: u64| {
            let a = Amortization::new(&known_run(vec![
                decision(1, model_past, model_future),
                final_counts(0),
            ]))
            .unwrap();
            a.recompilations[0].verdict.clone()
        };
        // A model expecting the move to make it slower (0.5×): 10× is beyond 8 × 0.5.
        match verdict(MS, 2 * MS) {
            Verdict::Unclear { why } => {
                assert!(why.contains("did different work"), "{why}");
                assert!(why.contains("expects 0.5×") && !why.contains("  "), "{why}");
            }
            v => panic!("{v:?}"),
        }
        // A model expecting 2×: 10× is within reach.
        assert!(matches!(verdict(2 * MS, MS), Verdict::PaidOff { .. }));
        // A model expecting 100×: a 10× speedup is a slowdown of 10 against it, within
        // reach of 8 × the samples' error; one expecting 1,000× is not.
        assert!(matches!(verdict(100 * MS, MS), Verdict::PaidOff { .. }));
        match verdict(1000 * MS, MS) {
            Verdict::Unclear { why } => {
                assert!(why.contains("did different work"), "{why}");
                assert!(why.contains("expects 1000.0×"), "{why}");
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn calls_far_costlier_after_the_move_than_the_model_allows_get_no_verdict() {
        // B>>slow: 1 ms a call interpreted, 0.8 ms compiled, where the model expected the
        // move to make it 20× faster: beyond 8× short of the model even at the samples'
        // error.
        let a =
            Amortization::new(&known_run(vec![decision(2, 20 * MS, MS), final_counts(0)])).unwrap();
        match &a.recompilations[1].verdict {
            Verdict::Unclear { why } => {
                assert!(why.contains("its cost per call fell only 1.2×"), "{why}");
                assert!(why.contains("expects 20.0×"), "{why}");
            }
            v => panic!("{v:?}"),
        }
        // 60 more compiled samples: 2 ms a call, a slowdown.
        let mut p = known_run(vec![decision(2, 20 * MS, MS), final_counts(0)]);
        let compiled = RawFrame::Compiled {
            code: CodeVersionId(2),
            pc_offset: 0x10,
        };
        samples(&mut p.samples, 340, 60, compiled, VmState::Compiled);
        match &Amortization::new(&p).unwrap().recompilations[1].verdict {
            Verdict::Unclear { why } => {
                assert!(why.contains("its cost per call rose 2.0×"), "{why}");
                assert!(why.contains("far slower than the model's figures"), "{why}");
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn under_a_cpu_time_trigger_a_sample_stands_for_its_period_however_long_the_run_waited() {
        // 340 samples at 1 kHz, 10 more ticks merged by the kernel: 350 ms of CPU time in a
        // run that took longer by the wall clock (its last event at 700 ms).
        let mut p = known_run(vec![final_counts(0)]);
        p.header.sampler.trigger = "timer".into();
        p.header.sampler.rate_hz = 1000;
        p.counters.taken = 340;
        p.counters.ticks_merged = 10;
        p.events
            .push(ev(700 * MS, EventKind::ProgramEnd { exit_code: 0 }));
        let a = Amortization::new(&p).unwrap();
        assert_eq!(a.run_ns, 350 * MS);
        assert!(
            close(a.t_unit_ns, 350.0 / 340.0 * MS as f64),
            "{}",
            a.t_unit_ns
        );
        // A wall-clock trigger's samples stand for the wall-clock duration.
        p.header.sampler.trigger = "timer-wall".into();
        assert_eq!(Amortization::new(&p).unwrap().run_ns, 700 * MS);
    }

    #[test]
    fn a_cost_that_varies_more_than_sampling_explains_widens_the_error() {
        // A>>fast's 10,000 compiled calls read at each quarter of them: 25 samples each, or
        // 15, 35, 15 and 35 (costs too close to call the calls unlike, but varying more than
        // Poisson counts do).
        let quarters = |ends_ms: [u64; 3]| {
            let mut snapshots: Vec<Event> = ends_ms
                .iter()
                .zip([2_500, 5_000, 7_500])
                .map(|(&at, compiled)| {
                    counts(
                        at * MS,
                        &[
                            (1, Tier::Interpreter, 1_000),
                            (1, Tier::Optimizing, compiled),
                            (2, Tier::Interpreter, 100),
                        ],
                        0,
                    )
                })
                .collect();
            snapshots.push(final_counts(0));
            Amortization::new(&known_run(snapshots)).unwrap()
        };
        // The gain's range is 2 standard errors either way of 10,000 calls × the costs'
        // error: the interpreted cost's Poisson variance (101 samples² over 1,000² calls, at
        // 1 ms a sample) plus the compiled one's, Poisson (101 / 10,000²) when the quarters
        // agree, and the quarters' spread (4/3 × 4 × 10² / 10,000²) when they do not, an
        // estimate of three degrees of freedom: Student's t for Welch–Satterthwaite's
        // (101 + 5.33)² / (5.33² / 3) of them instead of 2.
        let width = |compiled_variance: f64, multiplier: f64| {
            2.0 * multiplier * 10_000.0 * (101e6 + compiled_variance).sqrt()
        };
        let range = |a: &Amortization| {
            let (lo, hi) = a.recompilations[0].gain_range_ns.unwrap();
            hi - lo
        };
        let even = quarters([225, 250, 275]);
        assert!(
            close(range(&even) / width(1.01e6, 2.0), 1.0),
            "{}",
            range(&even)
        );
        let uneven = quarters([215, 250, 265]);
        let spread: f64 = 4.0 / 3.0 * 400.0 * 1e4;
        let dof = (101e6 + spread).powi(2) / (spread * spread / 3.0);
        let t = tally_stats::distributions::t_quantile(0.97725, dof).unwrap();
        assert!(
            (range(&uneven) / width(spread, t) - 1.0).abs() < 1e-9,
            "{}",
            range(&uneven)
        );
        assert!(range(&uneven) > range(&even));
        assert!(matches!(
            uneven.recompilations[0].verdict,
            Verdict::PaidOff { .. }
        ));
    }

    #[test]
    fn the_counting_time_is_taken_out_of_the_time_a_sample_stands_for() {
        let a = Amortization::new(&known_run(vec![final_counts(34 * MS)])).unwrap();
        assert!(close(a.t_unit_ns, 0.9 * MS as f64));
    }

    /// `known_run` with A's compiled calls read when half of them (5,000) were made, at
    /// `at_ms` (A's 100 compiled samples fall one a millisecond from 201 ms on), and A's
    /// interpreted calls `interpreted` instead of 1,000.
    fn a_compiled_cost_that_changes(at_ms: u64, interpreted: u64) -> Amortization {
        let rows = |compiled: u64| {
            [
                (1, Tier::Interpreter, interpreted),
                (1, Tier::Optimizing, compiled),
                (2, Tier::Interpreter, 100),
                (2, Tier::Optimizing, 50),
            ]
        };
        let mid = counts(at_ms * MS, &rows(5_000)[..3], 0);
        let last = counts(340 * MS, &rows(10_000), 0);
        Amortization::new(&known_run(vec![mid, last])).unwrap()
    }

    #[test]
    fn a_cost_per_call_that_grows_within_a_tier_gets_no_verdict() {
        // 10 of the 100 compiled samples in the first half of the calls: 2 µs a call, then
        // 18 µs. Whatever the interpreted calls cost, later calls did other work.
        for interpreted in [1_000, 10_000] {
            let a = a_compiled_cost_that_changes(210, interpreted);
            match &a.recompilations[0].verdict {
                Verdict::Unclear { why } => assert!(
                    why.contains(
                        "calls differ in work: the cost per call in optimizing grew from 2.00 µs \
                         (calls 1–5000) to 18.00 µs (calls 5001–10000)"
                    ),
                    "{why}"
                ),
                v => panic!("{v:?}"),
            }
            assert!(matches!(
                a.recompilations[1].verdict,
                Verdict::DidNotPay { .. }
            ));
        }
    }

    #[test]
    fn a_cost_per_call_that_falls_within_a_tier_keeps_a_verdict_no_stretch_would_turn() {
        // 90 of the 100 compiled samples in the first half: 18 µs a call, then 2 µs (a
        // callee whose callers were compiled later). Against 100 µs interpreted, every
        // stretch gained; against 10 µs, the first did not.
        let a = a_compiled_cost_that_changes(290, 1_000);
        assert!(
            matches!(a.recompilations[0].verdict, Verdict::PaidOff { .. }),
            "{:?}",
            a.recompilations[0].verdict
        );
        match &a_compiled_cost_that_changes(290, 10_000).recompilations[0].verdict {
            Verdict::Unclear { why } => assert!(
                why.contains("the cost per call in optimizing fell from 18.00 µs"),
                "{why}"
            ),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn code_entered_only_by_on_stack_replacement_gets_no_verdict_and_unused_code_a_loss() {
        let mut p = known_run(vec![final_counts(0)]);
        // `C>>main` moved into optimized code while running (no call there) and ran 20 ms;
        // `D>>never` was compiled and never ran again.
        p.events.push(method(3, "C>>main"));
        p.events.push(method(4, "D>>never"));
        p.events.push(install(160 * MS, 3, 3, 2 * MS));
        p.events.push(install(170 * MS, 4, 4, 3 * MS));
        let compiled = RawFrame::Compiled {
            code: CodeVersionId(3),
            pc_offset: 0,
        };
        samples(&mut p.samples, 340, 20, compiled, VmState::Compiled);
        let a = Amortization::new(&p).unwrap();
        let of = |name: &str| {
            a.recompilations
                .iter()
                .find(|r| r.name == name)
                .unwrap()
                .verdict
                .clone()
        };
        match of("C>>main") {
            Verdict::Unclear { why } => assert!(why.contains("on-stack replacement"), "{why}"),
            v => panic!("{v:?}"),
        }
        match of("D>>never") {
            Verdict::DidNotPay { loss_ns } => assert!(close(loss_ns, 3.0 * MS as f64)),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn calls_that_cannot_repay_the_compile_did_not_pay_however_few_samples_price_them() {
        // B>>slow's 50 compiled calls would have cost about 56 ms interpreted (67 ms at the
        // most its 100 samples allow); its compile took 80 ms: a loss whatever its 5
        // compiled samples say.
        let mut p = known_run(vec![final_counts(0)]);
        p.samples.retain(|s| s.time_ns <= 305 * MS);
        if let EventKind::CodeInstalled(v) = &mut p.events[3].kind {
            v.compile_time_ns = 80 * MS;
        }
        let a = Amortization::new(&p).unwrap();
        match a.recompilations[1].verdict {
            Verdict::DidNotPay { loss_ns } => {
                // C + N·t_i − N·t_j with 5 samples over the 50 compiled calls and 100 over
                // the 100 interpreted ones: 80 ms + 5 − 50 samples' worth.
                let want = 80.0 * MS as f64 - 45.0 * a.t_unit_ns;
                assert!((loss_ns - want).abs() < 1.0, "{loss_ns} against {want}")
            }
            ref v => panic!("{v:?}"),
        }
    }

    #[test]
    fn a_tier_left_after_a_few_long_calls_gets_no_verdict() {
        // B>>slow's interpreted time was 5 calls (a main loop moved on by OSR, say).
        let counts = counts(
            340 * MS,
            &[
                (1, Tier::Interpreter, 1_000),
                (1, Tier::Optimizing, 10_000),
                (2, Tier::Interpreter, 5),
                (2, Tier::Optimizing, 50),
            ],
            0,
        );
        let a = Amortization::new(&known_run(vec![counts])).unwrap();
        match &a.recompilations[1].verdict {
            Verdict::Unclear { why } => assert!(why.contains("only 5 call(s)"), "{why}"),
            v => panic!("{v:?}"),
        }
        assert!(matches!(
            a.recompilations[0].verdict,
            Verdict::PaidOff { .. }
        ));
    }

    #[test]
    fn too_few_samples_or_no_counts_give_no_verdict() {
        let mut p = known_run(vec![final_counts(0)]);
        p.samples.retain(|s| s.time_ns <= 305 * MS);
        let a = Amortization::new(&p).unwrap();
        match &a.recompilations[1].verdict {
            Verdict::Unclear { why } => {
                // 50 compiled calls priced by 5 samples: a gain of 0.16 ms ± 6 ms.
                assert!(why.contains("within the error of the samples"), "{why}");
                assert!(
                    why.contains("too near zero for more samples to tell"),
                    "{why}"
                );
            }
            v => panic!("{v:?}"),
        }
        assert_eq!(Amortization::new(&example_profile()), None);
    }
}
