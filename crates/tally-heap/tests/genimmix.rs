//! The GenImmix plan: the write barrier, nursery and full collections, and stress. Its own
//! process because it needs its own `Heap`.

mod common;

use common::generational::check_generational_plan;
use tally_heap::GcPlan;

#[test]
fn genimmix_keeps_old_to_young_references_and_collects_both_generations() {
    check_generational_plan(GcPlan::GenImmix);
}
