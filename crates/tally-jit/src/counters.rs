//! `--count-calls` in compiled code: the exhaustive mode's counters live in each `Code`
//! (`tally_vm::jit::TierCallCounter`), one column per tier; code of every tier bumps them
//! where it calls or loops without the VM seeing it.

use cranelift_codegen::ir::{types, InstBuilder, MemFlagsData};
use cranelift_frontend::FunctionBuilder;
use tally_vm::jit::TierCallCounter;
use tally_vm::runtime::Code;

/// One call of `code` in the tier of `column`.
pub(crate) fn count_call(b: &mut FunctionBuilder, code: &Code, column: usize) {
    increment_in_code(b, code, TierCallCounter::offset_in_code(column));
}

/// One back-edge of `code` taken in the tier of `column`.
pub(crate) fn count_loop(b: &mut FunctionBuilder, code: &Code, column: usize) {
    increment_in_code(b, code, TierCallCounter::loops_offset_in_code(column));
}

/// Adds one to the counter at `offset` in `code` (only the VM thread writes it; codes live
/// as long as the VM, so their address is a constant).
fn increment_in_code(b: &mut FunctionBuilder, code: &Code, offset: i32) {
    let flags = MemFlagsData::trusted();
    let counter = b
        .ins()
        .iconst(types::I64, code as *const Code as i64 + i64::from(offset));
    let n = b.ins().load(types::I64, flags, counter, 0);
    let more = b.ins().iadd_imm_s(n, 1);
    b.ins().store(flags, more, counter, 0);
}
