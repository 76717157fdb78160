//! Block evaluation: `value`, `value:` … push a frame for the block's code.

use super::Table;
use crate::{Vm, VmError};

pub static BLOCK: Table = &[("value", value), ("restart", restart)];
pub static BLOCK_N: Table = &[
    ("value", value),
    ("value:", value),
    ("value:with:", value),
    ("value:with:with:", value),
];

fn value(vm: &mut Vm, argc: usize) -> Result<(), VmError> {
    vm.invoke_block(argc)
}

/// Restarts the method that sent `restart` (the non-inlined `whileTrue:` of SOM's library):
/// its operand stack is emptied and it runs again from its first instruction. Nothing is
/// answered; the interpreter resumes the frame at `ip`.
fn restart(vm: &mut Vm, _argc: usize) -> Result<(), VmError> {
    let f = vm.rt.frames.top_mut();
    let code = vm.rt.codes[f.code as usize];
    let keep = f.bp() + 1 + code.num_args as usize + code.num_locals as usize;
    f.ip = 0;
    vm.rt.stack.truncate(keep);
    Ok(())
}
