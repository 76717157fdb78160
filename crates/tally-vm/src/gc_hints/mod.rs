//! GC hints in the VM (Buytaert et al., HiPEAC 2005): a run that records where the live data
//! is repeatedly at a minimum, and a run that collects there when a collection is near.
//!
//! Hinted methods are method hooks (`method_hooks`): a hinted method's entry and exit call
//! [`Vm::gc_hint_at`] (compiled code only while [`METHOD_HOOKS_ARMED`] is set), and hinted
//! methods keep their frames (are never inlined).
//!
//! In a run with hints nothing happens at a hinted point until the allocation alarm rings
//! ([`tally_heap::Heap::set_alarm`]: a collection is near): the point then asks the cost
//! model, and the alarm is off again until the next collection or, when the model declined,
//! a little more allocation.
//!
//! Points are methods, not blocks; exits by a non-local return are not points.

mod apply;
mod record;

use std::path::Path;
use std::sync::atomic::Ordering;

use tally_profile::gc_hints::{
    favorable_points, AnalysisSettings, GcHints, HintsError, PointKind, ProgramIdentity,
};

use crate::method_hooks::{HookedMethods, METHOD_HOOKS_ARMED};
use crate::runtime::{Code, HOOK_AT_ENTRY, HOOK_AT_EXIT, HOOK_KEEPS_FRAME};
use crate::{Vm, VmError};

enum Mode {
    Record(record::Recording),
    Use(apply::Applied),
}

pub(crate) struct GcHintsRuntime {
    mode: Mode,
}

/// What a recording run found.
#[derive(Debug, Clone)]
pub struct HintsRecording {
    pub hints: GcHints,
    /// Method entries and exits reached, and how many were measured (a full collection each).
    pub reaches: u64,
    pub measurements: usize,
    /// Whether the measurement budget ran out before the program ended.
    pub budget_exhausted: bool,
}

/// What hints did in a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HintsUse {
    pub points: usize,
    /// Hinted points reached while a collection was near.
    pub consulted: u64,
    /// The collections the hints made.
    pub nursery: u64,
    pub full: u64,
}

/// A program's identity for its hints file: the program as its run names it (the main file's
/// or class's name), and an FNV-1a hash over the source of the main class and of every class
/// a hinted method belongs to, so that hints recorded for other code are refused.
fn identity_of(
    vm: &Vm,
    program: &[String],
    classes: &std::collections::BTreeSet<String>,
) -> Result<ProgramIdentity, VmError> {
    let main = program
        .first()
        .ok_or_else(|| VmError::Load("no class or file given to run".into()))?;
    let main_path = Path::new(main);
    let main_is_file = main.ends_with(".som") || main_path.is_file();
    let mut dirs = Vec::new();
    if main_is_file {
        dirs.push(
            main_path
                .parent()
                .filter(|d| !d.as_os_str().is_empty())
                .unwrap_or(Path::new("."))
                .to_path_buf(),
        );
    }
    dirs.extend(vm.options.class_path.iter().cloned());
    let mut hash = Fnv64::new();
    let main_text = if main_is_file {
        std::fs::read_to_string(main_path)
            .map_err(|e| VmError::Load(format!("cannot read {main}: {e}")))?
    } else {
        vm.class_source_text(&dirs, main)?.unwrap_or_default()
    };
    hash.add(main.as_bytes());
    hash.add(main_text.as_bytes());
    for class in classes {
        hash.add(class.as_bytes());
        if let Some(text) = vm.class_source_text(&dirs, class)? {
            hash.add(text.as_bytes());
        }
    }
    let name = main_path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| main.clone())
        .replace(char::is_whitespace, "_");
    Ok(ProgramIdentity {
        name,
        fingerprint: hash.finish(),
    })
}

/// The class a point's method belongs to: `Foo` for `Foo>>bar` and `Foo class>>bar`.
fn class_of_method(method: &str) -> String {
    let holder = method.split(">>").next().unwrap_or(method);
    holder.strip_suffix(" class").unwrap_or(holder).to_string()
}

