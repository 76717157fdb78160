//! Firefox Profiler export (the "processed" format, through the
//! fxprof-processed-profile crate). Each VM state is a category, so the
//! profiler's activity graph colours time by interpreter, primitives, GC,
//! compiler, runtime and compiled code.

use fxprof_processed_profile::{
    CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo, Profile as FxProfile,
    ReferenceTimestamp, SamplingInterval, Timestamp,
};

use super::frame_label;
use crate::ids::VmState;
use crate::profile::Profile;

fn color(s: VmState) -> CategoryColor {
    match s {
        VmState::Interpreting => CategoryColor::Blue,
        VmState::Primitive => CategoryColor::Orange,
        VmState::Gc => CategoryColor::Yellow,
        VmState::Compiling => CategoryColor::Purple,
        VmState::Runtime => CategoryColor::Gray,
        VmState::Compiled => CategoryColor::Green,
    }
}

pub fn to_profile(p: &Profile) -> FxProfile {
    let symbols = p.symbols();
    let rate = p.header.sampler.rate_hz.max(1);
    let period_ns = 1_000_000_000u64 / u64::from(rate);
    let reference = ReferenceTimestamp::from_millis_since_unix_epoch(
        p.header.start_unix_ns as f64 / 1_000_000.0,
    );
    // The processed format has no field for the clock samples were taken on; the product
    // name is what the profiler shows at the top, so a wall-clock profile says so there.
    let clock = if p.header.sampler.is_wall_clock() {
        "wall-clock samples"
    } else {
        "CPU-time samples"
    };
    let product = format!("{} {} ({clock})", p.header.vm_name, p.header.program);
    let mut fx = FxProfile::new(&product, reference, SamplingInterval::from_nanos(period_ns));
    let categories: Vec<CategoryHandle> = VmState::ALL
        .iter()
        .map(|&s| fx.add_category(s.name(), color(s)))
        .collect();
    let start = p.header.start_time_ns;
    let process = fx.add_process(
        &p.header.vm_name,
        1,
        Timestamp::from_nanos_since_reference(0),
    );
    let thread = fx.add_thread(process, 1, Timestamp::from_nanos_since_reference(0), true);
    fx.set_thread_name(thread, &format!("VM ({clock})"));
    for s in &p.samples {
        let category = categories[s.state as usize];
        let logical = symbols.resolve_stack(&s.frames);
        let labels: Vec<String> = if logical.is_empty() {
            vec![format!("[{}]", s.state.name())]
        } else {
            logical
                .iter()
                .rev()
                .map(|f| frame_label(&symbols, f))
                .collect()
        };
        let frames: Vec<FrameInfo> = labels
            .iter()
            .map(|l| FrameInfo {
                frame: Frame::Label(fx.intern_string(l)),
                category_pair: category.into(),
                flags: FrameFlags::empty(),
            })
            .collect();
        let stack = fx.intern_stack_frames(thread, frames.into_iter());
        fx.add_sample(
            thread,
            Timestamp::from_nanos_since_reference(s.time_ns.saturating_sub(start)),
            stack,
            CpuDelta::from_nanos(period_ns),
            1,
        );
    }
    fx
}

pub fn to_json(p: &Profile) -> serde_json::Value {
    serde_json::to_value(to_profile(p)).expect("the processed profile always serializes")
}