struct Fnv64(u64);

impl Fnv64 {
    fn new() -> Fnv64 {
        Fnv64(0xcbf2_9ce4_8422_2325)
    }
    /// Adds `bytes` and a separator, so that ("ab", "c") and ("a", "bc") differ.
    fn add(&mut self, bytes: &[u8]) {
        for &b in bytes.iter().chain(&[0xff]) {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

impl Vm {
    /// Makes this run record GC hints: every method entry and exit is looked at, and at some
    /// the live data is measured by a full collection. Run the interpreter (compiled code
    /// inlines methods, which then have no entry or exit); under SemiSpace the space in use
    /// after a full collection is the live data. Ask [`Vm::finish_gc_hints_recording`] at the
    /// end.
    pub fn record_gc_hints(&mut self) -> Result<(), VmError> {
        self.start_gc_hints(Mode::Record(record::Recording::default()))?;
        self.hook_methods(HookedMethods::All(
            HOOK_AT_ENTRY | HOOK_AT_EXIT | HOOK_KEEPS_FRAME,
        ))
    }

    /// Checks `hints` against this VM and `program` (its command line's program word first),
    /// then uses them for the rest of the run.
    pub fn use_gc_hints(
        &mut self,
        hints: &GcHints,
        program: &[String],
    ) -> Result<Result<(), HintsError>, VmError> {
        let classes = hints
            .points
            .iter()
            .map(|p| class_of_method(&p.method))
            .collect();
        let identity = identity_of(self, program, &classes)?;
        if let Err(e) = hints.check_fits(env!("CARGO_PKG_VERSION"), &identity) {
            return Ok(Err(e));
        }
        self.start_gc_hints(Mode::Use(apply::Applied::new(hints)))?;
        let mut methods = rustc_hash::FxHashMap::default();
        for p in &hints.points {
            let bit = match p.kind {
                PointKind::Entry => HOOK_AT_ENTRY,
                PointKind::Exit => HOOK_AT_EXIT,
            };
            *methods.entry(p.method.clone()).or_insert(HOOK_KEEPS_FRAME) |= bit;
        }
        if !methods.is_empty() {
            // Without points nothing is ever looked at: no alarm either.
            self.hook_methods(HookedMethods::Named(methods))?;
            self.heap.set_alarm(Some(apply::ALARM_SHARE));
        }
        Ok(Ok(()))
    }

    fn start_gc_hints(&mut self, mode: Mode) -> Result<(), VmError> {
        if !cfg!(feature = "profiling") {
            return Err(VmError::Fatal(
                "GC hints need the interpreter's hooks (cargo feature `profiling`)".into(),
            ));
        }
        if self.gc_hints.is_some() {
            return Err(VmError::Fatal("GC hints were set up twice".into()));
        }
        METHOD_HOOKS_ARMED.store(false, Ordering::Relaxed);
        self.gc_hints = Some(Box::new(GcHintsRuntime { mode }));
        Ok(())
    }

    /// The end of a recording run: the favorable points of its measurements, as hints for
    /// `program`.
    pub fn finish_gc_hints_recording(
        &mut self,
        program: &[String],
    ) -> Result<Option<HintsRecording>, VmError> {
        let Some(Mode::Record(recording)) = self.gc_hints.as_deref().map(|h| &h.mode) else {
            return Ok(None);
        };
        let measurements = recording.measurements(|c| self.rt.code_name(self.rt.codes[c as usize]));
        let points = favorable_points(&measurements, &AnalysisSettings::default());
        let classes = points.iter().map(|p| class_of_method(&p.method)).collect();
        let (reaches, budget_exhausted) = (recording.reaches, recording.exhausted());
        let program_identity = identity_of(self, program, &classes)?;
        Ok(Some(HintsRecording {
            hints: GcHints {
                vm_version: env!("CARGO_PKG_VERSION").into(),
                program: program_identity,
                points,
            },
            reaches,
            measurements: measurements.len(),
            budget_exhausted,
        }))
    }

    /// What the hints of this run did, if it used any.
    pub fn gc_hints_use(&self) -> Option<HintsUse> {
        match self.gc_hints.as_deref().map(|h| &h.mode) {
            Some(Mode::Use(a)) => Some(HintsUse {
                points: a.points,
                consulted: a.consulted,
                nursery: a.nursery,
                full: a.full,
            }),
            _ => None,
        }
    }

    /// The allocation alarm rang: a collection is near, so hinted points look at the cost
    /// model from now on.
    #[cold]
    #[inline(never)]
    pub(crate) fn gc_hint_alarm(&mut self) {
        let collections = self.heap.collections();
        if let Some(GcHintsRuntime { mode: Mode::Use(a) }) = self.gc_hints.as_deref_mut() {
            a.armed_at_collection = collections;
            METHOD_HOOKS_ARMED.store(true, Ordering::Relaxed);
        }
    }

    /// A hinted method's entry (its frame set up) or exit (around its frame's pop). May
    /// collect.
    #[cold]
    #[inline(never)]
    pub(crate) fn gc_hint_at(
        &mut self,
        code: &'static Code,
        kind: PointKind,
    ) -> Result<(), VmError> {
        let allocated = self.heap.allocated_bytes();
        let collections = self.heap.collections();
        let Some(h) = self.gc_hints.as_deref_mut() else {
            return Ok(());
        };
        match &mut h.mode {
            Mode::Record(r) => {
                if r.wants_measurement(code.id, kind, allocated) {
                    self.heap
                        .collect_for(&mut self.rt, tally_heap::GcKind::Probe, true);
                    let live = self.heap.stats().heap_used_bytes as u64;
                    if let Some(GcHintsRuntime {
                        mode: Mode::Record(r),
                    }) = self.gc_hints.as_deref_mut()
                    {
                        r.probes.push(record::Probe {
                            code: code.id,
                            kind,
                            allocated_bytes: allocated,
                            live_bytes: live,
                        });
                    }
                }
            }
            Mode::Use(a) => {
                if !METHOD_HOOKS_ARMED.load(Ordering::Relaxed) {
                    return Ok(());
                }
                METHOD_HOOKS_ARMED.store(false, Ordering::Relaxed);
                if collections != a.armed_at_collection {
                    // A collection came first: nothing is near any more.
                    return Ok(());
                }
                let rt = &self.rt;
                let Some(expected) = a.hinted(code.id, kind, || rt.code_name(code)) else {
                    return Ok(());
                };
                a.consulted += 1;
                let stats = self.heap.stats();
                let decision = apply::decide(expected, &stats);
                match decision {
                    apply::Decision::Nothing => {
                        let room = if stats.nursery_bytes > 0 {
                            stats.nursery_bytes
                        } else {
                            stats.heap_available_bytes
                        };
                        self.heap
                            .snooze_alarm((room as f64 * apply::SNOOZE_SHARE) as u64);
                    }
                    apply::Decision::Nursery | apply::Decision::Full => {
                        let full = decision == apply::Decision::Full;
                        if full {
                            a.full += 1;
                        } else {
                            a.nursery += 1;
                        }
                        self.heap
                            .collect_for(&mut self.rt, tally_heap::GcKind::Hint, full);
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_points_class_is_its_holder_without_the_class_side() {
        assert_eq!(class_of_method("Storage>>benchmark"), "Storage");
        assert_eq!(class_of_method("Json class>>parse:"), "Json");
    }

    #[test]
    fn the_fingerprint_tells_apart_where_the_bytes_split() {
        let mut a = Fnv64::new();
        a.add(b"ab");
        a.add(b"c");
        let mut b = Fnv64::new();
        b.add(b"a");
        b.add(b"bc");
        assert_ne!(a.finish(), b.finish());
    }
}
